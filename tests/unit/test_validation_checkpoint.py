"""The checkpoint check's comparison: where two next steps differ."""

from __future__ import annotations

from openenv_cli.validation.checkpoint import differences


def test_equal_values_have_no_differences() -> None:
    value = {"observation": {"a": [1, 2], "b": {"c": None}}, "reward": 1.0, "done": False}
    assert differences(value, value) == []


def test_differences_name_their_dotted_paths() -> None:
    expected = {"observation": {"a": 1, "b": {"c": 2}}, "reward": 1.0, "gone": 1}
    got = {"observation": {"a": 1, "b": {"c": 3}}, "reward": 0.5, "new": 2}
    assert differences(expected, got) == ["gone", "new", "observation.b.c", "reward"]
    assert differences([1], [2]) == ["(value)"]

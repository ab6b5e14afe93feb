"""RolloutSettings: the configuration of a rollout function, in one object, each default once."""

from __future__ import annotations

import inspect
from dataclasses import fields

import pytest

from openenv_runtime.rollouts import RolloutFunc, RolloutSettings, build_rollout_func
from openenv_runtime.rollouts.settings import RolloutOptions


def test_the_keywords_are_the_settings_fields_and_carry_no_defaults() -> None:
    assert set(RolloutOptions.__annotations__) == {f.name for f in fields(RolloutSettings)}
    assert RolloutOptions.__total__ is False


def test_keywords_and_a_settings_object_give_the_same_function() -> None:
    by_keywords = build_rollout_func(
        "http://127.0.0.1:9", llm="http://127.0.0.1:9", model="m", group_size=3, max_turns=2
    )
    by_object = build_rollout_func(
        "http://127.0.0.1:9",
        llm="http://127.0.0.1:9",
        model="m",
        settings=RolloutSettings(group_size=3, concurrency=5),
        max_turns=2,  # replaces the object's field
    )
    assert by_keywords.settings == RolloutSettings(group_size=3, max_turns=2)
    assert by_object.settings == RolloutSettings(group_size=3, max_turns=2, concurrency=5)
    assert by_object.player.max_turns == 2


def test_a_keyword_that_is_not_a_setting_is_refused() -> None:
    with pytest.raises(TypeError, match="turns"):
        build_rollout_func("http://127.0.0.1:9", llm="u", model="m", turns=3)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "bad", [{"group_size": 0}, {"max_turns": 0}, {"concurrency": 0}, {"max_error_rate": 1.5}]
)
def test_settings_out_of_range_are_refused_when_made(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RolloutSettings(**bad)  # type: ignore[arg-type]


def test_sampling_entries_win_over_the_named_options() -> None:
    settings = RolloutSettings(temperature=0.5, top_p=0.9, sampling={"temperature": 1.0, "n": 1})
    assert settings.sampling_options == {"temperature": 1.0, "top_p": 0.9, "n": 1}
    assert RolloutSettings().sampling_options == {}


def test_rollout_func_takes_its_configuration_as_one_object() -> None:
    parameters = set(inspect.signature(RolloutFunc.__init__).parameters)
    assert parameters.isdisjoint({f.name for f in fields(RolloutSettings)})
    assert "settings" in parameters

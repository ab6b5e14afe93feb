"""Which action ``openenv bench`` sends: flags, the built-in one, openenv.yaml, /schema (order and errors).

The server's /schema is stood in for here; ``tests/integration/test_bench_action.py`` reads
a real one and steps a real generated environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from openenv_cli.bench import action as bench_action
from openenv_cli.bench.action import BUILT_IN, parse_action, read_action_file, resolve_action
from openenv_cli.bench.stats import is_refusal, refusal
from openenv_cli.errors import OpenEnvError, UsageError

ECHO_SCHEMA = {
    "type": "object",
    "properties": {"message": {"type": "string"}, "metadata": {"type": "object", "default": {}}},
    "required": ["message"],
}
WAIT_SCHEMA = {"type": "object", "properties": {"wait": {"type": "number", "default": 0.0}}}


@pytest.fixture()
def schema(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    served: dict[str, Any] = {"action": ECHO_SCHEMA}

    def fake(
        base_url: str, timeout: float, token: str | None = None, token_source: str | None = None
    ) -> dict[str, Any]:
        served["token"] = token
        if served["action"] is None:
            raise OpenEnvError("Could not read /schema")
        return dict(served["action"])

    monkeypatch.setattr(bench_action, "served_action_schema", fake)
    return served


def resolve(tmp_path: Path, **kwargs: Any) -> bench_action.StepAction:
    options: dict[str, Any] = {
        "action": None,
        "action_file": None,
        "serve": False,
        "base_url": "http://127.0.0.1:1",
        "project_dir": tmp_path,
    }
    return resolve_action(**{**options, **kwargs})


class TestParse:
    def test_object(self) -> None:
        assert parse_action('{"a": [1, {"b": null}]}', "--action") == {"a": [1, {"b": None}]}

    @pytest.mark.parametrize("text", ["", "{", "[1]", '"x"', "3"])
    def test_refuses_what_is_not_an_object(self, text: str) -> None:
        with pytest.raises(UsageError):
            parse_action(text, "--action")

    def test_file(self, tmp_path: Path) -> None:
        path = tmp_path / "a.json"
        path.write_text('{"message": "hi"}')
        assert read_action_file(path) == {"message": "hi"}
        with pytest.raises(UsageError, match="Cannot read"):
            read_action_file(tmp_path / "missing.json")
        path.write_bytes(b" " * (bench_action.MAX_ACTION_FILE_BYTES + 1))
        with pytest.raises(UsageError, match="larger than 1 MiB"):
            read_action_file(path)


class TestResolve:
    def test_both_flags_are_a_usage_error(self, tmp_path: Path) -> None:
        with pytest.raises(UsageError, match="not both"):
            resolve(tmp_path, action="{}", action_file=tmp_path / "a.json")

    def test_serve_uses_the_built_in_action_with_the_wait(self, tmp_path: Path) -> None:
        chosen = resolve(tmp_path, serve=True)
        assert (chosen.value, chosen.source, chosen.wait_field) == ({}, BUILT_IN, True)
        assert not resolve(tmp_path, serve=True, action='{"wait": 2}').wait_field

    def test_schema_example(self, tmp_path: Path, schema: dict[str, Any]) -> None:
        chosen = resolve(tmp_path)
        assert chosen.value == {"message": "hello"}
        assert "/schema" in chosen.source and not chosen.wait_field

    def test_project_example_wins_over_the_schema(
        self, tmp_path: Path, schema: dict[str, Any]
    ) -> None:
        (tmp_path / "openenv.yaml").write_text(
            "name: x\napp: x.server.app:app\nexample_action:\n  message: from yaml\n"
        )
        chosen = resolve(tmp_path)
        assert chosen.value == {"message": "from yaml"} and "openenv.yaml" in chosen.source

    def test_flag_wins_over_the_project(self, tmp_path: Path, schema: dict[str, Any]) -> None:
        (tmp_path / "openenv.yaml").write_text(
            "name: x\napp: x.server.app:app\nexample_action:\n  message: from yaml\n"
        )
        assert resolve(tmp_path, action='{"message": "flag"}').value == {"message": "flag"}

    def test_a_wait_field_takes_the_wait_grid(self, tmp_path: Path, schema: dict[str, Any]) -> None:
        schema["action"] = WAIT_SCHEMA
        assert resolve(tmp_path).wait_field
        assert resolve(tmp_path, action="{}").wait_field

    def test_unreadable_schema(self, tmp_path: Path, schema: dict[str, Any]) -> None:
        schema["action"] = None
        with pytest.raises(OpenEnvError):
            resolve(tmp_path)
        chosen = resolve(tmp_path, action='{"x": 1}')  # the runs will tell what is wrong
        assert chosen.value == {"x": 1} and not chosen.wait_field


class TestRefusal:
    @pytest.mark.parametrize(
        "label",
        [
            "step: error VALIDATION_ERROR",
            "reset: error EXECUTION_ERROR",
            "step: HTTP 422",
            "step: unparsable reply",
            'step: error VALIDATION_ERROR: {"type":"error"}',
        ],
    )
    def test_refusals(self, label: str) -> None:
        assert is_refusal(label)

    @pytest.mark.parametrize(
        "label",
        [
            "connect: timeout",
            "reset: error CAPACITY_REACHED",
            "reset: HTTP 503 CAPACITY_REACHED",
            "step: timeout",
            "close: HTTP 404",
            "session: deadline reached",
        ],
    )
    def test_load_failures_are_measurements(self, label: str) -> None:
        assert not is_refusal(label)

    def test_half_or_more_refused_stops_with_the_first_sample(self) -> None:
        errors = {"connect: timeout": 3, "step: error VALIDATION_ERROR": 5}
        samples = ["connect: timeout", "step: error VALIDATION_ERROR: {...}"]
        assert refusal(errors, samples, 10) == "step: error VALIDATION_ERROR: {...}"
        assert refusal(errors, samples, 11) is None
        assert refusal({"connect: timeout": 10}, samples, 10) is None
        assert refusal({"step: HTTP 422": 2}, [], 2) == "step: HTTP 422"

"""openenv_runtime.evals: the records, the harness interface, and Inspect AI's harness (no Inspect run)."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from openenv_runtime.evals import EvalConfig, EvalHarness, EvalResult, InspectAIHarness
from tests.support.optional import require


def config(**changes: Any) -> EvalConfig:
    values: dict[str, Any] = {
        "harness_name": "Echo",
        "harness_version": "1.0",
        "library_versions": {"openenv-runtime": "0.2"},
        "dataset": "gsm8k",
        "eval_parameters": {"model": "m", "temperature": 0.0},
    }
    return EvalConfig(**{**values, **changes})


class Echo(EvalHarness):
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def run(
        self,
        harness_version: str,
        library_versions: dict[str, str],
        dataset: str,
        eval_parameters: dict[str, Any],
    ) -> dict[str, Any]:
        self.calls.append(
            {
                "harness_version": harness_version,
                "library_versions": library_versions,
                "dataset": dataset,
                "eval_parameters": eval_parameters,
            }
        )
        return {"accuracy": 0.75}


def test_records_refuse_unknown_and_missing_fields_and_bad_assignments() -> None:
    with pytest.raises(ValidationError):
        config(seed=1)
    with pytest.raises(ValidationError):
        EvalConfig(harness_name="x")  # type: ignore[call-arg]
    record = config()
    with pytest.raises(ValidationError):
        record.library_versions = "not a dict"  # type: ignore[assignment]
    result = EvalResult(config=record, scores={"accuracy": 1.0})
    with pytest.raises(ValidationError):
        EvalResult(config=record, scores={}, notes="x")  # type: ignore[call-arg]
    assert EvalResult.model_validate_json(result.model_dump_json()) == result


def test_harness_is_abstract_and_run_from_config_keeps_the_config() -> None:
    with pytest.raises(TypeError):
        EvalHarness()  # type: ignore[abstract]
    harness = Echo()
    result = harness.run_from_config(config())
    assert result.config == config() and result.scores == {"accuracy": 0.75}
    assert harness.calls == [
        {
            "harness_version": "1.0",
            "library_versions": {"openenv-runtime": "0.2"},
            "dataset": "gsm8k",
            "eval_parameters": {"model": "m", "temperature": 0.0},
        }
    ]
    assert harness.name == "Echo" and InspectAIHarness().name == "InspectAIHarness"


def test_inspect_harness_without_inspect_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    with pytest.raises(ImportError, match=r"openenv-runtime\[evals\]"):
        InspectAIHarness().run("1", {}, "task.py", {"model": "mockllm/model"})


def test_inspect_harness_needs_a_model() -> None:
    require("inspect_ai")
    with pytest.raises(ValueError, match="model"):
        InspectAIHarness().run("1", {}, "task.py", {})


def test_scores_flatten_every_scorer() -> None:
    metric = lambda value: SimpleNamespace(value=value)  # noqa: E731
    log = SimpleNamespace(
        results=SimpleNamespace(
            scores=[
                SimpleNamespace(metrics={"accuracy": metric(0.5), "stderr": metric(0.1)}),
                SimpleNamespace(metrics={"f1": metric(0.7)}),
            ]
        )
    )
    assert InspectAIHarness._extract_scores(log) == {"accuracy": 0.5, "stderr": 0.1, "f1": 0.7}
    assert InspectAIHarness._extract_scores(SimpleNamespace(results=None)) == {}

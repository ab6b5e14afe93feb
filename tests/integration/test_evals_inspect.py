"""InspectAIHarness runs a real Inspect AI task offline (its mockllm model, answers scripted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv_runtime.evals import EvalConfig, InspectAIHarness

TASK = """\
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match
from inspect_ai.solver import generate


@task
def arithmetic():
    return Task(
        dataset=[Sample(input="2 + 2?", target="4"), Sample(input="3 + 3?", target="6")],
        solver=[generate()],
        scorer=match(),
    )
"""


def _scripted(*answers: str) -> list[object]:
    from inspect_ai.model import ModelOutput, ModelUsage

    outputs = []
    for answer in answers:
        output = ModelOutput.from_content(model="mockllm", content=answer)
        # with usage given, mockllm does not count tokens (that would download a tokenizer)
        output.usage = ModelUsage(input_tokens=5, output_tokens=1, total_tokens=6)
        outputs.append(output)
    return outputs


def test_inspect_task_scores_the_scripted_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INSPECT_DISPLAY", "none")
    (tmp_path / "task.py").write_text(TASK)
    monkeypatch.chdir(tmp_path)
    harness = InspectAIHarness(log_dir=str(tmp_path / "logs"))
    config = EvalConfig(
        harness_name=harness.name,
        harness_version="inspect-ai",
        library_versions={},
        dataset="task.py",
        eval_parameters={
            "model": "mockllm/model",
            "model_args": {"custom_outputs": _scripted("4", "7")},
        },
    )
    result = harness.run_from_config(config)
    assert result.scores["accuracy"] == pytest.approx(0.5)
    assert result.config == config
    assert list((tmp_path / "logs").iterdir()), "Inspect wrote no log"


def test_inspect_failure_is_reported_with_its_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INSPECT_DISPLAY", "none")
    (tmp_path / "task.py").write_text(TASK)
    monkeypatch.chdir(tmp_path)
    harness = InspectAIHarness(log_dir=str(tmp_path / "logs"))
    with pytest.raises(RuntimeError, match=r"failed with status error: .*ran out"):
        harness.run(
            "x",
            {},
            "task.py",
            {"model": "mockllm/model", "model_args": {"custom_outputs": _scripted("4")}},
        )

"""Evaluations run by Inspect AI (``pip install 'openenv-runtime[evals]'``)."""

from __future__ import annotations

from typing import Any

from .base import EvalHarness

# eval_parameters passed on to inspect_ai.eval() when set (None means "Inspect's default").
_PASSED_WHEN_SET = ("max_samples", "temperature", "max_tokens", "epochs", "solver", "scorer")
_PASSED_WHEN_NON_EMPTY = ("task_args", "model_args")


class InspectAIHarness(EvalHarness):
    """Runs an Inspect AI task and returns its metrics as scores.

    ``eval_parameters``: ``model`` (required, e.g. ``"openai/gpt-4o"`` or Inspect's offline
    ``"mockllm/model"``); ``task`` (a task name, file or object; defaults to ``dataset``);
    ``task_args`` and ``model_args`` (dicts); ``max_samples``, ``temperature``,
    ``max_tokens``, ``epochs``, ``solver``, ``scorer`` (passed on when not None).
    Logs go to ``log_dir`` when given, else to Inspect's default place.

    ``inspect_ai`` is imported when an evaluation runs, so this class imports without it.
    """

    def __init__(self, *, log_dir: str | None = None) -> None:
        self.log_dir = log_dir

    def run(
        self,
        harness_version: str,
        library_versions: dict[str, str],
        dataset: str,
        eval_parameters: dict[str, Any],
    ) -> dict[str, Any]:
        """Run the task with Inspect AI; returns every metric of every scorer by name."""
        try:
            from inspect_ai import eval as inspect_eval
        except ImportError:
            raise ImportError(
                "inspect-ai is required for InspectAIHarness: "
                "pip install 'openenv-runtime[evals]' (or pip install inspect-ai)."
            ) from None
        model = eval_parameters.get("model")
        if model is None:
            raise ValueError(
                "eval_parameters needs 'model', the model Inspect AI evaluates "
                "(e.g. 'openai/gpt-4o', or 'mockllm/model' to try a task offline)."
            )
        options: dict[str, Any] = {
            key: eval_parameters[key]
            for key in _PASSED_WHEN_SET
            if eval_parameters.get(key) is not None
        }
        options.update(
            {
                key: eval_parameters[key]
                for key in _PASSED_WHEN_NON_EMPTY
                if eval_parameters.get(key)
            }
        )
        if self.log_dir is not None:
            options["log_dir"] = self.log_dir
        logs = inspect_eval(eval_parameters.get("task", dataset), model=model, **options)
        if not logs:
            raise RuntimeError("Inspect AI returned no logs: check the task and the model names.")
        log = logs[0]
        if log.status != "success":
            error = getattr(log, "error", None)
            detail = f": {getattr(error, 'message', error)}" if error else ""
            raise RuntimeError(f"Inspect AI evaluation failed with status {log.status}{detail}")
        return self._extract_scores(log)

    @staticmethod
    def _extract_scores(log: Any) -> dict[str, Any]:
        """Metric name → value over all scorers of an Inspect ``EvalLog`` (empty without results)."""
        if log.results is None:
            return {}
        return {
            name: metric.value
            for score in log.results.scores
            for name, metric in score.metrics.items()
        }

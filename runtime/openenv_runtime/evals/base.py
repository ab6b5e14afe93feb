"""The interface every evaluation harness implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from .types import EvalConfig, EvalResult


class EvalHarness(ABC):
    """An evaluation harness: subclasses implement :meth:`run`; the rest comes with the base.

    ``run_from_config(config)`` runs from a stored :class:`EvalConfig` and returns an
    :class:`EvalResult` holding that config beside the scores, so a result says how to
    reproduce it.
    """

    @abstractmethod
    def run(
        self,
        harness_version: str,
        library_versions: dict[str, str],
        dataset: str,
        eval_parameters: dict[str, Any],
    ) -> dict[str, Any]:
        """Run the evaluation; returns metric name → value."""

    def run_from_config(self, config: EvalConfig) -> EvalResult:
        """Run with the values of ``config``; the result carries ``config`` unchanged."""
        scores = self.run(
            harness_version=config.harness_version,
            library_versions=config.library_versions,
            dataset=config.dataset,
            eval_parameters=config.eval_parameters,
        )
        return EvalResult(config=config, scores=scores)

    @property
    def name(self) -> str:
        """The harness's name: its class name."""
        return type(self).__name__

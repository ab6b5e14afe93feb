"""What an evaluation ran with and what it scored: records meant to be stored and compared."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# Unlike the environment models (where validate_assignment costs every step), these are
# written once per evaluation, so they validate on assignment too and refuse unknown keys:
# a record that silently gained or lost a field would not reproduce.
_STRICT = ConfigDict(extra="forbid", validate_assignment=True)


class EvalConfig(BaseModel):
    """Everything needed to rerun an evaluation: harness, library versions, dataset, parameters."""

    model_config = _STRICT

    harness_name: str = Field(description="The harness that ran the evaluation.")
    harness_version: str = Field(description="Its version.")
    library_versions: dict[str, str] = Field(
        description="Versions of the libraries the result depends on (package → version)."
    )
    dataset: str = Field(description="The dataset (or task) evaluated on.")
    eval_parameters: dict[str, Any] = Field(
        description="The harness's parameters (model, sampling, limits, ...)."
    )


class EvalResult(BaseModel):
    """The scores of one evaluation, with the configuration that produced them."""

    model_config = _STRICT

    config: EvalConfig = Field(description="The configuration the scores came from.")
    scores: dict[str, Any] = Field(description="Metric name → value.")

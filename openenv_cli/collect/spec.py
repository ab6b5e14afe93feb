"""The options of one collection run, resolved once, and its episode plan.

Episode ``i`` belongs to group ``i // group_size``; every member of a group gets the same
seed (and task), so a group is a set of attempts at one starting state, and groups differ.
The plan is a pure function of the options: a resumed run recomputes it and skips the
episode ids already on disk.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from openenv_runtime.failures import DEFAULT_MAX_ERROR_RATE

SCHEMA_VERSION = 1

# Options that change what an episode is: a resumed run must agree on all of them.
FINGERPRINTED = (
    "targets",
    "model",
    "llm",
    "policy",
    "episodes",
    "max_turns",
    "group_size",
    "seed",
    "tasks",
    "tokens",
    "format",
    "temperature",
    "top_p",
    "max_tokens",
    "system_prompt",
)
# Options added later: left out of the fingerprint when unset, so older runs still resume.
UNSET_NOT_FINGERPRINTED = ("system_prompt",)


@dataclass(frozen=True)
class Sampling:
    """What the model is asked with; passed through to every chat completion."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 256


@dataclass(frozen=True)
class CollectSpec:
    """Everything ``openenv collect`` was asked to do (see ``openenv collect --help``)."""

    targets: tuple[str, ...]
    episodes: int
    policy: str = "model"  # "model", "random" or "module:function"
    llm: str | None = None
    model: str | None = None
    concurrency: int = 8
    max_turns: int = 8
    group_size: int = 1
    seed: int = 0
    tasks: tuple[str, ...] = ()
    format: str = "parquet"
    tokens: bool = False
    sampling: Sampling = field(default_factory=Sampling)
    step_timeout: float = 60.0
    shard_size: int = 64
    max_error_rate: float | None = None  # None: the rollouts' DEFAULT_MAX_ERROR_RATE
    system_prompt: str | None = None  # the first message of every model conversation

    def fingerprint_fields(self) -> dict[str, Any]:
        """The options a resumed run must share with the run it resumes."""
        flat = asdict(self)
        flat.update(asdict(self.sampling))
        return {
            name: _jsonable(flat[name])
            for name in FINGERPRINTED
            if not (name in UNSET_NOT_FINGERPRINTED and flat[name] is None)
        }

    @property
    def allowed_error_rate(self) -> float:
        """The fraction of failed episodes above which the run fails."""
        return DEFAULT_MAX_ERROR_RATE if self.max_error_rate is None else self.max_error_rate

    def fingerprint(self) -> str:
        text = json.dumps(self.fingerprint_fields(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class EpisodePlan:
    """One episode to run: its stable id, its group, and the starting state it asks for."""

    index: int
    episode_id: str
    group_id: str
    seed: int
    task_id: str | None


def plan(spec: CollectSpec) -> list[EpisodePlan]:
    """Every episode of the run, in order; the same options give the same plan."""
    plans = []
    for index in range(spec.episodes):
        group = index // spec.group_size
        task = spec.tasks[group % len(spec.tasks)] if spec.tasks else None
        plans.append(
            EpisodePlan(
                index=index,
                episode_id=f"ep-{index:07d}",
                group_id=f"g-{group:07d}",
                seed=spec.seed + group,
                task_id=task,
            )
        )
    return plans


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    return value

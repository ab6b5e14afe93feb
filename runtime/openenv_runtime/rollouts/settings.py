"""``RolloutSettings``: how a rollout function plays its episodes, each default written once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ..failures import DEFAULT_MAX_ERROR_RATE


@dataclass(frozen=True, slots=True)
class RolloutSettings:
    """How :func:`~openenv_runtime.rollouts.build_rollout_func` plays episodes.

    Give it whole (``build_rollout_func(url, llm=..., model=..., settings=RolloutSettings(
    group_size=8))``) or field by field as keywords (``build_rollout_func(url, llm=...,
    model=..., group_size=8)``); keywords given with ``settings`` replace its fields.

    Attributes:
        group_size: episodes per prompt; members of a group (and TRL's repeats of a prompt)
            reset with the same seed, groups with different seeds (from ``env_seed`` up).
        max_turns: model calls per episode at most.
        system_prompt: the first message of every conversation, if any.
        concurrency: environment sessions in the pool, hence episodes played at once.
        env_seed: the reset seed of the first group.
        env_timeout: seconds per reset or step before the episode is marked failed.
        llm_timeout: seconds per model call.
        temperature: passed to every model call; likewise ``top_p`` and ``max_tokens``.
        top_p: see ``temperature``.
        max_tokens: see ``temperature``.
        sampling: other options passed to every model call (its entries win over
            ``temperature``, ``top_p`` and ``max_tokens``).
        seed: sampling seed; episode ``i`` of a batch uses ``seed + i``.
        max_error_rate: a call raises ``RolloutError`` (naming the first errors of each kind)
            when more than this fraction of its episodes failed, or when one failed in a way
            every episode would (the model server does not serve the model, refuses the key,
            cannot be reached or reports no token ids; see ``openenv_runtime.failures``).
    """

    group_size: int = 1
    max_turns: int = 8
    system_prompt: str | None = None
    concurrency: int = 64
    env_seed: int = 0
    env_timeout: float | None = 60.0
    llm_timeout: float | None = 120.0
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    sampling: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE

    def __post_init__(self) -> None:
        if self.group_size < 1 or self.max_turns < 1 or self.concurrency < 1:
            raise ValueError("group_size, max_turns and concurrency must be at least 1")
        if not 0.0 <= self.max_error_rate <= 1.0:
            raise ValueError("max_error_rate must be between 0 and 1")

    @property
    def sampling_options(self) -> dict[str, Any]:
        """What every model call is sent besides the messages: ``sampling`` and the three above."""
        named = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
        }
        return {**{k: v for k, v in named.items() if v is not None}, **self.sampling}


class RolloutOptions(TypedDict, total=False):
    """:class:`RolloutSettings`' fields as keywords of ``build_rollout_func`` (no defaults here)."""

    group_size: int
    max_turns: int
    system_prompt: str | None
    concurrency: int
    env_seed: int
    env_timeout: float | None
    llm_timeout: float | None
    temperature: float | None
    top_p: float | None
    max_tokens: int | None
    sampling: Mapping[str, Any]
    seed: int | None
    max_error_rate: float

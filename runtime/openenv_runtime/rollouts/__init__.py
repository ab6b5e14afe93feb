"""Rollouts for trainers: token-faithful multi-turn episodes on an ``EnvPool``.

``build_rollout_func`` gives TRL's ``rollout_func``; ``RolloutService`` the same episodes
in the background, with policy versions, for asynchronous trainers; ``environment_factory`` TRL's
``environment_factory``; ``adapters`` the same episodes for verl, SkyRL and ART.
"""

from __future__ import annotations

from typing import Any

try:  # the llm extra (the model client, the recorded calls): say so, keeping the name
    import aiohttp  # noqa: F401
    import orjson  # noqa: F401
except ModuleNotFoundError as missing:
    raise ModuleNotFoundError(
        f"the rollouts need the package {missing.name!r}: pip install 'openenv-runtime[llm]'",
        name=missing.name,
    ) from None

from ..failures import DEFAULT_MAX_ERROR_RATE, RolloutError
from ..llm.client import OpenAIClient
from .episode import Episode
from .factory import environment_factory
from .mapping import ActionError, default_to_action, default_to_message
from .runner import RolloutFunc, to_trl
from .service import RolloutService

__all__ = [
    "ActionError",
    "Episode",
    "RolloutError",
    "RolloutFunc",
    "RolloutService",
    "build_rollout_func",
    "default_to_action",
    "default_to_message",
    "environment_factory",
    "to_trl",
]


def build_rollout_func(
    env: Any,
    *,
    llm: str | OpenAIClient,
    model: str,
    group_size: int = 1,
    max_turns: int = 8,
    to_action: Any = None,
    to_message: Any = None,
    system_prompt: str | None = None,
    concurrency: int = 64,
    env_seed: int = 0,
    env_timeout: float | None = 60.0,
    llm_timeout: float | None = 120.0,
    api_key: str | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
    sampling: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
) -> RolloutFunc:
    """A ``rollout_func(prompts, trainer)`` for TRL's ``GRPOTrainer`` (``trainer`` may be None).

    Every prompt × ``group_size`` episode runs concurrently on a pool of ``concurrency``
    environment sessions; each turn asks ``llm`` (an OpenAI-compatible base URL that reports
    token ids, e.g. vLLM) for the next action. The result has one entry per episode:
    ``prompt_ids``, ``completion_ids`` (model tokens and the tokens added between them),
    ``logprobs``, ``env_mask`` (1 = sampled by the model) and ``env_reward`` (the episode's
    total reward), plus ``rollout_failed`` and ``invalid_actions``.

    Args:
        env: a server URL, a list of URLs, or an ``EnvPool`` (opened on the function's loop).
        llm: the model server's base URL, or an ``OpenAIClient``.
        model: the model name sent with each request.
        group_size: episodes per prompt; members of a group (and TRL's repeats of a prompt)
            reset with the same seed, groups with different seeds (from ``env_seed`` up).
        max_turns: model calls per episode at most.
        to_action: ``to_action(reply: LLMResponse)`` → action; raise ``ActionError`` to feed
            a message back to the model. Default: the text into an action with one string
            field, else the text parsed as the action's JSON.
        to_message: ``to_message(observation)`` → the next user message's text. Default: the
            observation's fields without reward, done and metadata.
        env_timeout: seconds per reset or step before the episode is marked failed.
        llm_timeout: seconds per model call.
        temperature: passed to every model call; likewise ``top_p``, ``max_tokens`` and the
            other options in ``sampling``.
        seed: sampling seed; episode ``i`` of a batch uses ``seed + i``.
        env_kwargs: passed to the pool's clients (e.g. ``token``).
        max_error_rate: a call raises ``RolloutError`` (naming the first errors of each kind)
            when more than this fraction of its episodes failed, or when one failed in a way
            every episode would (the model server does not serve ``model``, refuses the key,
            cannot be reached or reports no token ids; see ``openenv_runtime.failures``).
    """
    options = {
        k: v
        for k, v in {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}.items()
        if v is not None
    }
    return RolloutFunc(
        env,
        llm=llm,
        model=model,
        group_size=group_size,
        max_turns=max_turns,
        to_action=to_action,
        to_message=to_message,
        system_prompt=system_prompt,
        concurrency=concurrency,
        env_seed=env_seed,
        env_timeout=env_timeout,
        llm_timeout=llm_timeout,
        api_key=api_key,
        sampling={**options, **(sampling or {})},
        seed=seed,
        env_kwargs=dict(env_kwargs or {}),
        max_error_rate=max_error_rate,
    )

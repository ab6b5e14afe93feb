"""Rollouts for trainers: token-faithful multi-turn episodes on an ``EnvPool``.

``build_rollout_func`` gives TRL's ``rollout_func``; ``RolloutService`` the same episodes
in the background, with policy versions, for asynchronous trainers; ``environment_factory`` TRL's
``environment_factory``; ``adapters`` the same episodes for verl, SkyRL and ART.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11+; the runtime also supports 3.10

try:  # the llm extra (the model client, the recorded calls): say so, keeping the name
    import aiohttp  # noqa: F401
    import orjson  # noqa: F401
except ModuleNotFoundError as missing:
    raise ModuleNotFoundError(
        f"the rollouts need the package {missing.name!r}: pip install 'openenv-runtime[llm]'",
        name=missing.name,
    ) from None

from ..failures import RolloutError
from ..llm.client import OpenAIClient
from .episode import Episode, ToAction, ToMessage
from .factory import environment_factory
from .mapping import ActionError, default_to_action, default_to_message
from .runner import RolloutFunc, to_trl
from .service import RolloutService
from .settings import RolloutOptions, RolloutSettings

__all__ = [
    "ActionError",
    "Episode",
    "RolloutError",
    "RolloutFunc",
    "RolloutService",
    "RolloutSettings",
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
    settings: RolloutSettings | None = None,
    to_action: ToAction | None = None,
    to_message: ToMessage | None = None,
    api_key: str | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    **options: Unpack[RolloutOptions],
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
        settings: how episodes are played (``RolloutSettings``: group size, turns,
            concurrency, seeds, timeouts, sampling, the error rate that stops a call).
        to_action: ``to_action(reply: LLMResponse)`` → action; raise ``ActionError`` to feed
            a message back to the model. Default: the text into an action with one string
            field, else the text parsed as the action's JSON.
        to_message: ``to_message(observation)`` → the next user message's text. Default: the
            observation's fields without reward, done and metadata.
        api_key: the model server's key, when ``llm`` is a URL.
        env_kwargs: passed to the pool's clients (e.g. ``token``).
        **options: ``RolloutSettings``' fields as keywords (``group_size=8, max_turns=4``),
            replacing those of ``settings``.
    """
    chosen = replace(settings, **options) if settings is not None else RolloutSettings(**options)
    return RolloutFunc(
        env,
        llm=llm,
        model=model,
        settings=chosen,
        to_action=to_action,
        to_message=to_message,
        api_key=api_key,
        env_kwargs=env_kwargs,
    )

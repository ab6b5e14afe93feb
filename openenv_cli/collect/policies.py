"""What picks the actions of an episode: a model, a Python callable, or random valid actions.

Every policy is a policy of the rollouts' episode player (``openenv_runtime.rollouts.episode``):
it answers ``act`` with a ``Move``, the action to send and the assistant message the
conversation records. A model's move also carries its reply, whose token ids and
log-probabilities the player records. A text the policy cannot turn into a valid action is not
an error of the run: the episode feeds the problem back as the next observation.
"""

from __future__ import annotations

import importlib
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from openenv_cli.errors import UsageError

from .spec import CollectSpec

if TYPE_CHECKING:
    from openenv_runtime.rollouts.episode import Episode, Move


class Policy(Protocol):
    """A policy of the episode player that holds what ``aclose`` releases."""

    async def act(
        self, episode: Episode, messages: list[dict[str, Any]], observation: Any
    ) -> Move: ...

    async def aclose(self) -> None: ...


def _rng(episode: Episode) -> random.Random:
    assert episode.rng is not None, "collect seeds each episode's random stream"
    return episode.rng


class RandomPolicy:
    """Valid actions sampled from the action's JSON schema (for smoke runs)."""

    def __init__(self, action_schema: dict[str, Any]) -> None:
        from jsf import JSF  # a schema faker: imported only for --policy random

        self._faker = JSF(_without_metadata(action_schema))

    async def act(self, episode: Episode, messages: list[dict[str, Any]], observation: Any) -> Move:
        from faker import Faker

        from openenv_runtime.rollouts.episode import Move

        # jsf draws from the global generators: seed them from the episode's own stream,
        # so the same seed gives the same episode whatever else runs concurrently.
        seed = _rng(episode).getrandbits(32)
        random.seed(seed)
        Faker.seed(seed)
        action = self._faker.generate()
        return Move({"role": "assistant", "content": json.dumps(action)}, action)

    async def aclose(self) -> None:
        return None


class CallablePolicy:
    """``module:function``, called with the observation dict, returning the action dict."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self._func = func

    async def act(self, episode: Episode, messages: list[dict[str, Any]], observation: Any) -> Move:
        from openenv_runtime.rollouts.episode import Move

        result = self._func(dict(observation))
        if hasattr(result, "__await__"):
            result = await result
        if hasattr(result, "model_dump"):
            result = result.model_dump()
        if not isinstance(result, dict):
            return Move({"role": "assistant", "content": repr(result)}, None, "not a dict")
        return Move({"role": "assistant", "content": json.dumps(result)}, result)

    async def aclose(self) -> None:
        return None


def model_policy(spec: CollectSpec, action_schema: dict[str, Any]) -> Policy:
    """Chat completions of an OpenAI-compatible server, the text mapped to an action: the
    rollouts' ``ModelPolicy``, its sampling seeded from each episode's own stream.

    With ``--tokens`` it asks for, and requires, the token ids and log-probabilities the
    server sampled (``openenv_runtime.llm.tokens``): a server that reports none fails the
    episode with what to enable, and nothing is re-tokenised.
    """
    assert spec.llm is not None and spec.model is not None
    from openenv_runtime.rollouts.episode import ModelPolicy
    from openenv_runtime.rollouts.mapping import default_to_action
    from openenv_runtime.rollouts.transport import TokenClient

    # The rollouts' client: aiohttp and orjson, a fraction of the openai package's CPU
    # per call (benchmarks/training/collect_model_calls.py).
    client = TokenClient(spec.llm, spec.model, timeout=spec.step_timeout, return_tokens=spec.tokens)
    sampling = spec.sampling
    options = {
        "temperature": sampling.temperature,
        "max_tokens": sampling.max_tokens,
        "top_p": sampling.top_p,
    }
    return ModelPolicy(client, default_to_action(action_schema), options)


def choose_policy(policy: str | None, llm: str | None) -> str:
    """The policy the options name: ``--policy``, else a model when ``--llm`` is given."""
    chosen = policy or ("model" if llm else None)
    if chosen is None:
        raise UsageError(
            "Say what plays the episodes: --llm URL --model NAME, or --policy random|module:function."
        )
    return chosen


def make_policy(spec: CollectSpec, action_schema: dict[str, Any], project: Path | None) -> Policy:
    """The policy ``spec.policy`` names."""
    if spec.policy == "random":
        return RandomPolicy(action_schema)
    if spec.policy == "model":
        if not spec.llm or not spec.model:
            raise UsageError(
                "A model policy needs --llm URL and --model NAME.",
                hint="Or pick another policy: --policy random, or --policy module:function.",
            )
        return model_policy(spec, action_schema)
    module_name, _, attr = spec.policy.partition(":")
    if not module_name or not attr:
        raise UsageError(
            f"--policy {spec.policy!r} is not model, random or module:function.",
            hint="Example: --policy my_agent:act (a function from the observation dict to an action dict).",
        )
    if project is not None and str(project) not in sys.path:
        sys.path.insert(0, str(project))
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        func = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as error:
        raise UsageError(
            f"--policy {spec.policy}: {error}",
            hint="The module must be importable from the current folder or the project.",
        ) from None
    return CallablePolicy(func)


def _without_metadata(schema: dict[str, Any]) -> dict[str, Any]:
    trimmed = dict(schema)
    props = {k: v for k, v in schema.get("properties", {}).items() if k != "metadata"}
    trimmed["properties"] = props
    trimmed["required"] = [r for r in schema.get("required", []) if r in props]
    return trimmed

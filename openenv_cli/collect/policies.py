"""What picks the actions of an episode: a model, a Python callable, or random valid actions.

Every policy answers :meth:`Policy.act` with a :class:`Decision`: the action to send, the
assistant message the conversation records, and (from a model asked for them) the token ids
and log-probabilities the model server sampled. A text the policy cannot turn into a valid
action is not an error of the run: the episode feeds the problem back as the next observation.
"""

from __future__ import annotations

import importlib
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from openenv_cli.errors import UsageError

from .spec import CollectSpec


@dataclass
class Decision:
    """One turn of a policy."""

    action: dict[str, Any] | None  # None: the text could not be made into an action
    message: dict[str, Any]  # the assistant message recorded in the conversation
    problem: str = ""  # why there is no action (fed back to the model)
    model_seconds: float = 0.0
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)


class Policy(Protocol):
    """Picks the next action from the conversation so far."""

    async def act(
        self, messages: list[dict[str, Any]], observation: dict[str, Any], rng: random.Random
    ) -> Decision: ...

    async def aclose(self) -> None: ...


def observation_text(observation: dict[str, Any]) -> str:
    """The observation as the next user message (the rollouts' default mapping)."""
    from openenv_runtime.rollouts.mapping import default_to_message

    return default_to_message(observation)


class RandomPolicy:
    """Valid actions sampled from the action's JSON schema (for smoke runs)."""

    def __init__(self, action_schema: dict[str, Any]) -> None:
        from jsf import JSF  # a schema faker: imported only for --policy random

        self._faker = JSF(_without_metadata(action_schema))

    async def act(
        self, messages: list[dict[str, Any]], observation: dict[str, Any], rng: random.Random
    ) -> Decision:
        from faker import Faker

        # jsf draws from the global generators: seed them from the episode's own stream,
        # so the same seed gives the same episode whatever else runs concurrently.
        seed = rng.getrandbits(32)
        random.seed(seed)
        Faker.seed(seed)
        action = self._faker.generate()
        return Decision(action, {"role": "assistant", "content": json.dumps(action)})

    async def aclose(self) -> None:
        return None


class CallablePolicy:
    """``module:function``, called with the observation dict, returning the action dict."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self._func = func

    async def act(
        self, messages: list[dict[str, Any]], observation: dict[str, Any], rng: random.Random
    ) -> Decision:
        result = self._func(observation)
        if hasattr(result, "__await__"):
            result = await result
        if hasattr(result, "model_dump"):
            result = result.model_dump()
        if not isinstance(result, dict):
            return Decision(None, {"role": "assistant", "content": repr(result)}, "not a dict")
        return Decision(result, {"role": "assistant", "content": json.dumps(result)})

    async def aclose(self) -> None:
        return None


class ModelPolicy:
    """Chat completions of an OpenAI-compatible server, the text mapped to an action.

    With ``--tokens`` it asks for, and requires, the token ids and log-probabilities the
    server sampled (``openenv_runtime.llm.tokens``): a server that reports none fails the episode
    with what to enable, and nothing is re-tokenised.
    """

    def __init__(self, spec: CollectSpec, action_schema: dict[str, Any]) -> None:
        assert spec.llm is not None and spec.model is not None
        from openenv_runtime.rollouts.mapping import default_to_action
        from openenv_runtime.rollouts.transport import TokenClient

        self._spec = spec
        self._to_action = default_to_action(action_schema)
        # The rollouts' client: aiohttp and orjson, a fraction of the openai package's CPU
        # per call (benchmarks/training/collect_model_calls.py).
        self._client = TokenClient(
            spec.llm, spec.model, timeout=spec.step_timeout, return_tokens=spec.tokens
        )

    async def act(
        self, messages: list[dict[str, Any]], observation: dict[str, Any], rng: random.Random
    ) -> Decision:
        started = time.perf_counter()
        try:
            sampling = self._spec.sampling
            reply = await self._client.complete_with_tools(
                messages,
                [],
                temperature=sampling.temperature,
                max_tokens=sampling.max_tokens,
                top_p=sampling.top_p,
                seed=rng.getrandbits(31),
            )
        except Exception as error:  # HTTP errors, no connection, missing token ids, timeouts
            from openenv_runtime.failures import model_failure

            raise model_failure(error) from None
        seconds = time.perf_counter() - started
        from openenv_runtime.rollouts.mapping import ActionError

        text = reply.content or ""
        action: dict[str, Any] | None = None
        problem = ""
        try:
            action = self._to_action(reply)
        except ActionError as error:
            problem = str(error)
        decision = Decision(action, {"role": "assistant", "content": text}, problem, seconds)
        if self._spec.tokens:
            decision.prompt_ids = list(reply.prompt_token_ids or [])
            decision.completion_ids = list(reply.completion_token_ids or [])
            decision.logprobs = list(reply.logprobs or [])
        return decision

    async def aclose(self) -> None:
        await self._client.aclose()


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
        return ModelPolicy(spec, action_schema)
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

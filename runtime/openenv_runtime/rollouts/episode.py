"""One episode: a policy acts, the environment answers; a model's calls are recorded to the token.

One player for every way episodes are played: ``build_rollout_func`` and ``RolloutService``
(a model, :class:`ModelPolicy`) and ``openenv collect`` / ``openenv eval`` (a model, random
valid actions, or a Python function).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import EnvError
from ..failures import model_failure
from ..llm.client import LLMResponse, OpenAIClient
from ..llm.samples import Sample, TraceEntry, assemble
from ..observability import tracing
from .mapping import ActionError

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

ToAction = Callable[[LLMResponse], Any]
ToMessage = Callable[[Any], str]


@dataclass
class Episode:
    """An episode's record: its place in the batch, conversation, recorded calls and outcome.

    ``prompt`` starts the conversation (text or messages; ``None``: the reset observation is
    the first user message); ``task_id`` is passed to the reset when set; ``rng`` is the
    episode's own random stream, for policies that draw (``None``: ``ModelPolicy`` seeds its
    sampling from ``seed + index``). ``observations`` are the reset's and each step's,
    ``actions`` the ones the environment took; ``env_seconds`` times the reset and those
    steps, ``model_seconds`` each move's model call (0.0 for a policy that calls none).

    ``error`` is set (and the episode kept, never dropped) when its environment session or a
    model call failed, ``error_kind`` to its kind (see ``failures``); ``samples`` are the
    training samples its calls assemble into (more than one only when the conversation's
    tokens stopped extending each other).
    """

    index: int
    group: int
    member: int
    seed: int | None
    prompt: Any
    task_id: str | None = None
    rng: random.Random | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    entries: list[TraceEntry] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    observations: list[Any] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    env_seconds: list[float] = field(default_factory=list)
    model_seconds: list[float] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    turns: int = 0
    steps: int = 0
    invalid_actions: int = 0
    done: bool = False
    error: str | None = None
    error_kind: str = ""

    @property
    def reward(self) -> float:
        """The episode's total reward."""
        return float(sum(self.rewards))

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def sample(self) -> Sample:
        """The first training sample (an empty one when no model call succeeded)."""
        return self.samples[0] if self.samples else Sample(prompt_ids=[])


def first_messages(
    prompt: Any, system_prompt: str | None, observation_text: str
) -> list[dict[str, Any]]:
    """The conversation an episode starts with: the prompt (text or messages), the reset
    observation's text appended to the last user message (as TRL's environments do); with no
    prompt (``None``), the observation's text is the first user message."""
    messages: list[dict[str, Any]] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    if prompt is None:
        messages.append({"role": "user", "content": observation_text})
        return messages
    if isinstance(prompt, str):
        messages.append({"role": "user", "content": prompt})
    else:
        messages += [dict(m) for m in prompt]
    if observation_text:
        if messages and messages[-1].get("role") == "user":
            last = messages[-1]
            last["content"] = f"{last.get('content') or ''}\n\n{observation_text}".strip()
        else:
            messages.append({"role": "user", "content": observation_text})
    return messages


@dataclass
class Move:
    """A policy's turn: the assistant message the conversation records and the action to
    send, or (``problem`` set) why there is none: the problem is fed back as the answer.
    ``reply`` is the model's, when a model made the move (its call is recorded)."""

    message: dict[str, Any]
    action: Any = None
    problem: str | None = None
    reply: LLMResponse | None = None
    model_seconds: float = 0.0


class Policy(Protocol):
    """What moves in an episode, given the conversation so far and the last observation."""

    async def act(
        self, episode: Episode, messages: list[dict[str, Any]], observation: Any
    ) -> Move: ...


@dataclass
class ModelPolicy:
    """A chat model moves: its reply, mapped to an action by ``to_action`` (``ActionError``:
    no action, the error fed back). A failed call raises ``ModelFailure``."""

    llm: OpenAIClient
    to_action: ToAction
    sampling: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None

    async def act(self, episode: Episode, messages: list[dict[str, Any]], observation: Any) -> Move:
        options = dict(self.sampling)
        if episode.rng is not None:
            options["seed"] = episode.rng.getrandbits(31)
        elif self.seed is not None:  # members of a group sample differently
            options["seed"] = self.seed + episode.index
        started = time.perf_counter()
        try:
            reply = await self.llm.complete_with_tools(messages, [], **options)
        except Exception as error:
            raise model_failure(error) from error
        seconds = time.perf_counter() - started
        try:
            action = self.to_action(reply)
        except ActionError as refused:
            return Move(reply.to_message_dict(), None, str(refused), reply, seconds)
        return Move(reply.to_message_dict(), action, None, reply, seconds)

    async def aclose(self) -> None:
        """Close the model client's connections, when it has any of its own."""
        close = getattr(self.llm, "aclose", None)
        if close is not None:
            await close()


@dataclass
class Player:
    """Plays episodes on environment clients with a policy; shared by every episode of a batch.

    ``record_calls``: each model call is kept in the episode's ``entries`` (its tokens, for
    training samples); off, nothing is kept of them.
    """

    policy: Policy
    to_message: ToMessage
    max_turns: int
    system_prompt: str | None = None
    env_timeout: float | None = 60.0
    record_calls: bool = True

    async def play(self, episode: Episode, client: Any) -> None:
        """Run ``episode`` on ``client`` (an open ``EnvClient``); raises on environment failure,
        ``ModelFailure`` when a model call fails, and what the policy raises.

        With tracing on (see ``observability.tracing``) the episode is a span, its reset, model
        calls and steps its children; the server's spans of the same reset and steps join them.
        """
        tracer = tracing.tracer("openenv-rollouts")
        if tracer is None:
            await self._play(episode, client, None)
            return
        attributes = {
            "openenv.episode.index": episode.index,
            "openenv.episode.group": episode.group,
            "openenv.episode.member": episode.member,
        }
        if episode.seed is not None:
            attributes["openenv.episode.seed"] = episode.seed
        with tracer.start_as_current_span("openenv.episode", attributes=attributes) as span:
            current = tracing.EPISODE.set(span)
            try:
                await self._play(episode, client, tracer)
            finally:
                tracing.EPISODE.reset(current)
                span.set_attributes(
                    {
                        "openenv.episode.turns": episode.turns,
                        "openenv.episode.steps": episode.steps,
                        "openenv.episode.invalid_actions": episode.invalid_actions,
                        "openenv.done": episode.done,
                        "openenv.reward": episode.reward,
                    }
                )

    async def _play(self, episode: Episode, client: Any, tracer: Tracer | None) -> None:
        reset_options: dict[str, Any] = {"seed": episode.seed}
        if episode.task_id:
            reset_options["task_id"] = episode.task_id
        started = time.perf_counter()
        with tracing.span(tracer, "openenv.env.reset"):
            reset = await asyncio.wait_for(client.reset(**reset_options), self.env_timeout)
        episode.env_seconds.append(time.perf_counter() - started)
        observation = reset.observation
        episode.observations.append(observation)
        text = self.to_message(observation) if observation is not None else ""
        messages = episode.messages = first_messages(episode.prompt, self.system_prompt, text)
        if reset.done:
            episode.done = True
            return
        for _ in range(self.max_turns):
            with tracing.span(tracer, "openenv.model_call", {"openenv.turn": episode.turns + 1}):
                move = await self.policy.act(episode, messages, observation)
            episode.model_seconds.append(move.model_seconds)
            if move.reply is not None and self.record_calls:
                episode.entries.append(_entry(episode, move.reply, messages, move.model_seconds))
            episode.turns += 1
            messages.append(move.message)
            if move.problem is not None:
                episode.invalid_actions += 1
                messages.append(_answer(move, move.problem))
                continue
            started = time.perf_counter()
            try:
                with tracing.span(tracer, "openenv.env.step", {"openenv.turn": episode.turns}):
                    result = await asyncio.wait_for(client.step(move.action), self.env_timeout)
            except EnvError as error:
                if error.code != "VALIDATION_ERROR":
                    raise
                episode.invalid_actions += 1
                messages.append(_answer(move, f"Invalid action: {error.message}"))
                continue
            episode.env_seconds.append(time.perf_counter() - started)
            observation = result.observation
            episode.steps += 1
            episode.actions.append(move.action)
            episode.observations.append(observation)
            episode.rewards.append(float(result.reward or 0.0))
            if result.done:
                episode.done = True
                return
            messages.append(_answer(move, self.to_message(observation)))


def _answer(move: Move, text: str) -> dict[str, Any]:
    if move.reply is not None and move.reply.tool_calls:
        return {"role": "tool", "tool_call_id": move.reply.tool_calls[0].id, "content": text}
    return {"role": "user", "content": text}


def _entry(
    episode: Episode, reply: LLMResponse, messages: list[dict[str, Any]], seconds: float
) -> TraceEntry:
    return TraceEntry.model_construct(  # trusted values: no validation on the hot path
        session_id=f"episode-{episode.index}",
        turn=episode.turns,
        timestamp=time.time(),
        messages=list(messages),
        completion=reply.to_message_dict(),
        finish_reason=reply.finish_reason,
        prompt_token_ids=reply.prompt_token_ids,
        completion_token_ids=reply.completion_token_ids,
        per_token_logps=reply.logprobs,
        latency_ms=seconds * 1000,
        model=None,
        request={},
        stream=False,
        error=None,
    )


def finish(episode: Episode) -> None:
    """Assemble the episode's samples from its recorded calls."""
    episode.samples = assemble(episode.entries)

"""One episode: the model acts, the environment answers, every model call's tokens recorded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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

    ``error`` is set (and the episode kept, never dropped) when its environment session or a
    model call failed, ``error_kind`` to its kind (see ``failures``); ``samples`` are the training samples its calls assemble into (more
    than one only when the conversation's tokens stopped extending each other).
    """

    index: int
    group: int
    member: int
    seed: int | None
    prompt: Any
    messages: list[dict[str, Any]] = field(default_factory=list)
    entries: list[TraceEntry] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
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
    observation's text appended to the last user message (as TRL's environments do)."""
    messages: list[dict[str, Any]] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
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
class Player:
    """Plays episodes on environment clients with a model; shared by every episode of a batch."""

    llm: OpenAIClient
    to_action: ToAction
    to_message: ToMessage
    max_turns: int
    system_prompt: str | None = None
    env_timeout: float | None = 60.0
    sampling: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None

    async def play(self, episode: Episode, client: Any) -> None:
        """Run ``episode`` on ``client`` (an open ``EnvClient``); raises on environment failure,
        and ``ModelFailure`` when a model call fails.

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
        with tracing.span(tracer, "openenv.env.reset"):
            reset = await asyncio.wait_for(client.reset(seed=episode.seed), self.env_timeout)
        text = self.to_message(reset.observation) if reset.observation is not None else ""
        messages = episode.messages = first_messages(episode.prompt, self.system_prompt, text)
        if reset.done:
            episode.done = True
            return
        options = dict(self.sampling)
        if self.seed is not None:  # members of a group sample differently
            options["seed"] = self.seed + episode.index
        for _ in range(self.max_turns):
            started = time.perf_counter()
            with tracing.span(tracer, "openenv.model_call", {"openenv.turn": episode.turns + 1}):
                try:
                    reply = await self.llm.complete_with_tools(messages, [], **options)
                except Exception as error:
                    raise model_failure(error) from error
            episode.entries.append(_entry(episode, reply, messages, started))
            episode.turns += 1
            messages.append(reply.to_message_dict())
            try:
                action = self.to_action(reply)
            except ActionError as refused:
                episode.invalid_actions += 1
                messages.append(_answer(reply, str(refused)))
                continue
            try:
                with tracing.span(tracer, "openenv.env.step", {"openenv.turn": episode.turns}):
                    result = await asyncio.wait_for(client.step(action), self.env_timeout)
            except EnvError as error:
                if error.code != "VALIDATION_ERROR":
                    raise
                episode.invalid_actions += 1
                messages.append(_answer(reply, f"Invalid action: {error.message}"))
                continue
            episode.steps += 1
            episode.rewards.append(float(result.reward or 0.0))
            if result.done:
                episode.done = True
                return
            messages.append(_answer(reply, self.to_message(result.observation)))


def _answer(reply: LLMResponse, text: str) -> dict[str, Any]:
    if reply.tool_calls:
        return {"role": "tool", "tool_call_id": reply.tool_calls[0].id, "content": text}
    return {"role": "user", "content": text}


def _entry(
    episode: Episode, reply: LLMResponse, messages: list[dict[str, Any]], started: float
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
        latency_ms=(time.perf_counter() - started) * 1000,
        model=None,
        request={},
        stream=False,
        error=None,
    )


def finish(episode: Episode) -> None:
    """Assemble the episode's samples from its recorded calls."""
    episode.samples = assemble(episode.entries)

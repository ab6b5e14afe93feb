"""Recorded model calls (``TraceEntry``) and their assembly into training samples (``Sample``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from .tokens import missing


class TraceEntry(BaseModel):
    """One chat completion as the proxy saw it (field names as the reference's ``TraceEntry``).

    ``prompt_token_ids`` / ``completion_token_ids`` / ``per_token_logps`` are exactly what the
    model server reported; they are ``None`` (and ``error`` says why) when it reported none.
    """

    session_id: str
    turn: int
    timestamp: float
    model: str | None = None
    request: dict[str, Any] = Field(default_factory=dict)
    messages: list[dict[str, Any]] = Field(default_factory=list)
    completion: dict[str, Any] = Field(default_factory=dict)
    finish_reason: str | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    per_token_logps: list[float] | None = None
    stream: bool = False
    latency_ms: float = 0.0
    error: str | None = None


@dataclass
class Sample:
    """One training sample: a prompt, then model tokens with what came between them.

    ``env_mask[i]`` is 1 where ``completion_ids[i]`` was sampled by the model, 0 where the
    environment or the chat template added it; ``logprobs[i]`` is 0.0 where the mask is 0.
    ``turns`` lists the entries (their ``turn``) it was built from.
    """

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)

    @property
    def tokens(self) -> list[int]:
        """Prompt and completion, as one sequence."""
        return [*self.prompt_ids, *self.completion_ids]

    def as_dict(self) -> dict[str, Any]:
        return {
            "prompt_ids": self.prompt_ids,
            "completion_ids": self.completion_ids,
            "env_mask": self.env_mask,
            "logprobs": self.logprobs,
        }


def _entry(raw: TraceEntry | dict[str, Any]) -> TraceEntry:
    return raw if isinstance(raw, TraceEntry) else TraceEntry.model_validate(raw)


def assemble(entries: Iterable[TraceEntry | dict[str, Any]]) -> list[Sample]:
    """Training samples from one conversation's recorded calls, in call order.

    A call whose prompt starts with an earlier sample's prompt and completions extends that
    sample: the tokens in between (the environment's reply, the template's framing) join the
    completion with mask 0. Otherwise (history rewritten, template drift, a second agent) a
    new sample starts: tokens are never spliced where they do not match. An entry without
    token ids is an error (``MissingTokenIdsError``).
    """
    samples: list[Sample] = []
    for raw in entries:
        entry = _entry(raw)
        prompt, ids, logps = (
            entry.prompt_token_ids,
            entry.completion_token_ids,
            entry.per_token_logps,
        )
        if prompt is None or ids is None or logps is None:
            raise missing("token ids", f"(turn {entry.turn}: {entry.error or 'not recorded'})")
        if len(logps) != len(ids):
            raise missing("log-probabilities (one per sampled token)", f"(turn {entry.turn})")
        target = _longest_prefix(samples, prompt)
        if target is None:
            samples.append(
                Sample(list(prompt), list(ids), [1] * len(ids), list(logps), [entry.turn])
            )
            continue
        gap = prompt[len(target.prompt_ids) + len(target.completion_ids) :]
        target.completion_ids += [*gap, *ids]
        target.env_mask += [0] * len(gap) + [1] * len(ids)
        target.logprobs += [0.0] * len(gap) + list(logps)
        target.turns.append(entry.turn)
    return samples


def _longest_prefix(samples: Sequence[Sample], prompt: Sequence[int]) -> Sample | None:
    best: Sample | None = None
    best_length = -1
    for sample in samples:
        length = len(sample.prompt_ids) + len(sample.completion_ids)
        if length <= best_length or length > len(prompt):
            continue
        if (
            list(prompt[: len(sample.prompt_ids)]) == sample.prompt_ids
            and list(prompt[len(sample.prompt_ids) : length]) == sample.completion_ids
        ):
            best, best_length = sample, length
    return best

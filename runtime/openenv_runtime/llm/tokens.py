"""Token ids and log-probabilities of chat completions, read from vLLM's response fields.

A request asks for them with ``return_token_ids: true`` and ``logprobs: true``; the answer
carries ``prompt_token_ids`` (top level), ``choices[i].token_ids`` and
``choices[i].logprobs.content[j].logprob``. Streams carry the same fields per chunk
(``prompt_token_ids`` on the first). Nothing here re-tokenises text: what the server did not
report is an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

TOKEN_OPTIONS: dict[str, Any] = {"return_token_ids": True, "logprobs": True}


class MissingTokenIdsError(RuntimeError):
    """The model server answered without the token ids or log-probabilities asked for."""


def missing(what: str, where: str) -> MissingTokenIdsError:
    return MissingTokenIdsError(
        f"the model server {where} returned no {what}. Training needs the tokens the server "
        "sampled, never a re-tokenisation: serve the model with vLLM >= 0.10.2 (it answers "
        "'return_token_ids': true with prompt_token_ids and choices[].token_ids) or another "
        "server that reports them, with log-probabilities enabled ('logprobs': true)."
    )


@dataclass
class Tokens:
    """One completion's tokens: the prompt's, the sampled ones and their log-probabilities."""

    prompt_token_ids: list[int]
    completion_token_ids: list[int]
    logprobs: list[float]


def read_tokens(response: dict[str, Any], where: str = "", choice: int = 0) -> Tokens:
    """The tokens of ``choices[choice]`` in a non-streamed ``response`` (a JSON dict)."""
    prompt = response.get("prompt_token_ids")
    chosen = (response.get("choices") or [{}])[choice]
    ids = chosen.get("token_ids")
    if not isinstance(prompt, list) or not isinstance(ids, list):
        raise missing("token ids", where)
    logprobs = _logprobs(chosen.get("logprobs"))
    if logprobs is None or len(logprobs) != len(ids):
        raise missing("log-probabilities (one per sampled token)", where)
    return Tokens(ints(prompt), ints(ids), logprobs)


def ints(values: list[Any]) -> list[int]:
    """A copy of ``values`` as ints (a JSON parser's ints are copied as they are: checking
    their types at once costs a third of converting each)."""
    return list(values) if set(map(type, values)) <= _INT else [int(v) for v in values]


_INT = {int}


def read_reply(
    answer: dict[str, Any], where: str = ""
) -> tuple[str, list[tuple[str, str, dict[str, Any]]], str | None, Tokens]:
    """A chat completion's JSON as ``(text, [(call id, tool, arguments)], finish reason,
    tokens)``; an error when it carries no token ids."""
    tokens = read_tokens(answer, where)
    return (*read_message(answer), tokens)


def read_message(
    answer: dict[str, Any],
) -> tuple[str, list[tuple[str, str, dict[str, Any]]], str | None]:
    """A chat completion's JSON as ``(text, [(call id, tool, arguments)], finish reason)``."""
    choice = (answer.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    calls = [
        (
            str(c.get("id") or ""),
            str(c["function"]["name"]),
            json.loads(c["function"].get("arguments") or "{}"),
        )
        for c in message.get("tool_calls") or []
        if c.get("function")
    ]
    return message.get("content") or "", calls, choice.get("finish_reason")


def _logprobs(block: Any) -> list[float] | None:
    if not isinstance(block, dict) or not isinstance(block.get("content"), list):
        return None
    return [float(entry["logprob"]) for entry in block["content"]]


@dataclass
class StreamTokens:
    """Gathers a streamed completion: its tokens, text, tool calls and finish reason."""

    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    content: str = ""
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None
    saw_ids: bool = False

    def add(self, chunk: dict[str, Any]) -> None:
        """Take in one ``chat.completion.chunk`` (a JSON dict)."""
        if isinstance(chunk.get("prompt_token_ids"), list):
            self.prompt_token_ids = ints(chunk["prompt_token_ids"])
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        self.model = chunk.get("model") or self.model
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            if isinstance(choice.get("token_ids"), list):
                self.saw_ids = True
                self.completion_token_ids += ints(choice["token_ids"])
            self.logprobs += _logprobs(choice.get("logprobs")) or []
            delta = choice.get("delta") or {}
            self.content += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                slot = self.tool_calls.setdefault(
                    int(call.get("index", 0)),
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                slot["id"] = call.get("id") or slot["id"]
                function = call.get("function") or {}
                slot["function"]["name"] += function.get("name") or ""
                slot["function"]["arguments"] += function.get("arguments") or ""
            self.finish_reason = choice.get("finish_reason") or self.finish_reason

    def tokens(self, where: str = "") -> Tokens:
        """The gathered tokens; an error when the stream did not report them all."""
        if self.prompt_token_ids is None or not self.saw_ids:
            raise missing("token ids", where)
        if len(self.logprobs) != len(self.completion_token_ids):
            raise missing("log-probabilities (one per sampled token)", where)
        return Tokens(self.prompt_token_ids, self.completion_token_ids, self.logprobs)

    def message(self) -> dict[str, Any]:
        """The streamed reply as an assistant message."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        return message

"""A non-streamed chat completion's bytes decoded straight into what training keeps.

The capture proxy keeps each answer as the bytes the model server sent and reads them when a
session's entries are asked for. Parsing the whole answer (``orjson.loads``) builds an object
for every field of every sampled token's log-probability entry (its text, its bytes, its
alternatives) only for most of them to be dropped; msgspec decodes into the few fields kept
and checks their types as it goes (token ids are ints, log-probabilities numbers): 13 µs
against 21 µs for ``orjson.loads`` and ``read_tokens`` on the stand-in's 3.5 kB answer,
measured in one process. A missing token is reported as
:func:`~openenv_runtime.llm.tokens.read_tokens` reports it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .tokens import MissingTokenIdsError, Tokens, missing


class _Logprob(msgspec.Struct):
    logprob: float


class _Logprobs(msgspec.Struct):
    content: list[_Logprob] | None = None


class _Choice(msgspec.Struct):
    message: dict[str, Any] | None = None
    finish_reason: str | None = None
    token_ids: list[int] | None = None
    logprobs: _Logprobs | None = None


class _Completion(msgspec.Struct):
    choices: list[_Choice] | None = None
    prompt_token_ids: list[int] | None = None


_DECODER = msgspec.json.Decoder(_Completion)


class NotACompletionError(ValueError):
    """The bytes are not a chat completion's JSON, or a field kept has the wrong type."""


def decode_completion(
    raw: bytes, where: str = ""
) -> tuple[dict[str, Any], str | None, Tokens | MissingTokenIdsError]:
    """``(message, finish reason, tokens)`` of the first choice of a chat completion's JSON
    bytes; ``tokens`` is the :class:`~openenv_runtime.llm.tokens.MissingTokenIdsError` when
    the answer lacks them (the message is still read). :class:`NotACompletionError` when
    ``raw`` is not such JSON."""
    try:
        answer = _DECODER.decode(raw)
    except msgspec.DecodeError as error:
        raise NotACompletionError(str(error)) from None
    choice = answer.choices[0] if answer.choices else _Choice()
    message = choice.message or {}
    prompt, ids = answer.prompt_token_ids, choice.token_ids
    if prompt is None or ids is None:
        return message, choice.finish_reason, missing("token ids", where)
    content = choice.logprobs.content if choice.logprobs is not None else None
    if content is None or len(content) != len(ids):
        found = missing("log-probabilities (one per sampled token)", where)
        return message, choice.finish_reason, found
    return message, choice.finish_reason, Tokens(prompt, ids, [e.logprob for e in content])

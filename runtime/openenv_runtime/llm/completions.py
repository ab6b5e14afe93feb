"""A non-streamed chat completion's bytes decoded straight into what training keeps.

The capture proxy keeps each answer as the bytes the model server sent and reads them when a
session's entries are asked for. Parsing the whole answer (``orjson.loads``) builds an object
for every field of every sampled token's log-probability entry (its text, its bytes, its
alternatives) only for most of them to be dropped; msgspec decodes into the few fields kept
and checks their types as it goes (log-probabilities are numbers): 13 µs against 21 µs for
``orjson.loads`` and ``read_tokens`` on the stand-in's 3.5 kB answer, measured in one
process. A missing token is reported as :func:`~openenv_runtime.llm.tokens.read_tokens`
reports it.

The two arrays of token ids are kept as the JSON the server wrote when it is compact (digits
and commas between the brackets: an array of non-negative ints), for the proxy to write out
again as they are (:func:`decode_completion_json`); any other spelling is decoded and checked
as a list of ints. Making an int object of each id and writing it out again cost ~40,000 of
~206,000 instructions per entry read back with the stand-in's small ids, and ~70,000 of
~250,000 with six-digit ids (callgrind, in one process).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from .tokens import MissingTokenIdsError, Tokens, missing


# gc=False: decoded JSON makes no reference cycles, so the collector need not track these
class _Logprob(msgspec.Struct, gc=False):
    logprob: float


class _Logprobs(msgspec.Struct, gc=False):
    content: list[_Logprob] | None = None


_NULL = msgspec.Raw(b"null")


class _Choice(msgspec.Struct, gc=False):
    message: dict[str, Any] | None = None
    finish_reason: str | None = None
    token_ids: msgspec.Raw = _NULL
    logprobs: _Logprobs | None = None


class _Completion(msgspec.Struct, gc=False):
    choices: list[_Choice] | None = None
    prompt_token_ids: msgspec.Raw = _NULL


_DECODER = msgspec.json.Decoder(_Completion)
_IDS = msgspec.json.Decoder(list[int])
_DIGITS = b"0123456789"


@dataclass(frozen=True, slots=True)
class TokenArrays:
    """One completion's tokens, the ids as JSON arrays of ints (compact, as the server wrote
    them when it wrote them so): written out again without a parse."""

    prompt_token_ids: bytes
    completion_token_ids: bytes
    logprobs: list[float]

    def tokens(self) -> Tokens:
        """The same tokens with the ids as lists of ints."""
        prompt = _IDS.decode(self.prompt_token_ids)
        return Tokens(prompt, _IDS.decode(self.completion_token_ids), self.logprobs)


class NotACompletionError(ValueError):
    """The bytes are not a chat completion's JSON, or a field kept has the wrong type."""


def decode_completion(
    raw: bytes, where: str = ""
) -> tuple[dict[str, Any], str | None, Tokens | MissingTokenIdsError]:
    """``(message, finish reason, tokens)`` of the first choice of a chat completion's JSON
    bytes; ``tokens`` is the :class:`~openenv_runtime.llm.tokens.MissingTokenIdsError` when
    the answer lacks them (the message is still read). :class:`NotACompletionError` when
    ``raw`` is not such JSON."""
    message, finish, arrays = decode_completion_json(raw, where)
    return message, finish, arrays if isinstance(arrays, MissingTokenIdsError) else arrays.tokens()


def decode_completion_json(
    raw: bytes, where: str = ""
) -> tuple[dict[str, Any], str | None, TokenArrays | MissingTokenIdsError]:
    """:func:`decode_completion`, with the token ids as JSON arrays (:class:`TokenArrays`)."""
    try:
        answer = _DECODER.decode(raw)
        choice = answer.choices[0] if answer.choices else _Choice()
        message = choice.message or {}
        prompt, _ = _ids(answer.prompt_token_ids)
        ids, length = _ids(choice.token_ids)
    except msgspec.DecodeError as error:
        raise NotACompletionError(str(error)) from None
    if prompt is None or ids is None:
        return message, choice.finish_reason, missing("token ids", where)
    content = choice.logprobs.content if choice.logprobs is not None else None
    if content is None or len(content) != length:
        found = missing("log-probabilities (one per sampled token)", where)
        return message, choice.finish_reason, found
    logprobs = [e.logprob for e in content]
    return message, choice.finish_reason, TokenArrays(prompt, ids, logprobs)


def _ids(raw: msgspec.Raw) -> tuple[bytes | None, int]:
    """An array of token ids as compact JSON, and its length; None for ``null`` (or no
    array). ``msgspec.DecodeError`` when it is not an array of ints."""
    text = bytes(raw)
    # raw is valid JSON: when only "[", commas and "]" are left without the digits, it is an
    # array of non-negative ints (one translate: a tenth of the instructions of a parse)
    shape = text.translate(None, _DIGITS)
    if shape[:1] == b"[" and shape[-1:] == b"]" and not shape[1:-1].strip(b","):
        return text, (len(shape) - 1 if len(text) > 2 else 0)
    if text == b"null":
        return None, 0
    ids = _IDS.decode(text)
    return msgspec.json.encode(ids), len(ids)

"""A small deterministic tokenizer and chat template for the stand-in model server.

Byte-level: every byte of UTF-8 text is one token (id = byte + ``BYTE_OFFSET``); a few special
tokens frame the chat turns. Encoding is exact and reversible, so a test can check any token
it sees, and the vocabulary (262 ids) is small enough for a tiny model to be trained on it.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Sequence
from typing import Any

PAD, BOS, EOS, IM_START, IM_END, TOOL_CALL = 0, 1, 2, 3, 4, 5
SPECIAL_TOKENS: dict[int, str] = {
    PAD: "<|pad|>",
    BOS: "<|bos|>",
    EOS: "<|eos|>",
    IM_START: "<|im_start|>",
    IM_END: "<|im_end|>",
    TOOL_CALL: "<|tool_call|>",
}
BYTE_OFFSET = 6
VOCAB_SIZE = BYTE_OFFSET + 256


class StubTokenizer:
    """Byte-level tokenizer with a ChatML-like template (``<|im_start|>role\\n...<|im_end|>\\n``).

    An assistant turn that calls tools renders each call as ``<|tool_call|>`` followed by the
    JSON ``{"name": ..., "arguments": {...}}`` (keys sorted), one per line.
    """

    vocab_size = VOCAB_SIZE
    eos_token_id = IM_END
    pad_token_id = PAD

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens)."""
        return [b + BYTE_OFFSET for b in text.encode("utf-8")]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text of ``ids``; special tokens are left out unless ``skip_special_tokens=False``."""
        out = bytearray()
        for i in ids:
            if i >= BYTE_OFFSET:
                out.append(i - BYTE_OFFSET)
            elif not skip_special_tokens:
                out.extend(SPECIAL_TOKENS[i].encode())
        return out.decode("utf-8", errors="replace")

    def token_text(self, token_id: int) -> str:
        """The text of one token (special tokens by name, bytes as latin-1)."""
        if token_id < BYTE_OFFSET:
            return SPECIAL_TOKENS[token_id]
        return bytes([token_id - BYTE_OFFSET]).decode("latin-1")

    def render_assistant(
        self, content: str, tool_calls: Sequence[dict[str, Any]] = ()
    ) -> list[int]:
        """The tokens an assistant turn's body is sampled as: content, then each tool call."""
        ids = self.encode(content)
        for call in tool_calls:
            function = call.get("function", call)
            arguments = function.get("arguments") or {}
            if isinstance(arguments, str):
                arguments = json.loads(arguments or "{}")
            ids.append(TOOL_CALL)
            ids += self.encode(
                json.dumps({"name": function["name"], "arguments": arguments}, sort_keys=True)
            )
        return ids

    def apply_chat_template(
        self, messages: Sequence[dict[str, Any]], add_generation_prompt: bool = True
    ) -> list[int]:
        """Token ids of ``messages``; with ``add_generation_prompt`` an open assistant turn ends them."""
        ids: list[int] = [BOS]
        for message in messages:
            role = str(message.get("role", "user"))
            ids += [IM_START, *self.encode(f"{role}\n")]
            if role == "assistant":
                ids += self.render_assistant(
                    _text(message.get("content")), message.get("tool_calls") or ()
                )
            else:
                ids += self.encode(_text(message.get("content")))
            ids += [IM_END, *self.encode("\n")]
        if add_generation_prompt:
            ids += [IM_START, *self.encode("assistant\n")]
        return ids


def _text(content: Any) -> str:
    """Message content as text (a list of ``{"type": "text"}`` parts is joined)."""
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def token_logprob(context: Sequence[int], position: int, token_id: int, seed: int = 0) -> float:
    """A deterministic log-probability in (-4, -0.001] for ``token_id`` sampled at ``position``.

    A hash of the last 16 context tokens, the position, the token and the seed: the same
    request gives the same numbers, a different seed different ones.
    """
    tail = ",".join(map(str, context[-16:]))
    digest = hashlib.blake2b(f"{seed}|{tail}|{position}|{token_id}".encode(), digest_size=8)
    (value,) = struct.unpack("<Q", digest.digest())
    fraction = value / 2**64
    return -round(0.001 + 4 * fraction * fraction, 6) if math.isfinite(fraction) else -1.0

"""decode_completion(_json): an answer's bytes into its message, finish reason and tokens, or why not."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from openenv_runtime.llm.completions import (
    NotACompletionError,
    TokenArrays,
    decode_completion,
    decode_completion_json,
)
from openenv_runtime.llm.tokens import MissingTokenIdsError, read_tokens


def answer(**choice: Any) -> dict[str, Any]:
    first = {
        "index": 0,
        "message": {"role": "assistant", "content": "hi"},
        "finish_reason": "stop",
        "token_ids": [7, 8],
        "logprobs": {
            "content": [
                {"token": "h", "logprob": -0.5, "bytes": [104], "top_logprobs": []},
                {"token": "i", "logprob": -1, "bytes": [105], "top_logprobs": []},
            ]
        },
    }
    return {"id": "x", "choices": [{**first, **choice}], "prompt_token_ids": [1, 2, 3]}


def test_the_tokens_are_those_the_json_parse_reads() -> None:
    whole = answer()
    message, finish, tokens = decode_completion(orjson.dumps(whole))
    assert message == {"role": "assistant", "content": "hi"} and finish == "stop"
    assert tokens == read_tokens(whole)
    assert tokens.logprobs == [-0.5, -1.0] and all(type(v) is float for v in tokens.logprobs)


@pytest.mark.parametrize(
    ("change", "missing"),
    [
        ({"token_ids": None}, "token ids"),
        ({"logprobs": None}, "log-probabilities"),
        ({"logprobs": {"content": [{"logprob": -0.5}]}}, "log-probabilities"),
    ],
)
def test_an_answer_without_its_tokens_keeps_its_message_and_says_what_is_missing(
    change: dict[str, Any], missing: str
) -> None:
    message, finish, tokens = decode_completion(orjson.dumps(answer(**change)), "at the server")
    assert message["content"] == "hi" and finish == "stop"
    assert isinstance(tokens, MissingTokenIdsError)
    assert missing in str(tokens) and "at the server" in str(tokens)
    message, _, tokens = decode_completion(b'{"choices": []}')
    assert message == {} and isinstance(tokens, MissingTokenIdsError)


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[1, 2]",
        orjson.dumps(answer(token_ids=["7", "8"])),  # ids that are not ints
        orjson.dumps(answer(message="hi")),
        orjson.dumps({**answer(), "prompt_token_ids": [1.5]}),
    ],
)
def test_bytes_that_are_not_a_completion_are_refused(raw: bytes) -> None:
    with pytest.raises(NotACompletionError):
        decode_completion(raw)


def spelled(text: str, **choice: Any) -> bytes:
    """An answer whose choice's ``token_ids`` JSON is spelled ``text`` (as a server wrote it)."""
    raw = orjson.dumps(answer(token_ids=[], **choice))
    return raw.replace(b'"token_ids":[]', b'"token_ids":' + text.encode())


def test_compact_id_arrays_are_kept_as_the_server_wrote_them() -> None:
    _, _, arrays = decode_completion_json(orjson.dumps(answer()))
    assert isinstance(arrays, TokenArrays)
    assert (arrays.prompt_token_ids, arrays.completion_token_ids) == (b"[1,2,3]", b"[7,8]")
    assert arrays.tokens() == read_tokens(answer())


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("[7, 8]", b"[7,8]"),  # spaced: decoded, checked and written compact
        ("[ 7,8 ]", b"[7,8]"),
        ("[-7,8]", b"[-7,8]"),  # ints all the same, as read_tokens takes them
    ],
)
def test_id_arrays_spelled_otherwise_are_checked_and_written_compact(
    text: str, kept: bytes
) -> None:
    _, _, arrays = decode_completion_json(spelled(text))
    assert isinstance(arrays, TokenArrays) and arrays.completion_token_ids == kept


def test_an_empty_completion_has_no_ids_and_no_log_probabilities() -> None:
    _, _, arrays = decode_completion_json(spelled("[]", logprobs={"content": []}))
    assert isinstance(arrays, TokenArrays)
    assert arrays.completion_token_ids == b"[]" and arrays.logprobs == []
    _, _, short = decode_completion_json(spelled("[7]", logprobs={"content": []}))
    assert isinstance(short, MissingTokenIdsError)  # one id, no log-probability


@pytest.mark.parametrize("text", ["[[7],[8]]", "[7.0,8]", "[7e0,8]", '["7",8]', "{}", '"78"'])
def test_id_arrays_that_are_not_arrays_of_ints_are_refused(text: str) -> None:
    with pytest.raises(NotACompletionError):
        decode_completion_json(spelled(text))

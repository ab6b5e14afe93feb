"""decode_completion: an answer's bytes into its message, finish reason and tokens, or why not."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from openenv_runtime.llm.completions import NotACompletionError, decode_completion
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

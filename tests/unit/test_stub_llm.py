"""The stand-in model server: vLLM's token fields, tool calls, streaming, policies, faults."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from openenv_runtime.testing import StubLLM as ReExported
from openenv_runtime.testing.stub_llm import StubLLM, StubReply, StubTokenizer
from openenv_runtime.testing.stub_llm.tokenizer import IM_END, TOOL_CALL, token_logprob

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "héllo"}]


def _post(stub: StubLLM, body: dict[str, Any], **headers: str) -> httpx.Response:
    from starlette.testclient import TestClient

    with TestClient(stub.app) as client:
        return client.post("/v1/chat/completions", json=body, headers=headers)


def test_tokenizer_round_trips_text_and_renders_the_template() -> None:
    tok = StubTokenizer()
    assert tok.decode(tok.encode("héllo ✓")) == "héllo ✓"
    ids = tok.apply_chat_template(MESSAGES)
    assert tok.decode(ids, skip_special_tokens=False).endswith("<|im_start|>assistant\n")
    assert max(ids) < tok.vocab_size


def test_token_ids_and_logprobs_in_vllm_fields() -> None:
    stub = StubLLM(lambda messages: "hi ✓")
    body = {"model": "m", "messages": MESSAGES, "return_token_ids": True, "logprobs": True}
    answer = _post(stub, body).json()
    tok = stub.tokenizer
    choice = answer["choices"][0]
    assert answer["prompt_token_ids"] == tok.apply_chat_template(MESSAGES)
    assert choice["token_ids"] == [*tok.encode("hi ✓"), IM_END]
    assert choice["message"]["content"] == "hi ✓"
    assert choice["finish_reason"] == "stop"
    logprobs = [e["logprob"] for e in choice["logprobs"]["content"]]
    assert len(logprobs) == len(choice["token_ids"]) and all(lp < 0 for lp in logprobs)
    # Deterministic: the same request gives the same numbers; another seed others.
    assert _post(stub, body).json()["choices"][0]["logprobs"] == choice["logprobs"]
    other = _post(stub, {**body, "seed": 7}).json()["choices"][0]["logprobs"]
    assert other != choice["logprobs"]
    assert token_logprob([1, 2], 0, 9) == token_logprob([1, 2], 0, 9)


def test_fields_only_when_asked_and_never_without_support() -> None:
    plain = _post(StubLLM(), {"messages": MESSAGES}).json()
    assert "prompt_token_ids" not in plain and plain["choices"][0]["logprobs"] is None
    body = {"messages": MESSAGES, "return_token_ids": True}
    assert "prompt_token_ids" not in _post(StubLLM(token_ids=False), body).json()


def test_tool_calls_and_their_tokens() -> None:
    call = {"name": "move", "arguments": {"dx": 1}}
    stub = StubLLM(lambda m, r: StubReply("go", [call]))
    answer = _post(stub, {"messages": MESSAGES, "return_token_ids": True}).json()
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (made,) = choice["message"]["tool_calls"]
    assert made["function"]["name"] == "move"
    assert json.loads(made["function"]["arguments"]) == {"dx": 1}
    assert TOOL_CALL in choice["token_ids"] and choice["token_ids"][-1] == IM_END
    # The assistant turn, sent back, renders as exactly the sampled tokens.
    history = [*MESSAGES, choice["message"]]
    rendered = stub.tokenizer.apply_chat_template(history, add_generation_prompt=False)
    prefix = answer["prompt_token_ids"] + choice["token_ids"]
    assert rendered[: len(prefix)] == prefix


def test_streaming_carries_the_same_tokens() -> None:
    call = {"name": "say", "arguments": {"text": "x"}}
    stub = StubLLM(lambda m: {"content": "ok ✓", "tool_calls": [call]})
    base = {"messages": MESSAGES, "return_token_ids": True, "logprobs": True}
    whole = _post(stub, base).json()
    stream = _post(stub, {**base, "stream": True, "stream_options": {"include_usage": True}})
    assert stream.headers["content-type"].startswith("text/event-stream")
    events = [line[6:] for line in stream.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["prompt_token_ids"] == whole["prompt_token_ids"]
    ids = [t for c in chunks for ch in c["choices"] for t in ch.get("token_ids", [])]
    assert ids == whole["choices"][0]["token_ids"]
    text = "".join(ch["delta"].get("content") or "" for c in chunks for ch in c["choices"])
    assert text == "ok ✓"
    assert chunks[-1]["usage"]["completion_tokens"] == len(ids)


def test_max_tokens_cuts_the_completion() -> None:
    body = {"messages": MESSAGES, "return_token_ids": True, "max_tokens": 3}
    choice = _post(StubLLM(lambda m: "abcdef"), body).json()["choices"][0]
    assert choice["finish_reason"] == "length" and len(choice["token_ids"]) == 3


def test_faults_and_auth() -> None:
    stub = StubLLM(api_key="k")
    assert _post(stub, {"messages": MESSAGES}).status_code == 401
    stub.fail_next(1, 429)
    stub.fail_next(1, 503)
    auth = {"Authorization": "Bearer k"}
    refused = _post(stub, {"messages": MESSAGES}, **auth)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "0"
    assert _post(stub, {"messages": MESSAGES}, **auth).status_code == 503
    assert _post(stub, {"messages": MESSAGES}, **auth).status_code == 200
    assert _post(stub, {"nothing": 1}, **auth).status_code == 400


def test_an_unknown_model_name_is_404_when_checked() -> None:
    lenient, strict = StubLLM(model="served"), StubLLM(model="served", check_model=True)
    assert _post(lenient, {"model": "typo", "messages": MESSAGES}).status_code == 200
    missing = _post(strict, {"model": "typo", "messages": MESSAGES})
    assert missing.status_code == 404 and "`typo` does not exist" in missing.text
    assert _post(strict, {"model": "served", "messages": MESSAGES}).status_code == 200


def test_models_list_and_reexport() -> None:
    from starlette.testclient import TestClient

    assert ReExported is StubLLM
    with TestClient(StubLLM(model="tiny").app) as client:
        assert client.get("/v1/models").json()["data"][0]["id"] == "tiny"


@pytest.mark.asyncio
async def test_async_policy_over_real_http() -> None:
    async def policy(messages: list[dict[str, Any]], request: dict[str, Any]) -> str:
        return f"t={request.get('temperature')}"

    stub = StubLLM(policy)
    with stub.serve() as url:
        async with httpx.AsyncClient(base_url=url) as client:
            answer = await client.post(
                "/v1/chat/completions", json={"messages": MESSAGES, "temperature": 0.5}
            )
    assert answer.json()["choices"][0]["message"]["content"] == "t=0.5"

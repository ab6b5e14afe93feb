"""OpenAIClient(return_tokens=True): the server's token ids and log-probabilities, or an error."""

from __future__ import annotations

from typing import Any

import pytest

from openenv_runtime.llm.client import OpenAIClient
from openenv_runtime.llm.tokens import MissingTokenIdsError, StreamTokens, read_tokens
from openenv_runtime.testing.stub_llm import StubLLM, StubReply
from openenv_runtime.testing.stub_llm.tokenizer import IM_END

pytest.importorskip(
    "openai", reason='needs openenv-runtime[llm]: pip install "openenv-runtime[llm]"'
)

TOOLS = [{"name": "move", "description": "Move.", "inputSchema": {"type": "object"}}]
MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "go"}]


@pytest.mark.asyncio
async def test_complete_with_tools_returns_the_sampled_tokens() -> None:
    stub = StubLLM(lambda m: StubReply("thinking", [{"name": "move", "arguments": {"dx": 2}}]))
    with stub.serve() as url:
        client = OpenAIClient(url, None, "stub-model", return_tokens=True)
        reply = await client.complete_with_tools(MESSAGES, TOOLS)
    tok = stub.tokenizer
    assert reply.tool_calls[0].name == "move" and reply.tool_calls[0].args == {"dx": 2}
    assert reply.prompt_token_ids == tok.apply_chat_template(MESSAGES)
    assert reply.completion_token_ids is not None and reply.completion_token_ids[-1] == IM_END
    assert reply.logprobs is not None and len(reply.logprobs) == len(reply.completion_token_ids)
    assert all(isinstance(x, float) for x in reply.logprobs)
    assert reply.finish_reason == "tool_calls"
    sent = stub.requests[-1]
    assert sent["return_token_ids"] is True and sent["logprobs"] is True


@pytest.mark.asyncio
async def test_without_return_tokens_nothing_is_asked() -> None:
    stub = StubLLM(lambda m: "hi")
    with stub.serve() as url:
        reply = await OpenAIClient(url, None, "m").complete_with_tools(MESSAGES, [])
    assert reply.content == "hi" and reply.completion_token_ids is None
    assert "return_token_ids" not in stub.requests[-1]


@pytest.mark.asyncio
async def test_a_server_without_token_ids_is_an_error_naming_the_fix() -> None:
    with StubLLM(token_ids=False).serve() as url:
        client = OpenAIClient(url, None, "m", return_tokens=True)
        with pytest.raises(MissingTokenIdsError, match="return_token_ids") as caught:
            await client.complete_with_tools(MESSAGES, [])
    assert url in str(caught.value)


def test_missing_logprobs_is_an_error_too() -> None:
    answer = {"prompt_token_ids": [1], "choices": [{"token_ids": [7, 8], "logprobs": None}]}
    with pytest.raises(MissingTokenIdsError, match="log-probabilities"):
        read_tokens(answer)
    stream = StreamTokens()
    stream.add({"choices": [{"index": 0, "delta": {"content": "x"}}]})
    with pytest.raises(MissingTokenIdsError, match="token ids"):
        stream.tokens()

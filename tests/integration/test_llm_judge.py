"""``LLMJudge`` with ``OpenAIClient`` against a local stand-in of an OpenAI-compatible server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastapi import FastAPI

from openenv_runtime.llm.client import OpenAIClient
from openenv_runtime.rubrics import LLMJudge
from openenv_runtime.testing import running_server

pytestmark = pytest.mark.timeout(60)


def stand_in(reply: str, seen: list[dict[str, Any]]) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        return {
            "id": "cmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply},
                    "finish_reason": "stop",
                }
            ],
        }

    return app


def test_judge_sends_the_rendered_prompt_and_parses_the_score() -> None:
    seen: list[dict[str, Any]] = []
    with running_server(stand_in("I would say 0.8 overall.", seen)) as url:
        host, port = url.rsplit(":", 1)
        client = OpenAIClient(host, int(port), "judge-model", system_prompt="Be strict.")
        judge = LLMJudge("Rate {action} -> {observation} from 0 to 1.", client)
        score = asyncio.run(judge("move e4", "board after e4"))
    assert score == 0.8 and judge.last_score == 0.8
    request = seen[0]
    assert request["model"] == "judge-model" and request["temperature"] == 0.0
    assert request["messages"] == [
        {"role": "system", "content": "Be strict."},
        {"role": "user", "content": "Rate move e4 -> board after e4 from 0 to 1."},
    ]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [("no number here", 0.25), ("7 out of 10", 1.0)],  # default score; clamped to [0, 1]
)
def test_judge_default_and_clamping(reply: str, expected: float) -> None:
    with running_server(stand_in(reply, [])) as url:
        judge = LLMJudge("{action}{observation}", OpenAIClient(url, None, "m"), default_score=0.25)
        assert asyncio.run(judge("a", "o")) == expected

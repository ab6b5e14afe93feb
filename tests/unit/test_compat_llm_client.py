"""compat.llm_client is the reference's ``llm_client`` module: the LLM clients' own module."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("openai", reason="needs openenv-runtime[llm]")


def test_patching_the_reference_module_reaches_the_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    from openenv_runtime.compat import llm_client

    made: list[dict[str, Any]] = []

    class Fake:
        def __init__(self, **options: Any) -> None:
            made.append(options)

    monkeypatch.setattr(llm_client, "AsyncOpenAI", Fake)
    llm_client.OpenAIClient("http://127.0.0.1:9", None, "m")
    assert made and made[0]["base_url"] == "http://127.0.0.1:9/v1"
    # the reference's private helper names stay importable from it
    assert llm_client._clean_mcp_schema({})["type"] == "object"

"""Clients of chat-completion endpoints, for LLM judges and agents.

``OpenAIClient`` speaks to any OpenAI-compatible endpoint (OpenAI, vLLM, TGI, Ollama,
llama.cpp's server, a Hugging Face router, ...) through the ``openai`` package:
``pip install "openenv-runtime[llm]"``.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit


@dataclass
class ToolCall:
    id: str
    name: str
    args: dict[str, Any]


@dataclass
class LLMResponse:
    """A reply: its text and the tools it asks to call."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)

    def to_message_dict(self) -> dict[str, Any]:
        """The reply as an assistant message for the next request."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.args)},
                }
                for c in self.tool_calls
            ]
        return message


def join_endpoint(endpoint: str, port: int | None) -> str:
    """``endpoint`` with ``port`` set when given (``http://h`` + 8000 → ``http://h:8000``)."""
    if port is None:
        return endpoint.rstrip("/")
    parts = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    host = parts.hostname or ""
    return urlunsplit(parts._replace(netloc=f"{host}:{port}")).rstrip("/")


class LLMClient(ABC):
    """An endpoint that completes prompts; ``LLMJudge`` needs only ``complete``."""

    def __init__(self, endpoint: str, port: int | None) -> None:
        self.endpoint = endpoint
        self.port = port

    @property
    def base_url(self) -> str:
        return join_endpoint(self.endpoint, self.port)

    @abstractmethod
    async def complete(self, prompt: str, **kwargs: Any) -> str:
        """The model's reply to ``prompt``."""

    async def complete_with_tools(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **kwargs: Any
    ) -> LLMResponse:
        raise NotImplementedError(f"{type(self).__name__} does not call tools")


class OpenAIClient(LLMClient):
    """Chat completions of ``model`` at an OpenAI-compatible ``endpoint`` (``/v1`` appended if missing)."""

    def __init__(
        self,
        endpoint: str,
        port: int | None,
        model: str,
        api_key: str | None = None,
        system_prompt: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 256,
        use_max_completion_tokens: bool = False,
    ) -> None:
        super().__init__(endpoint, port)
        try:
            from openai import AsyncOpenAI
        except ModuleNotFoundError:
            raise ModuleNotFoundError(
                'OpenAIClient needs the openai package: pip install "openenv-runtime[llm]"'
            ) from None
        base = self.base_url
        if not urlsplit(base).path.rstrip("/").endswith("/v1"):
            base += "/v1"
        self.model = model
        self.system_prompt = system_prompt
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._token_key = "max_completion_tokens" if use_max_completion_tokens else "max_tokens"
        # Local servers take any key; the openai package refuses to start without one.
        self._client = AsyncOpenAI(base_url=base, api_key=api_key or "not-needed")

    def _request(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        if self.system_prompt and not any(m.get("role") == "system" for m in messages):
            messages = [{"role": "system", "content": self.system_prompt}, *messages]
        return {
            "model": self.model,
            "messages": messages,
            "temperature": kwargs.pop("temperature", self.temperature),
            self._token_key: kwargs.pop("max_tokens", self.max_tokens),
            **kwargs,
        }

    async def complete(self, prompt: str, **kwargs: Any) -> str:
        reply = await self._client.chat.completions.create(
            **self._request([{"role": "user", "content": prompt}], **kwargs)
        )
        return reply.choices[0].message.content or ""

    async def complete_with_tools(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **kwargs: Any
    ) -> LLMResponse:
        reply = await self._client.chat.completions.create(
            **self._request(messages, tools=tools, **kwargs)
        )
        message = reply.choices[0].message
        calls = [
            ToolCall(id=c.id, name=c.function.name, args=json.loads(c.function.arguments or "{}"))
            for c in message.tool_calls or []
            if getattr(c, "function", None) is not None
        ]
        return LLMResponse(content=message.content or "", tool_calls=calls)


class AnthropicClient(LLMClient):
    """Not offered here: use ``OpenAIClient`` with Anthropic's OpenAI-compatible endpoint."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            "AnthropicClient is not part of openenv-runtime; Anthropic serves an OpenAI-compatible "
            "API: OpenAIClient('https://api.anthropic.com', None, model, api_key=...)."
        )

    async def complete(self, prompt: str, **kwargs: Any) -> str:  # pragma: no cover
        raise NotImplementedError


def create_llm_client(
    provider: str,
    model: str,
    api_key: str,
    *,
    system_prompt: str | None = None,
    temperature: float = 0.0,
    max_tokens: int = 4096,
    endpoint: str = "https://api.openai.com",
) -> LLMClient:
    """A client for ``provider`` (``"openai"``; other providers through their OpenAI-compatible endpoint)."""
    if provider.lower() != "openai":
        raise ValueError(
            f"provider {provider!r} is not offered; use 'openai' with endpoint= pointing at the "
            "provider's OpenAI-compatible API."
        )
    return OpenAIClient(
        endpoint,
        None,
        model,
        api_key=api_key,
        system_prompt=system_prompt,
        temperature=temperature,
        max_tokens=max_tokens,
    )

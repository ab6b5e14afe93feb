"""Clients of chat-completion endpoints, for LLM judges and agents.

``OpenAIClient`` speaks to any OpenAI-compatible endpoint (OpenAI, vLLM, TGI, Ollama,
llama.cpp's server, a Hugging Face router, ...) through the ``openai`` package
(``pip install "openenv-runtime[llm]"``); ``AnthropicClient`` to Anthropic's API through the
``anthropic`` package. The helpers turn MCP tool listings into each provider's tool format.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

# The reference's `openenv.core.llm_client` names: compat/llm_client.py is this very module
# (so patching its AsyncOpenAI reaches the clients), hence these imports stay here.
from .tokens import MissingTokenIdsError as MissingTokenIdsError
from .tokens import read_reply
from .tools import _clean_mcp_schema as _clean_mcp_schema
from .tools import _mcp_tools_to_anthropic as _mcp_tools_to_anthropic
from .tools import _mcp_tools_to_openai as _mcp_tools_to_openai
from .tools import _openai_msgs_to_anthropic as _openai_msgs_to_anthropic
from .tools import clean_mcp_schema as clean_mcp_schema
from .tools import mcp_tools_to_anthropic as mcp_tools_to_anthropic
from .tools import mcp_tools_to_openai as mcp_tools_to_openai
from .tools import openai_messages_to_anthropic as openai_messages_to_anthropic

try:  # a module global, so tests and callers can substitute the class
    import httpx
    from openai import AsyncOpenAI
except ModuleNotFoundError:  # the [llm] extra is not installed
    AsyncOpenAI = None  # type: ignore[misc,assignment,unused-ignore]  # (unused without openai)


@dataclass
class ToolCall:
    id: str
    name: str
    args: dict[str, Any]


@dataclass
class LLMResponse:
    """A reply: its text and the tools it asks to call.

    With ``OpenAIClient(..., return_tokens=True)`` also the tokens the server sampled:
    ``prompt_token_ids``, ``completion_token_ids`` and one log-probability per completion
    token (``logprobs``), as the server reported them.
    """

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    finish_reason: str | None = None

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
        """A reply to ``messages`` (OpenAI format) that may call ``tools`` (MCP listings)."""
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
        return_tokens: bool = False,
        timeout: float | None = None,
    ) -> None:
        super().__init__(endpoint, port)
        if AsyncOpenAI is None:
            raise ModuleNotFoundError(
                'OpenAIClient needs the openai package: pip install "openenv-runtime[llm]"',
                name="openai",
            )
        base = self.base_url
        if not urlsplit(base).path.rstrip("/").endswith("/v1"):
            base += "/v1"
        self.model = model
        self.system_prompt = system_prompt
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._token_key = "max_completion_tokens" if use_max_completion_tokens else "max_tokens"
        # Token ids and log-probabilities of every reply (vLLM's fields); see llm.tokens.
        self.return_tokens = return_tokens
        # Local servers take any key; the openai package refuses to start without one.
        options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        self._client = AsyncOpenAI(base_url=base, api_key=api_key or "not-needed", **options)

    def _request(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        if self.system_prompt and not any(m.get("role") == "system" for m in messages):
            messages = [{"role": "system", "content": self.system_prompt}, *messages]
        return {
            "model": self.model,
            "messages": messages,
            "temperature": kwargs.pop("temperature", self.temperature),
            self._token_key: kwargs.pop("max_tokens", self.max_tokens),
            **kwargs,
            **self._token_options(kwargs),
        }

    def _token_request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **kwargs: Any
    ) -> dict[str, Any]:
        """The JSON body of a call that returns token ids (``extra_body`` merged in)."""
        if tools:  # an empty list is refused by some servers
            kwargs["tools"] = mcp_tools_to_openai(tools)
        request = self._request(messages, **kwargs)
        request.update(request.pop("extra_body", None) or {})
        return request

    def _token_response(self, answer: dict[str, Any]) -> LLMResponse:
        """The reply of a call that returns token ids (an error names what to enable)."""
        text, made, finish, tokens = read_reply(answer, f"at {self.base_url}")
        return LLMResponse(
            text,
            [ToolCall(*c) for c in made],
            tokens.prompt_token_ids,
            tokens.completion_token_ids,
            tokens.logprobs,
            finish,
        )

    def _token_options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if not self.return_tokens:
            return {}
        extra = {**(kwargs.get("extra_body") or {}), "return_token_ids": True}
        return {"logprobs": True, "extra_body": extra}

    async def complete(self, prompt: str, **kwargs: Any) -> str:
        reply = await self._client.chat.completions.create(
            **self._request([{"role": "user", "content": prompt}], **kwargs)
        )
        return reply.choices[0].message.content or ""

    async def complete_with_tools(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **kwargs: Any
    ) -> LLMResponse:
        if self.return_tokens:  # the training path: the JSON as sent, no per-field models
            body = self._token_request(messages, tools, **kwargs)
            raw = await self._client.post("/chat/completions", body=body, cast_to=httpx.Response)
            return self._token_response(raw.json())
        if tools:  # an empty list is refused by some servers
            kwargs["tools"] = mcp_tools_to_openai(tools)
        reply = await self._client.chat.completions.create(**self._request(messages, **kwargs))
        choice = reply.choices[0]
        message = choice.message
        calls = [
            ToolCall(id=c.id, name=c.function.name, args=json.loads(c.function.arguments or "{}"))
            for c in message.tool_calls or []
            if getattr(c, "function", None) is not None
        ]
        response = LLMResponse(
            content=message.content or "", tool_calls=calls, finish_reason=choice.finish_reason
        )
        return response


class AnthropicClient(LLMClient):
    """Messages of ``model`` through Anthropic's API (needs the ``anthropic`` package)."""

    def __init__(
        self,
        endpoint: str,
        port: int | None,
        model: str,
        api_key: str | None = None,
        system_prompt: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 256,
    ) -> None:
        super().__init__(endpoint, port)
        try:
            import anthropic  # type: ignore[import-not-found]
        except ImportError:
            raise ImportError(
                "AnthropicClient needs the anthropic package: pip install anthropic"
            ) from None
        self.model = model
        self.system_prompt = system_prompt
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._client = anthropic.AsyncAnthropic(api_key=api_key, base_url=self.base_url)

    def _request(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        system, converted = openai_messages_to_anthropic(messages)
        system = "\n\n".join(p for p in (self.system_prompt, system) if p)
        request: dict[str, Any] = {
            "model": self.model,
            "messages": converted,
            "temperature": kwargs.pop("temperature", self.temperature),
            "max_tokens": kwargs.pop("max_tokens", self.max_tokens),
            **kwargs,
        }
        if system:
            request["system"] = system
        return request

    async def complete(self, prompt: str, **kwargs: Any) -> str:
        reply = await self._client.messages.create(
            **self._request([{"role": "user", "content": prompt}], **kwargs)
        )
        return "".join(b.text for b in reply.content if getattr(b, "type", None) == "text")

    async def complete_with_tools(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **kwargs: Any
    ) -> LLMResponse:
        reply = await self._client.messages.create(
            **self._request(messages, tools=mcp_tools_to_anthropic(tools), **kwargs)
        )
        text = "".join(b.text for b in reply.content if getattr(b, "type", None) == "text")
        calls = [
            ToolCall(id=b.id, name=b.name, args=dict(b.input or {}))
            for b in reply.content
            if getattr(b, "type", None) == "tool_use"
        ]
        return LLMResponse(content=text, tool_calls=calls)


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
    """A client for ``provider``: ``"openai"`` (any OpenAI-compatible ``endpoint``) or ``"anthropic"``."""
    kind = provider.lower()
    if kind == "anthropic":
        return AnthropicClient(
            "https://api.anthropic.com",
            None,
            model,
            api_key=api_key,
            system_prompt=system_prompt,
            temperature=temperature,
            max_tokens=max_tokens,
        )
    if kind != "openai":
        raise ValueError(
            f"provider {provider!r} is not offered; use 'openai' (with endpoint= for any "
            "OpenAI-compatible API) or 'anthropic'."
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

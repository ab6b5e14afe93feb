"""The rollouts' model calls over one aiohttp session (when ``llm`` is given as a URL).

``OpenAIClient`` sends the training path's requests through the ``openai`` package and
httpx; with 64 sessions their connection pool and request machinery cost the trainer's
process about 2 ms of CPU per model call (measured, ``benchmarks/training/rollouts.py``), more than
everything else an episode does. This client sends the same JSON (``OpenAIClient._request``)
over aiohttp and reads the answer with orjson; everything else is ``OpenAIClient``'s.
Calls answered 408, 409, 429 or 5xx, or cut by a dropped connection, are retried twice with
a growing wait, as the ``openai`` package does.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from ..llm.client import LLMResponse, OpenAIClient, ToolCall
from ..llm.tokens import read_message

_RETRIED = {408, 409, 429, 500, 502, 503, 504}


class ModelCallError(RuntimeError):
    """The model server answered a chat completion with an HTTP error."""

    def __init__(self, status: int, url: str, body: bytes) -> None:
        self.status = status
        excerpt = body[:300].decode("utf-8", "replace")
        super().__init__(f"HTTP {status} from the model server at {url}: {excerpt}")


def _retryable(error: BaseException) -> bool:
    if isinstance(error, ModelCallError):
        return error.status in _RETRIED
    return isinstance(error, aiohttp.ClientConnectionError)


class TokenClient(OpenAIClient):
    """``OpenAIClient`` whose ``complete_with_tools`` goes over aiohttp (token ids asked for
    and required by default; ``return_tokens = False`` sends the plain request).

    Its connections belong to the event loop of its first call; ``aclose()`` ends them.
    """

    def __init__(
        self,
        endpoint: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float | None = None,
        return_tokens: bool = True,
    ) -> None:
        super().__init__(
            endpoint, None, model, api_key=api_key, return_tokens=return_tokens, timeout=timeout
        )
        self._url = str(self._client.base_url).rstrip("/") + "/chat/completions"
        self._headers = {"content-type": "application/json"}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _http(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=4),
                timeout=self._timeout,
                cookie_jar=aiohttp.DummyCookieJar(),
            )
            self._loop = loop
        return self._session

    async def aclose(self) -> None:
        """Close the connections (in the event loop they were made in)."""
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def complete_with_tools(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **kwargs: Any
    ) -> LLMResponse:
        answer = await self._post(orjson.dumps(self._token_request(messages, tools, **kwargs)))
        if self.return_tokens:
            return self._token_response(answer)
        text, made, finish = read_message(answer)
        return LLMResponse(text, [ToolCall(*c) for c in made], finish_reason=finish)

    async def _post(self, data: bytes) -> dict[str, Any]:
        retrying = AsyncRetrying(
            stop=stop_after_attempt(3),
            wait=wait_exponential(multiplier=0.5, max=8),
            retry=retry_if_exception(_retryable),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                async with self._http().post(self._url, data=data, headers=self._headers) as r:
                    body = await r.read()
                    if r.status >= 400:
                        raise ModelCallError(r.status, self._url, body)
                    answer = orjson.loads(body)
                    if not isinstance(answer, dict):
                        raise ModelCallError(
                            r.status, self._url, b"the answer is not a JSON object"
                        )
                    return answer
        raise AssertionError("unreachable")  # tenacity re-raises the last error

"""``StubLLM``: an OpenAI-compatible chat-completions server for tests and examples.

Replies come from a scripted policy (a function of the messages); token ids and
log-probabilities are reported in vLLM's fields (``prompt_token_ids``,
``choices[].token_ids``, ``choices[].logprobs.content[].logprob``) when the request asks
(``return_token_ids``, ``logprobs``). Faults (5xx, 429, latency) can be injected.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .tokenizer import IM_END, StubTokenizer, token_logprob


@dataclass
class StubReply:
    """A policy's reply: text, and tool calls as ``{"name": ..., "arguments": {...}}``."""

    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


Reply = str | StubReply | dict[str, Any]
Policy = Callable[..., Reply | Awaitable[Reply]]


def echo_policy(messages: list[dict[str, Any]], request: dict[str, Any]) -> Reply:
    """The default policy: repeats the last user or tool message's text."""
    for message in reversed(messages):
        if message.get("role") in ("user", "tool"):
            return str(message.get("content") or "")
    return ""


class StubLLM:
    """A stand-in model server; ``stub.app`` (or ``stub`` itself) is the ASGI app.

    Args:
        policy: ``policy(messages, request)`` (or ``policy(messages)``) → reply text, a
            ``StubReply`` or ``{"content": ..., "tool_calls": [...]}``; may be async.
        model: the model name ``/v1/models`` lists.
        latency: seconds each completion waits before answering.
        token_ids: when False the server never reports token ids (as a server without
            ``return_token_ids`` support), to test clients' errors.
        api_key: when set, requests must carry ``Authorization: Bearer <api_key>``.
        record: keep what was sampled for each prompt in ``stub.sampled`` (for checks).
        check_model: answer a request for another model than ``model`` with HTTP 404, as
            vLLM does (by default any name is served).

    ``stub.fail_next(n, status)`` makes the next ``n`` completions fail (429 carries
    ``Retry-After``); ``stub.requests`` holds every completion request's body, ``stub.paths``
    every HTTP request's method and path as sent (``"POST /v1/chat/completions"``).
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        model: str = "stub-model",
        latency: float = 0.0,
        token_ids: bool = True,
        api_key: str | None = None,
        record: bool = False,
        check_model: bool = False,
    ) -> None:
        self.policy: Policy = policy or echo_policy
        self.check_model = check_model
        self.model = model
        self.latency = latency
        self.token_ids = token_ids
        self.api_key = api_key
        self.tokenizer = StubTokenizer()
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        # With record=True: prompt token ids → (sampled ids, their log-probabilities).
        self.sampled: dict[tuple[int, ...], tuple[list[int], list[float]]] | None = (
            {} if record else None
        )
        self._faults: list[int] = []
        self._lock = threading.Lock()
        self._routes = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/health", self._health, methods=["GET"]),
            ]
        )
        self.app: Any = self

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            raw: bytes = scope.get("raw_path") or scope["path"].encode()
            self.paths.append(f"{scope['method']} {raw.decode('latin-1')}")
        await self._routes(scope, receive, send)

    def fail_next(self, count: int = 1, status: int = 500) -> None:
        """The next ``count`` completions answer HTTP ``status`` (e.g. 500, 503, 429)."""
        with self._lock:
            self._faults.extend([status] * count)

    @contextmanager
    def serve(self, host: str = "127.0.0.1") -> Iterator[str]:
        """Run on a free port in a background thread; yields the base URL (no ``/v1``)."""
        from ..running import running_server

        with running_server(self.app, host=host) as url:
            yield url

    # -- routes ---------------------------------------------------------------------------
    def _refused(self, request: Request) -> Response | None:
        if self.api_key and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return _error(401, "invalid api key", "authentication_error")
        return None

    async def _health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def _models(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        card = {"id": self.model, "object": "model", "created": 0, "owned_by": "openenv-stub"}
        return JSONResponse({"object": "list", "data": [card]})

    async def _chat(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        try:
            body = await request.json()
            messages = list(body["messages"])
        except (ValueError, KeyError, TypeError):
            return _error(400, "the body must be JSON with a 'messages' list")
        with self._lock:
            self.requests.append(body)
            fault = self._faults.pop(0) if self._faults else None
        if self.latency:
            await asyncio.sleep(self.latency)
        if fault is not None:
            headers = {"Retry-After": "0"} if fault == 429 else None
            return _error(fault, f"injected fault {fault}", "server_error", headers)
        if self.check_model and body.get("model") != self.model:
            return _error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
        if int(body.get("n") or 1) != 1:
            return _error(400, "the stand-in server answers n=1 only")
        reply = await self._reply(messages, body)
        completion = self._complete(messages, reply, body)
        if self.sampled is not None:
            self.sampled[tuple(completion.prompt)] = (completion.ids, completion.logprobs)
        if body.get("stream"):
            return StreamingResponse(
                _sse(self._chunks(completion, body)), media_type="text/event-stream"
            )
        return JSONResponse(self._response(completion, body))

    async def _reply(self, messages: list[dict[str, Any]], body: dict[str, Any]) -> StubReply:
        takes_request = len(inspect.signature(self.policy).parameters) >= 2
        raw = self.policy(messages, body) if takes_request else self.policy(messages)
        if inspect.isawaitable(raw):
            raw = await raw
        if isinstance(raw, StubReply):
            return raw
        if isinstance(raw, dict):
            return StubReply(str(raw.get("content") or ""), list(raw.get("tool_calls") or []))
        return StubReply(str(raw))

    # -- sampling -------------------------------------------------------------------------
    def _complete(
        self, messages: list[dict[str, Any]], reply: StubReply, body: dict[str, Any]
    ) -> _Completion:
        tok = self.tokenizer
        prompt = tok.apply_chat_template(messages, add_generation_prompt=True)
        calls = [_tool_call(c, prompt, i) for i, c in enumerate(reply.tool_calls)]
        ids = [*tok.render_assistant(reply.content, calls), IM_END]
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        finish = "tool_calls" if calls else "stop"
        content = reply.content
        if isinstance(limit, int) and 0 < limit < len(ids):
            ids, finish, calls = ids[:limit], "length", []
            content = tok.decode(ids)
        seed = int(body.get("seed") or 0)
        context = list(prompt)
        logprobs: list[float] = []
        for position, token in enumerate(ids):
            logprobs.append(token_logprob(context, position, token, seed))
            context.append(token)
        return _Completion(prompt, ids, logprobs, content, calls, finish)

    def _logprob_entries(
        self, ids: Sequence[int], logprobs: Sequence[float], top: int
    ) -> list[Any]:
        tok = self.tokenizer
        entries = []
        for token, logprob in zip(ids, logprobs, strict=True):
            text = tok.token_text(token)
            alternatives = [{"token": text, "logprob": logprob, "bytes": list(text.encode())}]
            for k in range(1, top):
                other = tok.token_text((token + k) % tok.vocab_size)
                alternatives.append(
                    {"token": other, "logprob": logprob - k, "bytes": list(other.encode())}
                )
            entries.append(
                {
                    "token": text,
                    "logprob": logprob,
                    "bytes": list(text.encode()),
                    "top_logprobs": alternatives[:top],
                }
            )
        return entries

    def _wants(self, body: dict[str, Any]) -> tuple[bool, bool, int]:
        ids = bool(body.get("return_token_ids")) and self.token_ids
        return ids, bool(body.get("logprobs")), int(body.get("top_logprobs") or 0)

    def _response(self, c: _Completion, body: dict[str, Any]) -> dict[str, Any]:
        want_ids, want_logprobs, top = self._wants(body)
        message: dict[str, Any] = {"role": "assistant", "content": c.content or None}
        if c.calls:
            message["tool_calls"] = c.calls
        else:
            message["content"] = c.content
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": c.finish}
        choice["logprobs"] = (
            {"content": self._logprob_entries(c.ids, c.logprobs, top)} if want_logprobs else None
        )
        response: dict[str, Any] = {
            "id": f"chatcmpl-{c.key}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [choice],
            "usage": _usage(c),
        }
        if want_ids:
            choice["token_ids"] = list(c.ids)
            response["prompt_token_ids"] = list(c.prompt)
        return response

    def _chunks(self, c: _Completion, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        want_ids, want_logprobs, top = self._wants(body)
        base = {
            "id": f"chatcmpl-{c.key}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
        }
        first: dict[str, Any] = {
            **base,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
        }
        if want_ids:
            first["prompt_token_ids"] = list(c.prompt)
        yield first
        for delta, start, end in _pieces(self.tokenizer, c):
            choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": None}
            if want_ids:
                choice["token_ids"] = list(c.ids[start:end])
            if want_logprobs:
                entries = self._logprob_entries(c.ids[start:end], c.logprobs[start:end], top)
                choice["logprobs"] = {"content": entries}
            yield {**base, "choices": [choice]}
        yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": c.finish}]}
        if (body.get("stream_options") or {}).get("include_usage"):
            yield {**base, "choices": [], "usage": _usage(c)}


@dataclass
class _Completion:
    prompt: list[int]
    ids: list[int]
    logprobs: list[float]
    content: str
    calls: list[dict[str, Any]]
    finish: str

    @property
    def key(self) -> str:
        return hashlib.blake2b(repr((self.prompt, self.ids)).encode(), digest_size=8).hexdigest()


def _tool_call(call: dict[str, Any], prompt: Sequence[int], index: int) -> dict[str, Any]:
    function = call.get("function", call)
    arguments = function.get("arguments") or {}
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, sort_keys=True)
    digest = hashlib.blake2b(f"{list(prompt)}|{index}".encode(), digest_size=6).hexdigest()
    return {
        "id": call.get("id") or f"call_{digest}",
        "type": "function",
        "function": {"name": function["name"], "arguments": arguments},
    }


def _pieces(tok: StubTokenizer, c: _Completion) -> Iterator[tuple[dict[str, Any], int, int]]:
    """Stream deltas with the token range each covers: the text a character at a time, each
    tool call whole, the end-of-turn token last."""
    if c.finish == "length":  # cut short: one piece, whatever it holds
        yield {"content": c.content}, 0, len(c.ids)
        return
    position = 0
    for char in c.content:
        width = len(char.encode("utf-8"))
        yield {"content": char}, position, position + width
        position += width
    for index, call in enumerate(c.calls):
        width = len(tok.render_assistant("", [call]))
        yield {"tool_calls": [{"index": index, **call}]}, position, position + width
        position += width
    if position < len(c.ids):
        yield {}, position, len(c.ids)


def _usage(c: _Completion) -> dict[str, int]:
    return {
        "prompt_tokens": len(c.prompt),
        "completion_tokens": len(c.ids),
        "total_tokens": len(c.prompt) + len(c.ids),
    }


async def _sse(chunks: Iterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield f"data: {json.dumps(chunk)}\n\n".encode()
    yield b"data: [DONE]\n\n"


def _error(
    status: int, message: str, kind: str = "invalid_request_error", headers: Any = None
) -> Response:
    body = {"error": {"message": message, "type": kind, "code": status}}
    return JSONResponse(body, status_code=status, headers=headers)

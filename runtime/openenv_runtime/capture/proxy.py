"""``CaptureProxy``: an OpenAI-compatible proxy that records each session's token ids.

An agent harness gets a session (``POST /sessions`` → ``session_id``, ``base_url``,
``api_key``) and talks to ``base_url`` with ``api_key`` as if it were the model server. The
proxy asks the upstream server for token ids and log-probabilities on every chat completion
(``return_token_ids``, ``logprobs``), forwards the answer (streamed or not) unchanged, and
records a ``TraceEntry`` per call, read back with ``GET /sessions/{id}/trace_entries``.
A call with a key that names no live session is refused with 401, never forwarded.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..llm_tokens import TOKEN_OPTIONS, MissingTokenIdsError, StreamTokens, read_tokens
from .entries import TraceEntry

_HOP_HEADERS = {"content-length", "transfer-encoding", "connection", "content-encoding"}


@dataclass
class _Session:
    id: str
    key_hash: str
    entries: list[TraceEntry] = field(default_factory=list)


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class CaptureProxy:
    """The proxy's ASGI app (``proxy.app``, or the instance itself).

    Args:
        upstream: the model server's base URL (``http://host:8000`` or ``.../v1``).
        upstream_api_key: sent upstream as ``Authorization: Bearer``; the sessions' own keys
            never leave the proxy.
        admin_token: when set, the ``/sessions`` routes need ``Authorization: Bearer
            <admin_token>``.
        public_url: the proxy's URL as harnesses reach it (default: the request's own).
        timeout: seconds allowed per upstream call.
    """

    def __init__(
        self,
        upstream: str,
        *,
        upstream_api_key: str | None = None,
        admin_token: str | None = None,
        public_url: str | None = None,
        timeout: float = 600.0,
    ) -> None:
        base = upstream.rstrip("/")
        self.upstream = base[: -len("/v1")] if base.endswith("/v1") else base
        self.upstream_api_key = upstream_api_key
        self.admin_token = admin_token
        self.public_url = public_url.rstrip("/") if public_url else None
        self.timeout = timeout
        self._sessions: dict[str, _Session] = {}
        self._by_key: dict[str, _Session] = {}
        self._client: aiohttp.ClientSession | None = None
        self.app = Starlette(
            routes=[
                Route("/sessions", self._create, methods=["POST"]),
                Route("/sessions/{sid}/trace_entries", self._entries, methods=["GET"]),
                Route("/sessions/{sid}", self._delete, methods=["DELETE"]),
                Route("/sessions/{sid}/v1/{path:path}", self._forward, methods=["GET", "POST"]),
                Route("/v1/{path:path}", self._forward, methods=["GET", "POST"]),
                Route("/health", self._health, methods=["GET"]),
            ],
            lifespan=self._lifespan,
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Close the upstream connections."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    @property
    def client(self) -> aiohttp.ClientSession:
        """The upstream connection pool (aiohttp: the lightest per-call cost measured here)."""
        if self._client is None or self._client.closed:
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=4)  # under uvicorn's 5 s
            timeout = aiohttp.ClientTimeout(total=self.timeout)
            self._client = aiohttp.ClientSession(connector=connector, timeout=timeout)
        return self._client

    # -- sessions (in-process API too) ----------------------------------------------------
    def create_session(self, root: str) -> dict[str, str]:
        """A new session: ``session_id``, ``base_url`` (``root`` + its path) and ``api_key``."""
        sid = secrets.token_hex(8)
        key = "oe-cap-" + secrets.token_urlsafe(32)
        session = _Session(sid, _hash(key))
        self._sessions[sid] = session
        self._by_key[session.key_hash] = session
        return {"session_id": sid, "base_url": f"{root}/sessions/{sid}/v1", "api_key": key}

    def trace_entries(self, session_id: str) -> list[TraceEntry]:
        """The session's recorded calls, in order (``KeyError`` when there is no such session)."""
        return list(self._sessions[session_id].entries)

    def delete_session(self, session_id: str) -> bool:
        session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        self._by_key.pop(session.key_hash, None)
        return True

    # -- routes ---------------------------------------------------------------------------
    def _admin_refused(self, request: Request) -> Response | None:
        if self.admin_token is None:
            return None
        given = request.headers.get("authorization", "")
        if hmac.compare_digest(given.encode(), f"Bearer {self.admin_token}".encode()):
            return None
        return _error(401, "the /sessions routes need the proxy's admin token")

    async def _health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "sessions": len(self._sessions)})

    async def _create(self, request: Request) -> Response:
        refused = self._admin_refused(request)
        if refused is not None:
            return refused
        root = self.public_url or str(request.base_url).rstrip("/")
        return JSONResponse(self.create_session(root), status_code=201)

    async def _entries(self, request: Request) -> Response:
        refused = self._admin_refused(request)
        if refused is not None:
            return refused
        session = self._sessions.get(request.path_params["sid"])
        if session is None:
            return _error(404, "no such session (deleted, or never created)")
        return JSONResponse([e.model_dump() for e in session.entries])

    async def _delete(self, request: Request) -> Response:
        refused = self._admin_refused(request)
        if refused is not None:
            return refused
        if not self.delete_session(request.path_params["sid"]):
            return _error(404, "no such session (deleted, or never created)")
        return Response(status_code=204)

    def _session_of(self, request: Request) -> _Session | None:
        header = request.headers.get("authorization", "")
        key = (
            header[7:]
            if header.lower().startswith("bearer ")
            else request.headers.get("x-api-key", "")
        )
        session = self._by_key.get(_hash(key)) if key else None
        sid = request.path_params.get("sid")
        if session is None or (sid is not None and sid != session.id):
            return None
        return session

    async def _forward(self, request: Request) -> Response:
        session = self._session_of(request)
        if session is None:
            return _error(401, "unknown or deleted session key: create one with POST /sessions")
        path = request.path_params["path"]
        headers = {"content-type": "application/json"}
        if self.upstream_api_key:
            headers["authorization"] = f"Bearer {self.upstream_api_key}"
        url = f"{self.upstream}/v1/{path}"
        raw = await request.body()
        if request.method != "POST" or path != "chat/completions":
            async with self.client.request(
                request.method, url, data=raw, headers=headers, params=request.query_params
            ) as upstream:
                return _relay(upstream, await upstream.read())
        try:
            body = json.loads(raw)
        except ValueError:
            return _error(400, "the body must be JSON")
        body = {**body, **TOKEN_OPTIONS}
        entry = TraceEntry.model_construct(
            session_id=session.id,
            turn=len(session.entries),
            timestamp=time.time(),
            model=body.get("model"),
            request={k: v for k, v in body.items() if k != "messages"},
            messages=list(body.get("messages") or []),
            completion={},
            finish_reason=None,
            prompt_token_ids=None,
            completion_token_ids=None,
            per_token_logps=None,
            stream=bool(body.get("stream")),
            latency_ms=0.0,
            error=None,
        )
        started = time.perf_counter()
        try:
            upstream = await self._post(url, json.dumps(body), headers)
        except (aiohttp.ClientError, TimeoutError) as error:
            return _error(502, f"the model server did not answer: {type(error).__name__}: {error}")
        if entry.stream and upstream.status == 200:
            return StreamingResponse(
                self._relay_stream(session, entry, upstream, started),
                media_type="text/event-stream",
            )
        try:
            content = await upstream.read()
        finally:
            upstream.release()
        entry.latency_ms = (time.perf_counter() - started) * 1000
        if upstream.status == 200:
            self._record(session, entry, json.loads(content))
        return _relay(upstream, content)

    async def _post(self, url: str, data: str, headers: dict[str, str]) -> aiohttp.ClientResponse:
        """POST upstream; once more when a pooled connection turned out closed (the server's
        keep-alive ended as it was reused: the request never reached it)."""
        try:
            return await self.client.post(url, data=data, headers=headers)
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
            return await self.client.post(url, data=data, headers=headers)

    def _record(self, session: _Session, entry: TraceEntry, answer: dict[str, Any]) -> None:
        choice = (answer.get("choices") or [{}])[0]
        entry.completion = dict(choice.get("message") or {})
        entry.finish_reason = choice.get("finish_reason")
        try:
            tokens = read_tokens(answer, f"at {self.upstream}")
        except MissingTokenIdsError as error:
            entry.error = str(error)
        else:
            entry.prompt_token_ids = tokens.prompt_token_ids
            entry.completion_token_ids = tokens.completion_token_ids
            entry.per_token_logps = tokens.logprobs
        session.entries.append(entry)

    async def _relay_stream(
        self,
        session: _Session,
        entry: TraceEntry,
        upstream: aiohttp.ClientResponse,
        started: float,
    ) -> AsyncIterator[bytes]:
        """The upstream's events, passed on as they come, gathered into ``entry`` at the end."""
        gathered = StreamTokens()
        try:
            async for line in upstream.content:
                yield line
                data = line.strip()
                if data.startswith(b"data: ") and data != b"data: [DONE]":
                    gathered.add(json.loads(data[6:]))
        finally:
            upstream.release()
        entry.latency_ms = (time.perf_counter() - started) * 1000
        entry.completion = gathered.message()
        entry.finish_reason = gathered.finish_reason
        try:
            tokens = gathered.tokens(f"at {self.upstream}")
        except MissingTokenIdsError as error:
            entry.error = str(error)
        else:
            entry.prompt_token_ids = tokens.prompt_token_ids
            entry.completion_token_ids = tokens.completion_token_ids
            entry.per_token_logps = tokens.logprobs
        session.entries.append(entry)


def _relay(upstream: aiohttp.ClientResponse, content: bytes) -> Response:
    headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_HEADERS}
    return Response(content, status_code=upstream.status, headers=headers)


def _error(status: int, message: str) -> Response:
    return JSONResponse(
        {"error": {"message": message, "type": "capture_proxy"}}, status_code=status
    )

"""``CaptureProxy``: an OpenAI-compatible proxy that records each session's token ids.

An agent harness gets a session (``POST /sessions`` → ``session_id``, ``base_url``,
``api_key``) and talks to ``base_url`` with ``api_key`` as if it were the model server. The
proxy asks the upstream server for token ids and log-probabilities on every chat completion
(``return_token_ids``, ``logprobs``), forwards the answer (streamed or not) unchanged, and
records a ``TraceEntry`` per call, read back with ``GET /sessions/{id}/trace_entries``.
A call with a key that names no live session is refused with 401, never forwarded; a body
over ``max_body_bytes`` with 413. Only the OpenAI-compatible routes in :data:`FORWARDED_ROUTES`
are forwarded, matched on the path decoded once; any other path (dot segments, encoded slashes
or backslashes included) gets 404 and never reaches the model server, which is called with the
proxy's own upstream key. A session's entries are read (and the session deleted) with its own
key, or the admin token when one is set; at most ``max_sessions`` sessions live at once.
``GET /sessions`` lists them (ids, calls, times; never a key), with the admin token when set.
Each forwarded call is logged on ``openenv_runtime.capture`` at INFO: session, route, status,
latency (never a key or a message); the lines of each half second go out as one record.

The forwarded calls are the hot path: served with ``server.protocol_for(proxy)`` (uvicorn's
``http=``), they are answered in the HTTP protocol itself, below ASGI (``server.py``); without
it, or when that protocol hands one on, a plain ASGI handler takes them, with the same checks
and recording (:meth:`CaptureProxy.admit`, :meth:`CaptureProxy.chat_body`,
:meth:`CaptureProxy.record`). The routes every session takes (its start, its read-back, its
end) are answered the same way both ways in, by :meth:`CaptureProxy.answer_session_route`. Both reach the model server over a small HTTP/1.1 client of
their own (``upstream.py``); each answer is kept as the bytes the server sent and turned into
a ``TraceEntry`` when the session's entries are read, so the answer goes back without being
parsed first.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import re
import secrets
import time
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..llm.completions import NotACompletionError, TokenArrays, decode_completion_json
from ..llm.samples import TraceEntry
from ..llm.tokens import TOKEN_OPTIONS, MissingTokenIdsError, StreamTokens, Tokens
from ..observability import tracing
from .upstream import Response as UpstreamResponse
from .upstream import Upstream, UpstreamError

# not relayed: hop-by-hop, the length (set again), and those uvicorn writes itself (no twins)
_HOP_HEADERS = {
    b"content-length",
    b"transfer-encoding",
    b"connection",
    b"keep-alive",
    b"date",
    b"server",
}
_QUERY = re.compile(rb"[^\x21-\x7e]")  # a query byte that cannot go on the request line
_CALL_SPAN = "openenv.capture.chat_completion"
_FORWARDED = re.compile(r"^(?:/sessions/(?P<sid>[^/]+))?/v1/(?P<path>.*)$")
FORWARDED_ROUTES: dict[str, frozenset[str]] = {
    "chat/completions": frozenset({"POST"}),
    "completions": frozenset({"POST"}),
    "models": frozenset({"GET"}),
}
"""The routes forwarded (under ``/v1/``) and their methods; every other path gets 404."""
_TRACE_ROUTE = re.compile(r"^/sessions/[^/]+/trace_entries$")
_SESSION_ROUTE = re.compile(r"^/sessions/[^/]+$")
_UNSAFE = re.compile(r"%|\\|(?:^|/)\.{1,2}(?:/|$)")  # left after one decoding: refused
Scope = dict[str, Any]
_LOG_EVERY = 0.5  # seconds: the forwarded calls' log lines go out together
logger = logging.getLogger("openenv_runtime.capture")


@dataclass
class _Call:
    """A recorded call (``raw``: the server's bytes); ``fields``: its ``TraceEntry``'s
    fields, filled when the session's entries are first read."""

    timestamp: float
    body: dict[str, Any]
    raw: bytes
    stream: bool
    latency_ms: float
    fields: dict[str, Any] | None = None


@dataclass
class _Session:
    id: str
    key_hash: bytes
    entries: list[_Call] = field(default_factory=list)
    created: float = field(default_factory=time.time)
    last_call: float | None = None


def _hash(key: str | bytes) -> bytes:
    return hashlib.sha256(key.encode() if isinstance(key, str) else key).digest()


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
        max_body_bytes: the largest request body forwarded (larger: 413).
        max_sessions: the most sessions held at once (one more: 429 until one is deleted).
        request_timeout: seconds a client has to send a whole request (head and body) from
            its first byte; a new connection's first request, from the connection's start
            (served with :func:`~openenv_runtime.capture.server.protocol_for`).
    """

    _upstream: Upstream  # set with ``upstream``

    def __init__(
        self,
        upstream: str,
        *,
        upstream_api_key: str | None = None,
        admin_token: str | None = None,
        public_url: str | None = None,
        timeout: float = 600.0,
        max_body_bytes: int = 32 * 1024 * 1024,
        max_sessions: int = 1024,
        request_timeout: float = 30.0,
    ) -> None:
        self.upstream = upstream
        self.upstream_api_key = upstream_api_key
        self.admin_token = admin_token
        self.public_url = public_url.rstrip("/") if public_url else None
        self.timeout = timeout
        self.max_body_bytes = max_body_bytes
        self.max_sessions = max_sessions
        self.request_timeout = request_timeout
        self._sessions: dict[str, _Session] = {}
        self._by_key: dict[bytes, _Session] = {}
        self._call_lines: list[str] = []
        self._log_timer: asyncio.TimerHandle | None = None
        # OpenTelemetry (observability/tracing.py): a span per chat completion, when on
        self.tracer = tracing.tracer("openenv-capture")
        self._routes = Starlette(
            routes=[
                Route("/sessions", self._session_route, methods=["POST"]),
                Route("/sessions", self._list, methods=["GET"]),
                Route("/sessions/{sid}/trace_entries", self._session_route, methods=["GET"]),
                Route("/sessions/{sid}", self._session_route, methods=["DELETE"]),
                Route("/health", self._health, methods=["GET"]),
            ],
            lifespan=self._lifespan,
        )
        self.app: Any = self  # one ASGI app: the forwarded calls here, the rest to _routes

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            path = _normalised(scope)
            route = forwarded_route(path) if path is not None else None
            if route is not None:
                await self._forward(scope, receive, send, *route)
                return
            if path is None:
                await _error(404, "no such route")(scope, receive, send)
                return
            method = scope["method"]
            if session_route(method, path):  # the router's layers skipped
                root = str(Request(scope).base_url).rstrip("/") if method == "POST" else ""
                status, body = self.answer_session_route(method, path, dict(scope["headers"]), root)
                await _send_json(send, status, body)
                return
        await self._routes(scope, receive, send)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await self.aclose()

    @property
    def upstream(self) -> str:
        """The model server's base URL (without ``/v1``); may be set after construction."""
        return self._upstream.base

    @upstream.setter
    def upstream(self, url: str) -> None:
        base = url.rstrip("/")
        base = base[: -len("/v1")] if base.endswith("/v1") else base
        if hasattr(self, "_upstream"):
            self._upstream.close()
        self._upstream = Upstream(base)

    async def aclose(self) -> None:
        """Close the upstream connections; log the calls not logged yet."""
        self._flush_log()
        self._upstream.close()

    # -- sessions (in-process API too) ----------------------------------------------------
    def create_session(self, root: str) -> dict[str, str]:
        """A new session: ``session_id``, ``base_url`` (``root`` + its path) and ``api_key``.

        Raises ``SessionLimitError`` when ``max_sessions`` are held already.
        """
        if len(self._sessions) >= self.max_sessions:
            raise SessionLimitError(
                f"the proxy holds its limit of {self.max_sessions} sessions: delete finished "
                "ones (DELETE /sessions/ID) or raise the limit (--max-sessions)"
            )
        sid = secrets.token_hex(8)
        key = "oe-cap-" + secrets.token_urlsafe(32)
        session = _Session(sid, _hash(key))
        self._sessions[sid] = session
        self._by_key[session.key_hash] = session
        return {"session_id": sid, "base_url": f"{root}/sessions/{sid}/v1", "api_key": key}

    def trace_entries(self, session_id: str) -> list[TraceEntry]:
        """The session's recorded calls, in order (``KeyError`` when there is no such session)."""
        recorded = orjson.loads(orjson.dumps(self._recorded(session_id)))  # as a client reads
        return [TraceEntry.model_construct(**e) for e in recorded]

    def _recorded(self, session_id: str) -> list[dict[str, Any]]:
        """The session's entries as ``TraceEntry`` fields, ready for ``orjson.dumps`` (token
        ids may be JSON fragments; ``KeyError``: no such session)."""
        session = self._sessions[session_id]
        recorded = []
        for turn, call in enumerate(session.entries):
            if call.fields is None:
                call.fields = self._parse(session.id, turn, call)
                call.raw = b""  # parsed: the bytes are no longer needed
            recorded.append(call.fields)
        return recorded

    def sessions(self) -> list[dict[str, Any]]:
        """Every live session: ``session_id``, ``calls`` recorded, ``created`` and
        ``last_call`` (Unix times; None before the first call). Never a key."""
        return [
            {
                "session_id": s.id,
                "calls": len(s.entries),
                "created": s.created,
                "last_call": s.last_call,
            }
            for s in self._sessions.values()
        ]

    def delete_session(self, session_id: str) -> bool:
        session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        self._by_key.pop(session.key_hash, None)
        return True

    # -- routes ---------------------------------------------------------------------------
    def answer_session_route(
        self, method: str, path: str, headers: dict[bytes, bytes], root: str
    ) -> tuple[int, bytes]:
        """The answer (status, JSON body; empty for 204) to a route every session takes
        (:func:`session_route`): its start, its read-back, its end. ``headers``: the
        request's, names in lower case; ``root``: the proxy's URL as the request reached it."""
        if method == "POST":
            if not self._admin_allowed(headers):
                return _ADMIN_ONLY
            try:
                made = self.create_session(self.public_url or root)
            except SessionLimitError as error:
                return 429, error_body(str(error))
            return 201, orjson.dumps(made)
        sid = path.split("/")[2]
        if not self._owner_allowed(headers, sid):
            who = "its api_key" + (" or the proxy's admin token" if self.admin_token else "")
            return 401, error_body(f"a session's routes need {who} (Authorization: Bearer ...)")
        if method == "GET":
            if sid not in self._sessions:
                return _NO_SESSION
            return 200, orjson.dumps(self._recorded(sid))
        if not self.delete_session(sid):
            return _NO_SESSION
        return 204, b""

    def _admin_allowed(self, headers: dict[bytes, bytes]) -> bool:
        if self.admin_token is None:
            return True
        given = headers.get(b"authorization", b"")
        return hmac.compare_digest(given, f"Bearer {self.admin_token}".encode())

    def _owner_allowed(self, headers: dict[bytes, bytes], sid: str) -> bool:
        """The request carries the admin token (when set) or session ``sid``'s key."""
        if self.admin_token is not None and self._admin_allowed(headers):
            return True
        return self._session_of(headers, sid) is not None

    async def _health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "sessions": len(self._sessions)})

    async def _session_route(self, request: Request) -> Response:
        root = str(request.base_url).rstrip("/")
        status, body = self.answer_session_route(
            request.method, request.url.path, dict(request.scope["headers"]), root
        )
        if status == 204:
            return Response(status_code=204)
        return Response(body, status_code=status, media_type="application/json")

    async def _list(self, request: Request) -> Response:
        if not self._admin_allowed(dict(request.scope["headers"])):
            return Response(_ADMIN_ONLY[1], status_code=401, media_type="application/json")
        return Response(orjson.dumps(self.sessions()), media_type="application/json")

    # -- the forwarded calls: checks and recording, shared by both ways in -----------------
    @property
    def model_server(self) -> Upstream:
        """The client of the model server (its connections)."""
        return self._upstream

    def _session_of(self, headers: dict[bytes, bytes], sid: str | None) -> _Session | None:
        header = headers.get(b"authorization", b"")
        key = header[7:] if header[:7].lower() == b"bearer " else headers.get(b"x-api-key", b"")
        session = self._by_key.get(_hash(key)) if key else None
        if session is None or (sid is not None and sid != session.id):
            return None
        return session

    def admit(
        self, method: str, sid: str | None, path: str, headers: dict[bytes, bytes], query: bytes
    ) -> tuple[_Session, str]:
        """A forwarded call's session and upstream target (path and query), or ``Refused``:
        404 for a route not forwarded, 401 without a live session's key, 405 for a method the
        route does not take, 413 for a declared length over ``max_body_bytes``, 400 for a
        query that cannot go on the request line."""
        methods = FORWARDED_ROUTES.get(path)
        if methods is None:
            raise Refused(404, f"/v1/{path} is not forwarded")
        session = self._session_of(headers, sid)
        if session is None:
            raise Refused(401, "unknown or deleted session key: create one with POST /sessions")
        if method not in methods:
            raise Refused(405, f"{method} /v1/{path} is not forwarded")
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise self.too_large()
        target = f"/v1/{path}"
        if query:
            if _QUERY.search(query):
                raise Refused(400, "the query string must be URL-encoded")
            target += "?" + query.decode("latin-1")
        return session, target

    def too_large(self) -> Refused:
        """The refusal of a body over ``max_body_bytes``."""
        return Refused(
            413, f"the request body is over the proxy's limit of {self.max_body_bytes} bytes"
        )

    def upstream_headers(self) -> dict[str, str]:
        """The headers of a call to the model server (its key: the proxy's own, when set)."""
        if self.upstream_api_key:
            return {
                "content-type": "application/json",
                "authorization": f"Bearer {self.upstream_api_key}",
            }
        return {"content-type": "application/json"}

    @staticmethod
    def chat_body(raw: bytes) -> tuple[dict[str, Any], bytes, bool]:
        """A chat completion's body with the token options added: the object, its bytes, and
        whether the answer streams (``Refused`` 400 when it is not a JSON object)."""
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            raise Refused(400, "the body must be a JSON object")
        body.update(TOKEN_OPTIONS)
        return body, orjson.dumps(body), bool(body.get("stream"))

    def record(
        self,
        session: _Session,
        status: int,
        timestamp: float,
        body: dict[str, Any],
        content: bytes,
        stream: bool,
        latency_ms: float,
    ) -> None:
        """Record a chat completion the model server answered (kept when ``status`` is 200),
        and log it."""
        if status == 200:
            session.entries.append(_Call(timestamp, body, content, stream, latency_ms))
        session.last_call = timestamp
        if logger.isEnabledFor(logging.INFO):
            self._log_call(
                f"session {session.id}: POST /v1/chat/completions -> {status} in "
                f"{latency_ms:.0f} ms{', streamed' if stream else ''} "
                f"({len(session.entries)} calls recorded)"
            )

    # -- the forwarded calls through ASGI (a pipelined request, tracing on, or a server
    # without the proxy's protocol: ``server.py`` answers the others below ASGI) ------------
    async def _forward(
        self, scope: Scope, receive: Any, send: Any, sid: str | None, path: str
    ) -> None:
        headers = dict(scope["headers"])
        method = scope["method"]
        try:
            session, target = self.admit(
                method, sid, path, headers, scope.get("query_string") or b""
            )
            raw = await _body(receive, self.max_body_bytes)
            if raw is None:
                raise self.too_large()
            if method != "POST" or path != "chat/completions":
                await self._relay(send, method, target, raw)
                return
            body, data, stream = self.chat_body(raw)
        except Refused as refused:
            await _send_error(send, refused.status, refused.message)
            return
        upstream_headers = self.upstream_headers()
        if self.tracer is None:
            await self._complete(send, session, target, body, data, stream, upstream_headers)
            return
        attributes = {"openenv.capture.stream": stream}
        with tracing.request_span(self.tracer, _CALL_SPAN, scope["headers"], attributes) as span:
            if span is not None:  # the model server, if it traces, joins the same trace
                upstream_headers.update(tracing.headers_for())
            status = await self._complete(
                send, session, target, body, data, stream, upstream_headers
            )
            if span is not None:
                span.set_attribute("http.response.status_code", status)
                if status != 200:
                    tracing.failed(span, str(status))

    async def _relay(self, send: Any, method: str, target: str, raw: bytes) -> None:
        """Another forwarded route (the models, a plain completion): relayed, not recorded."""
        try:
            upstream = await self._upstream.request(
                method, target, raw, self.upstream_headers(), self.timeout
            )
            try:
                content = await upstream.read()
            finally:
                upstream.release()
        except (UpstreamError, TimeoutError) as error:
            raise Refused(502, unreachable(error)) from None
        await send(_start(upstream, len(content)))
        await send({"type": "http.response.body", "body": content})

    async def _complete(
        self,
        send: Any,
        session: _Session,
        target: str,
        body: dict[str, Any],
        data: bytes,
        stream: bool,
        upstream_headers: dict[str, str],
    ) -> int:
        """Forward one chat completion and record it; the status answered."""
        timestamp, started = time.time(), time.perf_counter()
        try:
            upstream = await self._upstream.request(
                "POST", target, data, upstream_headers, self.timeout
            )
            if not stream or upstream.status != 200:
                try:
                    content = await upstream.read()
                finally:
                    upstream.release()
        except (UpstreamError, TimeoutError) as error:
            await _send_error(send, 502, unreachable(error))
            return 502
        if stream and upstream.status == 200:
            try:
                await send(_start(upstream, None))
                chunks = []
                async for chunk in upstream.chunks():
                    chunks.append(chunk)
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                content = b"".join(chunks)
            finally:
                upstream.release()
        else:
            await send(_start(upstream, len(content)))
        latency = (time.perf_counter() - started) * 1000
        # recorded before the answer ends: a reader sees it at once
        self.record(session, upstream.status, timestamp, body, content, stream, latency)
        await send({"type": "http.response.body", "body": b"" if stream else content})
        return upstream.status

    def _log_call(self, line: str) -> None:
        """Log a forwarded call: the lines gathered over ``_LOG_EVERY`` go out as one record
        (a record per call cost more CPU than the rest of the call, measured)."""
        self._call_lines.append(line)
        if self._log_timer is None:
            self._log_timer = asyncio.get_running_loop().call_later(_LOG_EVERY, self._flush_log)

    def _flush_log(self) -> None:
        if self._log_timer is not None:
            self._log_timer.cancel()
            self._log_timer = None
        lines, self._call_lines = self._call_lines, []
        if lines:
            logger.info("\n".join(lines))

    # -- recording ------------------------------------------------------------------------
    def _parse(self, session_id: str, turn: int, call: _Call) -> dict[str, Any]:
        """A recorded call's ``TraceEntry`` fields, from the request and the server's bytes."""
        body = call.body
        entry: dict[str, Any] = {
            "session_id": session_id,
            "turn": turn,
            "timestamp": call.timestamp,
            "model": body.get("model"),
            "request": {k: v for k, v in body.items() if k != "messages"},
            "messages": list(body.get("messages") or []),
            "completion": {},
            "finish_reason": None,
            "prompt_token_ids": None,
            "completion_token_ids": None,
            "per_token_logps": None,
            "stream": call.stream,
            "latency_ms": call.latency_ms,
            "error": None,
        }
        where = f"at {self.upstream}"
        tokens: Tokens | TokenArrays
        try:
            if call.stream:
                gathered = StreamTokens()
                for line in call.raw.splitlines():
                    data = line.strip()
                    if data.startswith(b"data: ") and data != b"data: [DONE]":
                        gathered.add(orjson.loads(data[6:]))
                entry["completion"] = gathered.message()
                entry["finish_reason"] = gathered.finish_reason
                tokens = gathered.tokens(where)
            else:
                message, finish, read = decode_completion_json(call.raw, where)
                entry["completion"], entry["finish_reason"] = message, finish
                if isinstance(read, MissingTokenIdsError):
                    raise read
                tokens = read
        except (
            MissingTokenIdsError,
            orjson.JSONDecodeError,
            NotACompletionError,
            AttributeError,
        ) as error:
            entry["error"] = str(error) or type(error).__name__
        else:
            if isinstance(tokens, TokenArrays):  # the ids' JSON, written out as it is
                entry["prompt_token_ids"] = orjson.Fragment(tokens.prompt_token_ids)
                entry["completion_token_ids"] = orjson.Fragment(tokens.completion_token_ids)
            else:
                entry["prompt_token_ids"] = tokens.prompt_token_ids
                entry["completion_token_ids"] = tokens.completion_token_ids
            entry["per_token_logps"] = tokens.logprobs
        return entry


class Refused(Exception):
    """A forwarded call the proxy answers itself with ``status`` and ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class SessionLimitError(RuntimeError):
    """The proxy holds ``max_sessions`` sessions already: delete finished ones first."""


def session_route(method: str, path: str) -> bool:
    """Whether ``method path`` (decoded) is a route every session takes: ``POST /sessions``,
    ``GET /sessions/ID/trace_entries``, ``DELETE /sessions/ID``."""
    if method == "POST":
        return path == "/sessions"
    if method == "GET":
        return _TRACE_ROUTE.match(path) is not None
    return method == "DELETE" and _SESSION_ROUTE.match(path) is not None


def forwarded_route(path: str) -> tuple[str | None, str] | None:
    """``(session id or None, route under /v1/)`` when ``path`` (decoded) has the shape of a
    forwarded call (``/v1/...`` or ``/sessions/ID/v1/...``); None otherwise."""
    match = _FORWARDED.match(path)
    return None if match is None else (match["sid"], match["path"])


def needs_decoding(raw: bytes) -> bool:
    """Whether a raw path holds a percent sign, a backslash or a dot segment's start (``/.``).

    ``find``, not ``in``: ``needle in raw`` first tries a bytes needle as an int, and the
    TypeError it makes and clears cost ~2,000 instructions each, measured with callgrind."""
    return raw.find(b"%") >= 0 or raw.find(b"\\") >= 0 or raw.find(b"/.") >= 0


def _normalised(scope: Scope) -> str | None:
    """The request's path decoded once, or None when decoding leaves a dot segment, a
    backslash or a percent sign (a slash or dot encoded twice), or an encoded slash was in it."""
    raw: bytes = scope.get("raw_path") or scope["path"].encode()
    if not needs_decoding(raw):
        return raw.decode("latin-1")  # the usual case: nothing to decode
    if re.search(rb"%(?:2f|5c)", raw, re.IGNORECASE):
        return None
    path = urllib.parse.unquote(raw.decode("latin-1"))
    return None if _UNSAFE.search(path) else path


async def _body(receive: Any, limit: int) -> bytes | None:
    """The request's body, or None when it is over ``limit`` bytes (stops reading there)."""
    parts, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
        if not message.get("more_body"):
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)


def relayed(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The model server's headers the proxy passes on (not the hop-by-hop ones, the length,
    nor those the proxy's server writes itself)."""
    kept = []
    for name, value in headers:
        dropped = _DROPPED.get(name)
        if dropped is None:  # a name not seen yet in this spelling (a model server uses few)
            dropped = name.lower() in _HOP_HEADERS
            if len(_DROPPED) < 1024:
                _DROPPED[name] = dropped
        if not dropped:
            kept.append((name, value))
    return kept


_DROPPED: dict[bytes, bool] = {}  # header name, as spelt -> not relayed


def _start(upstream: UpstreamResponse, length: int | None) -> dict[str, Any]:
    headers = relayed(upstream.headers)
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    return {"type": "http.response.start", "status": upstream.status, "headers": headers}


def unreachable(error: BaseException) -> str:
    """The message of a 502: the model server did not answer."""
    return f"the model server did not answer: {type(error).__name__}: {error}"


def error_body(message: str) -> bytes:
    """The JSON body of an error the proxy answers itself."""
    return orjson.dumps({"error": {"message": message, "type": "capture_proxy"}})


_ADMIN_ONLY = (401, error_body("the /sessions routes need the proxy's admin token"))
_NO_SESSION = (404, error_body("no such session (deleted, or never created)"))


def _error(status: int, message: str) -> Response:
    return Response(error_body(message), status_code=status, media_type="application/json")


async def _send_error(send: Any, status: int, message: str) -> None:
    await _send_json(send, status, error_body(message))


async def _send_json(send: Any, status: int, body: bytes) -> None:
    headers = []  # a 204 carries neither
    if status != 204:
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

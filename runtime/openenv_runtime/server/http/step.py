"""``POST /step`` of an HTTP session: one answer, taken by a raw ASGI handler or by the route.

The route (``http_api.py``) declares ``POST /step`` (its OpenAPI entry, and the framework's
answers to a request it cannot parse); :meth:`HttpStep.answer` answers it, and the step itself
is decided and run by the server's one step function (``stepping.py``). The server's app
(``app.py``) sends a ``POST /step`` straight to :class:`HttpStep`, which skips the framework's
machinery for a plain JSON request: the body is parsed once (pydantic-core), the action
validated once, and the reply encoded once from the observation's own serializer
(:func:`~openenv_runtime.protocol.http_step_body`), where through the framework a request
model, dependency injection, a response model and ``json.dumps`` took most of the request's
cost. Every check stays: the body limit and the token (the same middlewares wrap this
handler), the session lookup and its one-request-at-a-time lock, the field-count bound,
action validation, the step timeout and error reporting. Anything this handler does not
expect — a content type other than JSON, a body that is not an object with an ``action``
object, a ``session_id`` that is not a string — is handed to the framework (and so to the
route) with the body replayed, so its answers (and error formats) are unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

from pydantic_core import from_json
from starlette.responses import JSONResponse

from openenv_runtime.models import Observation
from openenv_runtime.protocol import ErrorCode, http_step_body
from openenv_runtime.server.guards.limits import BodyTooLarge
from openenv_runtime.server.http.routes import error_response, lookup_session, run_call
from openenv_runtime.server.metrics import (
    HTTP_DONE,
    HTTP_ERROR,
    HTTP_INVALID,
    HTTP_OK,
    HTTP_TIMEOUT,
    Tally,
)
from openenv_runtime.server.sessions.registry import SessionManager
from openenv_runtime.server.stepping import ActionRefused, Stepper

ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]

_JSON_HEADERS = (b"content-type", b"application/json")


def _json_content(scope: dict[str, Any]) -> bool:
    """No content type, or application/json / application/*+json (what the route parses)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            kind: bytes = value.split(b";", 1)[0].strip().lower()
            return kind == b"application/json" or (
                kind.startswith(b"application/") and kind.endswith(b"+json")
            )
    return True


def _session_id(scope: Mapping[str, Any], given: Any) -> str | None:
    """The body's ``session_id``, else the query parameter (last one wins), else the header."""
    if given:
        return str(given)
    query = scope.get("query_string", b"")
    if query:
        found: str | None = None
        for key, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
            if key == "session_id":
                found = value
        if found:
            return found
    for name, value in scope.get("headers", ()):
        if name == b"x-session-id":
            header: bytes = value
            return header.decode("latin-1")
    return None


class HttpStep:
    """The ASGI handler of ``POST /step``; ``fallback`` is the framework app. Steps count in
    ``tally`` (``None``: metrics off, not counted)."""

    def __init__(
        self,
        manager: SessionManager,
        validate_action: Callable[[Any], Any],
        max_action_fields: int,
        fallback: ASGIApp,
        tally: Tally | None,
    ) -> None:
        self.manager = manager
        self.steps = Stepper(
            manager.runner,
            validate_action,
            max_action_fields,
            tally,
            (HTTP_OK, HTTP_DONE, HTTP_INVALID, HTTP_ERROR, HTTP_TIMEOUT),
        )
        self.fallback = fallback

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        chunks: list[bytes] = []
        try:
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the client went away
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    break
        except BodyTooLarge as exc:
            await JSONResponse({"detail": exc.detail}, status_code=413)(scope, receive, send)
            return
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        request = self._parse(scope, body)
        if request is None:
            await self.fallback(scope, _replay(body, receive), send)
            return
        data, given = request
        response = await self.answer(scope, data, given)
        if isinstance(response, bytes):
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [_JSON_HEADERS, (b"content-length", str(len(response)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": response})
        else:
            await response(scope, receive, send)

    def _parse(self, scope: dict[str, Any], body: bytes) -> tuple[dict[str, Any], Any] | None:
        if not _json_content(scope):
            return None
        try:
            request = from_json(body)
        except ValueError:
            return None
        if type(request) is not dict:
            return None
        data = request.get("action")
        given = request.get("session_id")
        if type(data) is not dict or not (given is None or type(given) is str):
            return None
        return data, given

    async def answer(self, scope: Mapping[str, Any], data: dict[str, Any], given: Any) -> Any:
        """The reply to a step of the session named by ``given`` (the body's ``session_id``)
        or by the request (``scope``): the JSON body (``bytes``), or the error response."""
        found = lookup_session(self.manager, _session_id(scope, given))
        if isinstance(found, JSONResponse):
            return found
        session = found
        steps = self.steps
        try:
            action = steps.action(data)
        except ActionRefused as refused:
            return error_response(422, ErrorCode.VALIDATION_ERROR, refused.message, **refused.extra)

        async def call() -> bytes:
            session.stepped = True  # a used session: the unused-session limit no longer applies
            obs = steps.run(session, action)
            if not isinstance(obs, Observation):
                obs = await obs
            return http_step_body(obs, session.id)

        sent = None
        if self.manager.tracer is not None:
            for name, value in scope.get("headers", ()):
                if name == b"traceparent":
                    sent = value.decode("latin-1")
        return await run_call(self.manager, session, call, "step", sent)


def _replay(body: bytes, receive: Any) -> Callable[[], Awaitable[dict[str, Any]]]:
    """A ``receive`` that hands over ``body`` once, then whatever the connection says."""
    sent = False

    async def replayed() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        message: dict[str, Any] = await receive()
        return message

    return replayed

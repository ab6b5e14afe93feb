"""Bounds on what one client can make the server hold or do: body size, error size, sessions.

Large WebSocket messages are refused by the protocol layer (uvicorn's ``ws_max_size``,
close 1009) before they are buffered; HTTP bodies are counted here as they arrive.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException

from openenv_runtime.protocol import encode
from openenv_runtime.server.guards.auth import presented_token

MAX_REPORTED_ERRORS = 20
"""Validation errors quoted in one reply; the rest are only counted."""
EXTRA_FIELDS_ALLOWED = 64
"""Keys beyond an action's own fields that are still validated (and reported one by one)."""
MAX_NAME_CHARS = 200
"""Characters of a field's path or an error's text quoted in an error message."""


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a body passes the limit; FastAPI renders it as 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            413,
            f"Request body exceeds {limit} bytes; send less, or raise OPENENV_MAX_MESSAGE_BYTES "
            "on the server.",
        )


class BodyLimitMiddleware:
    """Pure ASGI middleware: HTTP bodies over ``max_bytes`` get 413 before they are held in memory.

    A declared ``Content-Length`` over the limit is refused before a byte is read; a chunked
    body is counted as it arrives and refused as soon as it passes the limit.
    """

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.max_bytes:
                    await self._refuse(send)
                    return
        received = 0
        limit = self.max_bytes

        async def counted() -> Any:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, counted, send)

    async def _refuse(self, send: Any) -> None:
        body = encode(
            {
                "detail": f"Request body exceeds {self.max_bytes} bytes; send less, or raise "
                "OPENENV_MAX_MESSAGE_BYTES on the server.",
                "code": "VALIDATION_ERROR",
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def validation_errors(exc: ValidationError) -> tuple[list[dict[str, Any]], int]:
    """The first :data:`MAX_REPORTED_ERRORS` errors of ``exc`` (without inputs) and their total."""
    total = exc.error_count()
    shown = [
        {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False, include_context=False, include_input=False)[
            :MAX_REPORTED_ERRORS
        ]
    ]
    return shown, total


def invalid_action_text(errors: list[dict[str, Any]], total: int) -> str:
    """ "Invalid action: message: Field required (and 1 more error)": the first wrong field by name."""
    if not errors:
        return "Invalid action"
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"])[:MAX_NAME_CHARS] or "the action"
    text = f"Invalid action: {where}: {str(first['msg'])[:MAX_NAME_CHARS]}"
    if total > 1:
        text += f" (and {total - 1} more error{'s' if total > 2 else ''})"
    return text


def too_many_fields(data: Any, limit: int) -> str | None:
    """A message when ``data`` has more keys than any valid action could (checked before validating)."""
    if isinstance(data, dict) and len(data) > limit:
        return (
            f"The action has {len(data)} fields; an action of this environment has at most "
            f"{limit}. Send only the action's own fields."
        )
    return None


def client_identity(scope: Mapping[str, Any], auth_required: bool) -> str:
    """Who a connection counts as for per-client caps: its token with auth on, else its address.

    The address is the one uvicorn resolved, which honours ``X-Forwarded-For`` only from
    ``--forwarded-allow-ips``. A token is hashed, so it never sits in server memory twice.
    """
    if auth_required:
        token = presented_token(scope)
        if token is not None:
            return "token:" + hashlib.sha256(token).hexdigest()[:16]
    client = scope.get("client")
    return "addr:" + (str(client[0]) if client else "unknown")

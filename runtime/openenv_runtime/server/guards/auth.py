"""Optional bearer-token protection of every route but an exact list of public ones.

The token travels in a header, never in a URL (URLs end up in access logs and browser
history):

* HTTP and WebSocket clients that can set headers send ``Authorization: Bearer <token>``;
* browsers, which cannot set headers on a WebSocket, offer the subprotocols
  ``["openenv", "openenv.bearer.<base64url(token), unpadded>"]``; the server selects
  ``openenv`` (see :func:`selected_subprotocol`), so the token is never echoed back.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from openenv_runtime.protocol import CLOSE_POLICY_VIOLATION, encode

SUBPROTOCOL = "openenv"
BEARER_SUBPROTOCOL_PREFIX = "openenv.bearer."

# Reachable without a token: the liveness and readiness probes and the page's redirects. The page's own
# files are added by name (see public_paths), never by prefix: a user route such as
# /healthz-evil, /web-admin or /web/admin still needs the token.
PUBLIC_PATHS = frozenset({"/", "/health", "/ready", "/web", "/web/"})


def public_paths(static_dir: Path | None) -> frozenset[str]:
    """:data:`PUBLIC_PATHS` plus ``/web/<file>`` for each file of the static page."""
    paths = set(PUBLIC_PATHS)
    if static_dir is not None and static_dir.is_dir():
        for file in static_dir.rglob("*"):
            if file.is_file():
                paths.add("/web/" + file.relative_to(static_dir).as_posix())
    return frozenset(paths)


def offered_subprotocols(scope: Mapping[str, Any]) -> list[str]:
    """The subprotocols a WebSocket client offered (ASGI puts them in ``scope``)."""
    offered = scope.get("subprotocols")
    if offered is None:  # not every server fills it in: read the header
        offered = [
            part.strip()
            for name, value in scope.get("headers", ())
            if name == b"sec-websocket-protocol"
            for part in value.decode("latin-1").split(",")
        ]
    return [p for p in offered if p]


def selected_subprotocol(scope: Mapping[str, Any]) -> str | None:
    """``openenv`` when the client offered it (a browser then requires it back), else None."""
    return SUBPROTOCOL if SUBPROTOCOL in offered_subprotocols(scope) else None


def bearer_subprotocol(token: str) -> str:
    """The subprotocol that carries ``token`` (what the web page offers)."""
    encoded = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    return BEARER_SUBPROTOCOL_PREFIX + encoded


def _subprotocol_tokens(offered: Iterable[str]) -> Iterable[bytes]:
    for entry in offered:
        if entry.startswith(BEARER_SUBPROTOCOL_PREFIX):
            encoded = entry[len(BEARER_SUBPROTOCOL_PREFIX) :]
            try:
                yield base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
            except (binascii.Error, ValueError):
                continue


def presented_token(scope: Mapping[str, Any]) -> bytes | None:
    """The token a request carries (header first, then a WebSocket subprotocol), if any."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            if scheme.lower() == b"bearer":
                return bytes(token.strip())
    if scope["type"] == "websocket":
        for token in _subprotocol_tokens(offered_subprotocols(scope)):
            return token
    return None


class BearerAuthMiddleware:
    """Pure ASGI middleware: checks the token once per connection.

    A refused WebSocket is closed before the handshake completes (HTTP 403): no
    environment is created. A refused HTTP request gets 401 with ``WWW-Authenticate``.
    """

    def __init__(self, app: Any, api_key: str, public: frozenset[str] = PUBLIC_PATHS) -> None:
        self.app = app
        self._expected = api_key.encode()
        self._public = public

    def _authorized(self, scope: Mapping[str, Any]) -> bool:
        token = presented_token(scope)
        return token is not None and hmac.compare_digest(token, self._expected)

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and scope.get("path", "") in self._public:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            await send(
                {
                    "type": "websocket.close",
                    "code": CLOSE_POLICY_VIOLATION,
                    "reason": "unauthorized",
                }
            )
            return
        body = encode(
            {
                "detail": "Missing or invalid token: send the header "
                "`Authorization: Bearer <OPENENV_API_KEY>`."
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

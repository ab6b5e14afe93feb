"""Optional bearer-token protection of every route but ``/health``."""

from __future__ import annotations

import hmac
from typing import Any
from urllib.parse import parse_qs

from ..protocol import CLOSE_POLICY_VIOLATION, encode

# Routes reachable without a token: the liveness probe, and the static web page (it holds no
# data and asks the visitor for the token before it talks to the server).
PUBLIC_PREFIXES = ("/health", "/ready", "/web")


class BearerAuthMiddleware:
    """Pure ASGI middleware: checks ``Authorization: Bearer <key>`` once per connection.

    Browsers cannot set headers on a WebSocket, so ``/ws`` also accepts ``?access_token=``.
    A refused WebSocket is closed before the handshake completes: no environment is created.
    """

    def __init__(self, app: Any, api_key: str) -> None:
        self.app = app
        self._expected = api_key.encode()

    def _authorized(self, scope: dict[str, Any]) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, token = value.partition(b" ")
                if scheme.lower() == b"bearer" and hmac.compare_digest(
                    token.strip(), self._expected
                ):
                    return True
        if scope["type"] == "websocket" and scope.get("query_string"):
            tokens = parse_qs(scope["query_string"].decode("latin-1")).get("access_token", [])
            return any(hmac.compare_digest(t.encode(), self._expected) for t in tokens)
        return False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or self._authorized(scope):
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == "/" or path.startswith(PUBLIC_PREFIXES)):
            return await self.app(scope, receive, send)
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
                "detail": "Missing or invalid token: send the header `Authorization: Bearer <OPENENV_API_KEY>`."
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

"""The interactive web page at ``/web``: static files, no build step, no outside requests.

The page talks to the server only through ``/schema``, ``/metadata``, ``/health`` and its
own ``/ws`` session, like any other client: it counts against capacity, is isolated from
every other session, and needs no control route of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import Scope

STATIC_DIR = Path(__file__).parent / "static"

# Nothing but this server: scripts, styles and images from the page itself, fetch and
# WebSocket to the same origin only ('self' covers ws:/wss: to this host in every current
# browser; a bare `ws:` would allow any host). No frame-ancestors: Hugging Face shows Spaces
# in an iframe.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; object-src 'none'"
)

_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # revalidate every time (a cheap 304): a new runtime version is picked up at once
    "Cache-Control": "no-cache",
}


class _WebFiles(StaticFiles):
    """StaticFiles with the page's security and caching headers."""

    async def get_response(self, path: str, scope: Scope) -> Any:
        response = await super().get_response(path, scope)
        for name, value in _HEADERS.items():
            response.headers.setdefault(name, value)
        return response


def mount_web(app: FastAPI) -> None:
    """Serve the page at ``/web/`` and redirect ``/`` and ``/web`` there.

    The redirects are relative (``web/``), so they stay right behind a proxy that serves
    the app under a path prefix.
    """

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse(url="web/")

    @app.get("/web", include_in_schema=False)
    async def web_slash() -> RedirectResponse:
        return RedirectResponse(url="web/")

    app.mount("/web/", _WebFiles(directory=STATIC_DIR, html=True), name="web")

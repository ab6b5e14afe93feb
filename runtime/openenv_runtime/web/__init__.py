"""The interactive web page at ``/web``: static files, no build step, no outside requests.

The page talks to the server only through ``/schema``, ``/metadata``, ``/health`` and its
own ``/ws`` session, like any other client.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).parent / "static"


def mount_web(app: FastAPI) -> None:
    """Serve the page at ``/web/`` and redirect ``/`` there."""

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse(url="/web/")

    @app.get("/web", include_in_schema=False)
    async def web_slash() -> RedirectResponse:
        return RedirectResponse(url="/web/")

    app.mount("/web/", StaticFiles(directory=STATIC_DIR, html=True), name="web")

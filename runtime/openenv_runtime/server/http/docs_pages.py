"""``/docs`` (Swagger UI) and ``/redoc``: FastAPI's pages, with the title escaped and a CSP.

FastAPI writes the app's title into these pages' ``<title>`` as is, and the title carries
the environment's name, which a pushed project chooses: ``</title><script>...`` ran in the
page's origin. Here the title is HTML-escaped and each page is sent with a Content Security
Policy that lets scripts run only from the page's own nonce and the CDN the pages load from.
"""

from __future__ import annotations

import html
import secrets

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse

CDN = "https://cdn.jsdelivr.net"


def policy(nonce: str) -> str:
    """The CSP of a docs page whose inline scripts carry ``nonce``."""
    return (
        f"default-src 'none'; script-src 'nonce-{nonce}' {CDN}; "
        f"style-src 'unsafe-inline' {CDN} https://fonts.googleapis.com; "
        "font-src https://fonts.gstatic.com; img-src 'self' data: https:; "
        "connect-src 'self'; worker-src blob:; base-uri 'none'; form-action 'none'; "
        "object-src 'none'; frame-ancestors 'self'"
    )


def _secured(page: HTMLResponse) -> HTMLResponse:
    nonce = secrets.token_urlsafe(16)
    body = bytes(page.body).decode().replace("<script", f'<script nonce="{nonce}"')
    return HTMLResponse(
        body,
        headers={
            "Content-Security-Policy": policy(nonce),
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        },
    )


def install_docs(app: FastAPI) -> None:
    """Serve ``/docs`` and ``/redoc`` for ``app`` (created with ``docs_url=None, redoc_url=None``)."""
    title = html.escape(app.title)

    @app.get("/docs", include_in_schema=False)
    async def swagger(request: Request) -> HTMLResponse:
        openapi = request.scope.get("root_path", "") + (app.openapi_url or "/openapi.json")
        return _secured(get_swagger_ui_html(openapi_url=openapi, title=title + " - Swagger UI"))

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        openapi = request.scope.get("root_path", "") + (app.openapi_url or "/openapi.json")
        return _secured(get_redoc_html(openapi_url=openapi, title=title + " - ReDoc"))

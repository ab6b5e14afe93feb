"""The web page's static files: small, self-contained, no other host; and how they are served."""

from __future__ import annotations

import asyncio
import hashlib
import re
from pathlib import Path
from typing import Any

import pytest

from openenv_runtime import create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.web import STATIC_DIR
from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation

BUDGET_BYTES = 160 * 1024  # everything, the vendored libraries included (frames: +1.2 KB)
# The vendored libraries, byte for byte as their npm packages publish them (see
# openenv_runtime/web/third_party/README.md): (version in the file's header, sha256).
VENDORED = {
    "vendor/marked.esm.js": (
        "marked v17.0.6",
        "36d21a2561fe3bf958299f82aedf6572fcd7cebfff4a453e40e3b20aaa219a01",
    ),
    "vendor/purify.min.js": (
        "DOMPurify 3.4.18",
        "8053ee2a6a09f9d50f7fcd6fb7f07072f52c7f3fa9aa12147cab4feaf65ee970",
    ),
}
LICENSES = ["marked-LICENSE.md", "DOMPurify-LICENSE-Apache-2.0", "DOMPurify-LICENSE-MPL-2.0"]
# Namespace names, not addresses: nothing is ever fetched from them.
ALLOWED_URLS = {
    "http://www.w3.org/2000/svg",
    "http://www.w3.org/1999/xhtml",
    "http://www.w3.org/1998/Math/MathML",
}
# Text inside the vendored files (licence headers, an error message), never requested; the
# page's CSP (connect-src 'self') would refuse them anyway.
VENDORED_TEXT_URLS = {
    "https://github.com/markedjs/marked",
    "https://github.com/markedjs/marked.",
    "https://github.com/babel/babel/blob/main/packages/babel-helpers/LICENSE",
}
URL = re.compile(r"""(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}[^\s"'`)<>]*""")


def assets() -> list[Path]:
    return sorted(p for p in STATIC_DIR.rglob("*") if p.is_file())


def name(path: Path) -> str:
    return path.relative_to(STATIC_DIR).as_posix()


def test_the_page_is_under_150_kb_in_all() -> None:
    total = sum(p.stat().st_size for p in assets())
    assert total < BUDGET_BYTES, f"web assets weigh {total} bytes; the budget is {BUDGET_BYTES}"


def test_vendored_libraries_are_the_published_files_with_their_licences() -> None:
    for relative, (version, sha256) in VENDORED.items():
        data = (STATIC_DIR / relative).read_bytes()
        assert version in data[:400].decode(), f"{relative}: expected {version} in its header"
        assert hashlib.sha256(data).hexdigest() == sha256, f"{relative} differs from {version}"
    third_party = STATIC_DIR.parent / "third_party"
    for licence in LICENSES:
        assert (third_party / licence).stat().st_size > 1000, licence
    notes = (third_party / "README.md").read_text(encoding="utf-8")
    assert all(version.split()[-1].lstrip("v") in notes for version, _ in VENDORED.values())


def test_the_expected_files_are_shipped() -> None:
    names = {name(p) for p in assets()}
    assert {
        "index.html",
        "app.css",
        "app.js",
        "form.js",
        "markdown.js",
        "session.js",
        "favicon.svg",
        *VENDORED,
    } <= names


def test_no_address_of_another_host_in_the_assets() -> None:
    found = {
        f"{p.name}: {m.group(0)}"
        for p in assets()
        for m in URL.finditer(p.read_text(encoding="utf-8"))
        if m.group(0) not in ALLOWED_URLS
        and not (name(p) in VENDORED and m.group(0) in VENDORED_TEXT_URLS)
    }
    assert not found, f"assets refer to other hosts: {sorted(found)}"


def test_no_cdn_font_or_import_from_elsewhere() -> None:
    for p in assets():
        text = p.read_text(encoding="utf-8")
        if p.suffix in (".css", ".html", ".svg"):  # (in JavaScript, `url(` is just a name)
            assert "@import" not in text and "url(" not in text.replace('url("data:', ""), p.name
        for spec in re.findall(r"""^\s*import\s.*?from\s+["']([^"']+)["']""", text, flags=re.M):
            assert spec.startswith("./"), f"{p.name} imports {spec!r}: only the page's own modules"
            assert (STATIC_DIR / spec[2:]).is_file(), f"{p.name} imports a missing module {spec!r}"


def test_index_refers_only_to_shipped_relative_files() -> None:
    html = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    refs = re.findall(r"""(?:src|href)="([^"]+)\"""", html)
    local = [r for r in refs if not r.startswith(("#", "../"))]
    assert local, "index.html should load its assets"
    for ref in local:
        assert not ref.startswith("/"), (
            f"{ref!r} must be relative so the page works under a base path"
        )
        assert (STATIC_DIR / ref).is_file(), f"index.html refers to a missing file {ref!r}"
    # the route links point at the server's own routes, relative to /web/
    assert all(r in {"../docs", "../schema", "../health"} for r in refs if r.startswith("../"))


def test_no_inline_script_or_style_the_content_security_policy_would_block() -> None:
    html = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), (
        "inline <script> (CSP script-src 'self')"
    )
    assert "<style" not in html and " style=" not in html, "inline style (CSP style-src 'self')"
    assert not re.search(r"\son[a-z]+=", html), "inline event handler"


# ---------------------------------------------------------------- serving (in-process ASGI)


def call(app: Any, path: str) -> tuple[int, dict[str, str], bytes]:
    """One GET through the ASGI app, without sockets."""
    sent: list[dict[str, Any]] = []
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.sleep(3600)  # the client stays; cancelled once the response is sent
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], headers, body


@pytest.fixture()
def app() -> Any:
    return create_app(
        EchoEnvironment, EchoAction, EchoObservation, settings=ServerSettings(web_interface=True)
    )


def test_root_and_web_redirect_relatively_to_the_page(app: Any) -> None:
    for path in ("/", "/web"):
        status, headers, _ = call(app, path)
        assert status in (302, 307) and headers["location"] == "web/", path


def test_the_page_and_its_assets_are_served_with_a_strict_policy(app: Any) -> None:
    status, headers, body = call(app, "/web/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b'src="app.js"' in body
    csp = headers["content-security-policy"]
    assert (
        "default-src 'none'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
    )
    assert headers["x-content-type-options"] == "nosniff"
    for file, kind in (
        ("app.js", "javascript"),
        ("form.js", "javascript"),
        ("vendor/marked.esm.js", "javascript"),
        ("vendor/purify.min.js", "javascript"),
        ("app.css", "text/css"),
    ):
        status, headers, _ = call(app, f"/web/{file}")
        assert status == 200 and kind in headers["content-type"], file


def test_the_page_is_absent_when_disabled() -> None:
    app = create_app(
        EchoEnvironment, EchoAction, EchoObservation, settings=ServerSettings(web_interface=False)
    )
    assert call(app, "/web/")[0] == 404
    assert call(app, "/web/app.js")[0] == 404

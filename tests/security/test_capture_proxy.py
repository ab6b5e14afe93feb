"""The capture proxy: only its OpenAI routes reach the model server; sessions are owned; what
its own HTTP protocol parses is bounded in size and time."""

from __future__ import annotations

import gc
import http.client
import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response as StarletteResponse
from starlette.routing import Route

from openenv_runtime.capture import CaptureProxy
from openenv_runtime.capture.server import protocol_for
from openenv_runtime.capture.upstream import Call, Response
from openenv_runtime.testing import running_server
from openenv_runtime.testing.stub_llm import StubLLM
from tests.support.capture import WAYS, Serve, serving


@pytest.fixture(params=WAYS)
def serve(request: pytest.FixtureRequest) -> Serve:
    return serving(request.param)


pytestmark = pytest.mark.integration  # real servers on real sockets

TARGET = "update_weights_from_disk"
HOSTILE = [
    f"/v1/../{TARGET}",
    f"/v1/chat/completions/../../{TARGET}",
    f"/v1/%2e%2e/{TARGET}",
    f"/v1/%2E%2E/{TARGET}",
    f"/v1/..%2f{TARGET}",
    f"/v1/..%2F..%2F{TARGET}",
    f"/v1/%252e%252e/{TARGET}",  # encoded twice
    f"/v1/%252e%252e%252f{TARGET}",
    f"/v1/..\\{TARGET}",
    f"/v1/..%5c{TARGET}",
    f"/v1/{TARGET}",  # a route the proxy does not document
    "/v1/chat%2fcompletions",  # an encoded slash, even onto an allowed route
    "/v1/./chat/completions",
    "/v1/chat/completions/.",
    "/v1//chat/completions",
]


@pytest.fixture
def proxied(serve: Serve) -> Iterator[tuple[StubLLM, CaptureProxy, str]]:
    stub = StubLLM()
    with stub.serve() as upstream:
        proxy = CaptureProxy(upstream, upstream_api_key="the-proxy's-own-key")
        with serve(proxy) as url:
            yield stub, proxy, url


def raw_post(url: str, path: str, key: str) -> int:
    """POST ``path`` byte for byte (httpx would resolve dot segments before sending)."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        headers = {"Authorization": f"Bearer {key}", "content-type": "application/json"}
        conn.request("POST", path, body=b'{"model":"m","messages":[]}', headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.parametrize("path", HOSTILE)
def test_paths_outside_the_openai_routes_never_reach_the_model_server(
    proxied: tuple[StubLLM, CaptureProxy, str], path: str
) -> None:
    stub, proxy, url = proxied
    session = proxy.create_session(url)
    scoped = f"/sessions/{session['session_id']}{path}"
    assert raw_post(url, path, session["api_key"]) in (400, 404)
    assert raw_post(url, scoped, session["api_key"]) in (400, 404)
    assert stub.paths == []
    # the allowed routes still pass, on both kinds of base URL
    auth = {"Authorization": f"Bearer {session['api_key']}"}
    assert httpx.get(f"{session['base_url']}/models", headers=auth).status_code == 200
    assert httpx.get(f"{url}/v1/models", headers=auth).status_code == 200
    assert stub.paths == ["GET /v1/models", "GET /v1/models"]


def test_a_session_trace_needs_its_own_key(proxied: tuple[StubLLM, CaptureProxy, str]) -> None:
    _, _, url = proxied
    a = httpx.post(f"{url}/sessions").json()
    b = httpx.post(f"{url}/sessions").json()
    trace = f"{url}/sessions/{a['session_id']}/trace_entries"
    assert httpx.get(trace).status_code == 401
    assert httpx.get(trace, headers={"Authorization": f"Bearer {b['api_key']}"}).status_code == 401
    assert httpx.delete(f"{url}/sessions/{a['session_id']}").status_code == 401
    own = {"Authorization": f"Bearer {a['api_key']}"}
    assert httpx.get(trace, headers=own).json() == []
    assert httpx.delete(f"{url}/sessions/{a['session_id']}", headers=own).status_code == 204


def test_sessions_are_capped_with_a_clear_error(serve: Serve) -> None:
    with StubLLM().serve() as upstream:
        proxy = CaptureProxy(upstream, max_sessions=3)
        with serve(proxy) as url:
            made = [httpx.post(f"{url}/sessions") for _ in range(4)]
            assert [m.status_code for m in made] == [201, 201, 201, 429]
            assert "limit of 3 sessions" in made[-1].json()["error"]["message"]
            first = made[0].json()
            own = {"Authorization": f"Bearer {first['api_key']}"}
            assert (
                httpx.delete(f"{url}/sessions/{first['session_id']}", headers=own).status_code
                == 204
            )
            assert httpx.post(f"{url}/sessions").status_code == 201  # room again


def test_a_finished_call_and_a_deleted_session_hold_no_memory_until_a_collection(
    proxied: tuple[StubLLM, CaptureProxy, str],
) -> None:
    """Each call's objects are freed as it ends, never left in a reference cycle: with the
    collector's thresholds raised (``openenv capture`` raises them), a cycle per call kept
    every answer, and the session it was recorded into, until a collection came."""
    _, _, url = proxied
    session = httpx.post(f"{url}/sessions").json()
    own = {"Authorization": f"Bearer {session['api_key']}"}
    gc.collect()
    gc.disable()
    try:
        with httpx.Client(base_url=session["base_url"], headers=own) as client:
            for _ in range(5):
                client.post("/chat/completions", json={"model": "m", "messages": []})
        entries = f"{url}/sessions/{session['session_id']}/trace_entries"
        assert len(httpx.get(entries, headers=own).json()) == 5
        assert httpx.delete(f"{url}/sessions/{session['session_id']}", headers=own).is_success
        left = [o for o in gc.get_objects() if isinstance(o, (Call, Response))]
        assert left == []
    finally:
        gc.enable()


def test_a_query_that_could_split_the_request_line_is_refused() -> None:
    """The proxy writes the request line to the model server itself: a raw space, tab or line
    break in the query (possible in an ASGI scope) is refused, never forwarded."""
    import asyncio

    stub = StubLLM()
    with stub.serve() as upstream:
        proxy = CaptureProxy(upstream)
        key = proxy.create_session("http://proxy")["api_key"]

        async def call(query: bytes) -> int:
            scope = {
                "type": "http",
                "method": "GET",
                "path": "/v1/models",
                "raw_path": b"/v1/models",
                "query_string": query,
                "headers": [(b"authorization", f"Bearer {key}".encode())],
            }
            sent: list[dict[str, object]] = []

            async def receive() -> dict[str, object]:
                return {"type": "http.request", "body": b""}

            async def send(message: dict[str, object]) -> None:
                sent.append(message)

            try:
                await proxy(scope, receive, send)
            finally:
                await proxy.aclose()
            status = sent[0]["status"]
            assert isinstance(status, int)
            return status

        assert asyncio.run(call(b"a=1&b=%20")) == 200
        for query in (b"a=1 HTTP/1.1\r\nx-injected: 1", b"a=1\tb", b"a=\x7f"):
            assert asyncio.run(call(query)) == 400


# -- the proxy's own HTTP protocol (``capture/server.py``): what it parses, bounded -----------


@pytest.fixture
def own_protocol() -> Iterator[tuple[StubLLM, CaptureProxy, str]]:
    stub = StubLLM()
    with stub.serve() as upstream:
        proxy = CaptureProxy(upstream, request_timeout=0.5, max_body_bytes=4_000)
        with serving("protocol")(proxy) as url:
            yield stub, proxy, url


def exchange(url: str, data: bytes, *, half_close: bool = False, parts: int = 1) -> bytes:
    """Send ``data`` (in ``parts`` writes, a little apart) on a new connection; everything
    read until the proxy closes it (10 s at most; ``<reset>`` at the end when it reset)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        step = max(1, len(data) // parts)
        received = b""
        try:
            for start in range(0, len(data), step):
                sock.sendall(data[start : start + step])
                if parts > 1:
                    time.sleep(0.05)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
            while chunk := sock.recv(65536):
                received += chunk
        except (ConnectionResetError, BrokenPipeError):  # closed with bytes of ours unread
            received += b"<reset>"
        return received


def chat(session: dict[str, str], *, extra: bytes = b"", body: bytes | None = None) -> bytes:
    content = body if body is not None else b'{"model":"m","messages":[]}'
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: proxy\r\n"
        b"authorization: Bearer " + session["api_key"].encode() + b"\r\n"
        b"content-type: application/json\r\n"
        + extra
        + b"content-length: %d\r\n\r\n%s" % (len(content), content)
    )


def test_an_oversized_head_or_too_many_headers_get_431_and_a_closed_connection(
    own_protocol: tuple[StubLLM, CaptureProxy, str],
) -> None:
    stub, proxy, url = own_protocol
    session = proxy.create_session(url)
    huge = chat(session, extra=b"x-pad: " + b"a" * (200 << 10) + b"\r\n")
    many = chat(session, extra=b"".join(b"x-h%d: 1\r\n" % i for i in range(150)))
    # the huge head may still be on its way when the proxy closes: its 431 can be lost to a reset
    assert exchange(url, huge)[:13] in (b"HTTP/1.1 431 ", b"<reset>")
    assert exchange(url, many).startswith(b"HTTP/1.1 431 ")
    assert stub.requests == []


def test_bad_chunked_encoding_is_a_400_never_forwarded(
    own_protocol: tuple[StubLLM, CaptureProxy, str],
) -> None:
    stub, proxy, url = own_protocol
    session = proxy.create_session(url)
    head = chat(session).split(b"content-length")[0] + b"transfer-encoding: chunked\r\n\r\n"
    for body in (b"zz\r\n{}\r\n0\r\n\r\n", b"2\r\n{}XX0\r\n\r\n"):
        assert exchange(url, head + body).startswith(b"HTTP/1.1 400 ")
    assert stub.requests == []


def test_a_body_over_the_limit_in_chunks_is_a_413_before_the_rest_is_read(
    own_protocol: tuple[StubLLM, CaptureProxy, str],
) -> None:
    stub, proxy, url = own_protocol
    session = proxy.create_session(url)
    head = chat(session).split(b"content-length")[0] + b"transfer-encoding: chunked\r\n\r\n"
    chunk = b"1000\r\n" + b"x" * 0x1000 + b"\r\n"
    assert exchange(url, head + chunk * 3).startswith(b"HTTP/1.1 413 ")
    assert stub.requests == []


def test_pipelined_calls_are_answered_in_order_and_recorded(
    own_protocol: tuple[StubLLM, CaptureProxy, str],
) -> None:
    stub, proxy, url = own_protocol
    session = proxy.create_session(url)
    closing = chat(session).replace(b"host: proxy\r\n", b"host: proxy\r\nconnection: close\r\n")
    answer = exchange(url, chat(session) + chat(session) + closing)
    assert answer.count(b"HTTP/1.1 200 OK") == 3
    assert len(proxy.trace_entries(session["session_id"])) == 3 and len(stub.requests) == 3


def test_a_later_request_on_a_kept_connection_is_timed_and_an_idle_one_closed() -> None:
    """The requests of one connection share a timer, set again as it goes off: a request
    that stalls after others were answered on the same connection still gets its 408 in
    about ``request_timeout`` (0.5 s here), and a connection left idle after several answers
    is closed after uvicorn's keep-alive timeout (1 s here), never sooner."""
    with StubLLM().serve() as upstream:
        proxy = CaptureProxy(upstream, request_timeout=0.5)
        with running_server(proxy.app, http=protocol_for(proxy), timeout_keep_alive=1) as url:
            request = chat(proxy.create_session(url))
            host, port = url.removeprefix("http://").split(":")
            with socket.create_connection((host, int(port)), timeout=10) as stalled:
                for _ in range(3):  # answered, 0.3 s apart: the first timer outlives them
                    stalled.sendall(request)
                    assert stalled.recv(65536).startswith(b"HTTP/1.1 200 ")
                    time.sleep(0.3)
                stalled.sendall(request[:-5])  # the body never ends
                began = time.monotonic()
                assert stalled.recv(65536).startswith(b"HTTP/1.1 408 ")
                assert 0.4 <= time.monotonic() - began < 1.5
            with socket.create_connection((host, int(port)), timeout=10) as idle:
                for pause in (0.6, 0.6, 0.0):  # under the keep-alive timeout: kept
                    idle.sendall(request)
                    assert idle.recv(65536).startswith(b"HTTP/1.1 200 ")
                    time.sleep(pause)
                idle.settimeout(0.5)
                with pytest.raises(TimeoutError):  # not closed yet, 0.5 s idle
                    idle.recv(1)
                idle.settimeout(5)
                assert idle.recv(1) == b""  # closed, about 1 s after the last answer


def test_a_slow_client_is_cut_off_and_a_half_closed_one_holds_nothing(
    own_protocol: tuple[StubLLM, CaptureProxy, str],
) -> None:
    """``request_timeout`` (0.5 s here) bounds a request from its first byte to its last, and
    a new connection's wait for its first byte; a client that stops sending after its
    request still gets nothing forwarded twice and leaves the proxy serving."""
    stub, proxy, url = own_protocol
    session = proxy.create_session(url)
    request = chat(session)
    assert exchange(url, b"").startswith(b"HTTP/1.1 408 ")  # never sends a byte
    assert exchange(url, request[:-5]).startswith(b"HTTP/1.1 408 ")  # the body never ends
    assert exchange(url, request[:30]).startswith(b"HTTP/1.1 408 ")  # nor the head
    assert stub.requests == []
    exchange(url, request, half_close=True)
    assert len(stub.requests) <= 1
    assert exchange(url, request.replace(b"host: proxy", b"connection: close")).startswith(
        b"HTTP/1.1 200 "
    )


# token-id arrays a model server might send, each valid JSON at its place: the read-back must
# stay valid JSON with lists of ints, or record an error, never pass the bytes through as ids
SPELLED_IDS = [
    '[7,"],\\"injected\\":[8"]',  # a string holding a bracket and quotes
    "[[7],[8]]",
    "[7.0,8]",
    "[1e3,8]",
    '{"0":7}',
    "[7, 8]",  # spaced: decoded and written compact
    "[-7,8]",
]


def _answering(ids: str) -> Starlette:
    """A model server whose every answer carries ``ids`` as its choice's ``token_ids``."""
    head = b'{"choices":[{"message":{"role":"assistant","content":"x"},"finish_reason":"stop",'
    logprobs = b'"logprobs":{"content":[{"logprob":-0.5},{"logprob":-0.5}]},"token_ids":'
    body = head + logprobs + ids.encode() + b'}],"prompt_token_ids":[1,2]}'

    async def completions(request: Request) -> StarletteResponse:
        return StarletteResponse(body, media_type="application/json")

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


@pytest.mark.parametrize("ids", SPELLED_IDS)
def test_token_ids_a_model_server_spells_oddly_never_reach_the_read_back_as_raw_bytes(
    serve: Serve, ids: str
) -> None:
    with running_server(_answering(ids)) as upstream, serve(CaptureProxy(upstream)) as url:
        made = httpx.post(f"{url}/sessions").json()
        own = {"Authorization": f"Bearer {made['api_key']}"}
        call = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        httpx.post(f"{made['base_url']}/chat/completions", json=call, headers=own)
        read = httpx.get(f"{url}/sessions/{made['session_id']}/trace_entries", headers=own)
        (entry,) = json.loads(read.content)  # valid JSON, or this raises
        assert "injected" not in entry
        assert entry["prompt_token_ids"] is None or entry["prompt_token_ids"] == [1, 2]
        kept = entry["completion_token_ids"]
        if entry["error"] is None:
            assert isinstance(kept, list) and all(type(i) is int for i in kept)
            assert read.content.count(b"[7,8]") + read.content.count(b"[-7,8]") == 1
        else:
            assert kept is None and "expected" in entry["error"].lower()

"""The client's own connection (client/transport.py) on real sockets: pipelined requests on one
session, and a server that stops answering keepalive pings."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import socket
import threading
from collections.abc import Iterator

import pytest

from openenv_runtime import EnvClient, EnvError, State, create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.testing import running_server
from tests.fixtures.echo import AsyncEchoEnvironment, EchoAction, EchoObservation

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455, section 1.3


class Echo(EnvClient[EchoAction, EchoObservation, State]):
    pass


def test_requests_sent_together_get_their_own_replies() -> None:
    app = create_app(
        AsyncEchoEnvironment,
        EchoAction,
        EchoObservation,
        settings=ServerSettings(web_interface=False),
    )

    async def go(url: str) -> list[str]:
        async with Echo(url) as env:
            await env.reset()
            results = await asyncio.gather(
                *(env.step(EchoAction(message=f"m{i}")) for i in range(20))
            )
            return [r.observation.echoed_message for r in results]

    with running_server(app) as url:
        assert asyncio.run(go(url)) == [f"m{i}" for i in range(20)]


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Completes the WebSocket handshake, then never reads or writes again (a hung host)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []

    def serve() -> None:
        conn, _ = listener.accept()
        held.append(conn)
        request = b""
        while b"\r\n\r\n" not in request:
            request += conn.recv(4096)
        key = next(
            line.split(b":", 1)[1].strip()
            for line in request.split(b"\r\n")
            if line.lower().startswith(b"sec-websocket-key:")
        )
        accept = base64.b64encode(hashlib.sha1(key + WS_GUID.encode()).digest())
        conn.sendall(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n"
        )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        for conn in held:
            conn.close()
        listener.close()


def test_unanswered_keepalive_ends_the_session(silent_server: str) -> None:
    async def go() -> EnvError:
        env = Echo(silent_server, ping_interval=0.2, ping_timeout=0.3)
        await env.connect()
        with pytest.raises(EnvError) as info:
            await asyncio.wait_for(env.step(EchoAction(message="x")), 10)
        return info.value

    error = asyncio.run(go())
    assert error.code == "CLOSED" and "keepalive ping" in error.message


@pytest.fixture
def connect_proxy() -> Iterator[tuple[str, list[bytes]]]:
    """A minimal HTTP CONNECT proxy on a thread; records the CONNECT lines it served."""
    seen: list[bytes] = []
    loop = asyncio.new_event_loop()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        line = head.split(b"\r\n", 1)[0]
        seen.append(line)
        host, port = line.split()[1].rsplit(b":", 1)
        up_reader, up_writer = await asyncio.open_connection(host.decode(), int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


def test_proxy_from_the_environment_is_used(
    connect_proxy: tuple[str, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy, seen = connect_proxy
    for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", proxy)
    app = create_app(
        AsyncEchoEnvironment,
        EchoAction,
        EchoObservation,
        settings=ServerSettings(web_interface=False),
    )
    with running_server(app) as url, Echo(url).sync() as env:
        assert env.step(EchoAction(message="via proxy")).observation.echoed_message == "via proxy"
    port = url.rsplit(":", 1)[1]
    assert seen == [f"CONNECT 127.0.0.1:{port} HTTP/1.1".encode()]


def test_refused_handshake_carries_its_status() -> None:
    app = create_app(
        AsyncEchoEnvironment,
        EchoAction,
        EchoObservation,
        settings=ServerSettings(web_interface=False, api_key="k-123"),
    )

    async def go(url: str) -> None:
        with pytest.raises(EnvError) as info:
            await Echo(url).connect()
        assert info.value.code == "CONNECTION_ERROR" and info.value.details["status"] in (401, 403)
        async with Echo(url, token="k-123") as env:
            assert env._conn is not None and env._conn.response is not None
            assert env._conn.response.status_code == 101

    with running_server(app) as url:
        asyncio.run(go(url))

"""The capture proxy's HTTP/1.1 client: reuse, a retry on a stale connection, bodies, limits."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from openenv_runtime.capture.upstream import Upstream, UpstreamError

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


async def _serve(handler: Handler) -> tuple[asyncio.Server, str, list[int]]:
    """A raw server on a free port; the list counts the connections it took."""
    connections: list[int] = []

    async def counted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(counted, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/prefix", connections


async def _request_head(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        ),
        0,
    )
    return head + await reader.readexactly(length)


def test_a_connection_is_reused_and_a_stale_one_is_retried_once() -> None:
    """The server answers once per connection, then drops the next request unanswered (its
    keep-alive ended): the client sends it again on a new connection."""
    seen: list[bytes] = []

    async def once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await _request_head(reader))
        writer.write(OK)
        await writer.drain()
        await _request_head(reader)  # read, never answered

    async def run() -> list[bytes]:
        server, base, connections = await _serve(once)
        upstream = Upstream(base)
        bodies = []
        for _ in range(3):
            answer = await upstream.request(
                "POST", "/v1/chat/completions", b'{"a":1}', {"x-k": "v"}, 10
            )
            bodies.append(await answer.read())
            answer.release()
        upstream.close()
        server.close()
        assert len(connections) == 3
        return bodies

    assert asyncio.run(run()) == [b"{}"] * 3
    assert seen[0].startswith(b"POST /prefix/v1/chat/completions HTTP/1.1\r\n")
    assert b"\r\nx-k: v\r\n" in seen[0] and seen[0].endswith(b'content-length: 7\r\n\r\n{"a":1}')


def test_chunked_and_close_delimited_answers_are_read_whole() -> None:
    async def chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        for part in (b"data: 1\n\n", b"data: 2\n\n"):
            writer.write(b"%x\r\n%s\r\n" % (len(part), part))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def until_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nall of it")
        await writer.drain()

    async def run(handler: Handler) -> tuple[int, bytes]:
        server, base, _ = await _serve(handler)
        upstream = Upstream(base)
        answer = await upstream.request("POST", "/v1/x", b"{}", {}, 10)
        body = b"".join([chunk async for chunk in answer.chunks()])
        answer.release()
        server.close()
        return answer.status, body

    assert asyncio.run(run(chunked)) == (200, b"data: 1\n\ndata: 2\n\n")
    assert asyncio.run(run(until_close)) == (200, b"all of it")


def test_silence_garbage_and_refusal_are_errors() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request_head(reader)
        await asyncio.sleep(30)

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request_head(reader)
        writer.write(b"SSH-2.0-not-http\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(5)

    async def run(handler: Handler, timeout: float) -> None:
        server, base, _ = await _serve(handler)
        try:
            await Upstream(base).request("POST", "/v1/x", b"{}", {}, timeout)
        finally:
            server.close()

    with pytest.raises(TimeoutError):
        asyncio.run(run(silent, 0.2))
    with pytest.raises(UpstreamError, match="not HTTP"):
        asyncio.run(run(garbage, 10))
    with pytest.raises(ValueError, match="line break"):
        asyncio.run(Upstream("http://127.0.0.1:9").request("GET", "/", b"", {"a": "b\r\nc: d"}, 1))

    async def refused() -> None:
        server, base, _ = await _serve(silent)
        server.close()
        await server.wait_closed()
        await Upstream(base).request("GET", "/v1/models", b"", {}, 10)

    with pytest.raises(UpstreamError, match="cannot connect"):
        asyncio.run(refused())


def test_each_call_times_out_at_its_own_limit_in_any_event_loop() -> None:
    """One timer serves every call under way: a call with a shorter limit made after one
    with a longer limit still times out first, a call that ends is no longer timed, and a
    client whose timer was left set in an event loop now gone times its calls in the next."""

    async def by_path(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await _request_head(reader)
            if b"/fast" in head:
                writer.write(OK)
                await writer.drain()
            else:
                await asyncio.sleep(30)

    upstreams: list[Upstream] = []

    async def run(calls: list[tuple[str, float]]) -> list[tuple[str, str, float]]:
        server, base, _ = await _serve(by_path)
        if not upstreams:
            upstreams.append(Upstream(base))
        upstream = upstreams[0]
        upstream.port = server.sockets[0].getsockname()[1]  # the same client, this loop's server
        loop = asyncio.get_running_loop()
        started = loop.time()
        ended: list[tuple[str, str, float]] = []  # (path, outcome, seconds from the start)

        async def call(path: str, timeout: float) -> None:
            try:
                response = await upstream.request("POST", path, b"{}", {}, timeout)
                await response.read()
                response.release()
                ended.append((path, "ok", loop.time() - started))
            except TimeoutError:
                ended.append((path, "timed out", loop.time() - started))

        try:
            everything = asyncio.gather(*(call(path, limit) for path, limit in calls))
            await asyncio.wait_for(everything, 3)
        except TimeoutError:
            ended.append(("", "still waiting", loop.time() - started))
        finally:
            upstream.close()
            server.close()
        return ended

    assert [e[:2] for e in asyncio.run(run([("/fast", 0.5)]))] == [("/fast", "ok")]
    # (that call left its timer set, in a loop now gone); these are all due after it
    ended = asyncio.run(run([("/slow-long", 1.2), ("/slow-short", 0.6), ("/fast", 0.6)]))
    assert [e[:2] for e in ended] == [
        ("/fast", "ok"),
        ("/slow-short", "timed out"),
        ("/slow-long", "timed out"),
    ]
    assert 0.6 <= ended[1][2] < 1.1 and 1.2 <= ended[2][2] < 1.7


class Recorder:
    """An ``Answer`` that keeps what it was handed, in order."""

    def __init__(self) -> None:
        self.events: list[object] = []
        self.done = asyncio.get_running_loop().create_future()

    def head(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.events.append(status)

    def body(self, chunk: bytes) -> None:
        self.events.append(chunk)

    def end(self) -> None:
        self.events.append("end")
        self.done.set_result(None)

    def fail(self, error: BaseException) -> None:
        self.events.append(error)
        self.done.set_result(None)


def test_an_answer_is_handed_over_as_it_arrives_without_a_task() -> None:
    """``send`` hands the status, each chunk and the end to an ``Answer`` (the proxy's own
    protocol relays them so); a reused connection the server dropped is retried once."""

    async def chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\nabcd\r\n")
        await writer.drain()
        writer.write(b"2\r\nef\r\n0\r\n\r\n")
        await writer.drain()
        await _request_head(reader)  # the next request on this connection: dropped

    async def run() -> list[list[object]]:
        server, base, connections = await _serve(chunked)
        upstream = Upstream(base)
        seen = []
        for _ in range(2):
            answer = Recorder()
            upstream.send("POST", "/v1/x", b"{}", {}, 10, answer)
            await answer.done
            seen.append(answer.events)
        upstream.close()
        server.close()
        assert len(connections) == 2  # the second call retried on a new connection
        return seen

    first, second = asyncio.run(run())
    assert b"".join(e for e in first if isinstance(e, bytes)) == b"abcdef"
    assert first[0] == 200 and first[-1] == "end" and second == first


def test_a_cancelled_call_closes_its_connection_and_hands_nothing_more() -> None:
    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc")
        await writer.drain()
        await asyncio.sleep(0.5)
        writer.write(b"defghij")
        await writer.drain()

    async def run() -> list[object]:
        server, base, _ = await _serve(slow)
        upstream = Upstream(base)
        answer = Recorder()
        call = upstream.send("POST", "/v1/x", b"{}", {}, 10, answer)
        while b"abc" not in answer.events:
            await asyncio.sleep(0.01)
        call.cancel()
        await asyncio.sleep(0.7)
        assert upstream.reuse() is None  # never handed back half read
        server.close()
        return answer.events

    assert asyncio.run(run()) == [200, b"abc"]

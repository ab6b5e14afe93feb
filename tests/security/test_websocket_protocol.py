"""Hostile clients at the WebSocket protocol: one that pipelines cheap steps gets no more than
one read per loop turn, one that pings and never reads stops being read, and frames that are not
UTF-8 cost one log line, not a traceback each.

The server runs as ``openenv serve`` runs it (its own process, uvloop). Every step of every
session takes the next number of one server-wide count (``tests/fixtures/ticks.py``), so two
replies to a second client say how many of the flooder's steps the server ran in between.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode
from websockets.sync.client import ClientConnection, connect

from openenv_runtime.testing import free_port
from tests.support.servers import server_process, spawn_server, stop_process, wait_until

pytestmark = pytest.mark.integration  # real servers on real sockets

APP = "tests.fixtures.ticks:app"
WARM_UP = 40  # steps before a plain step() is proven cheap and runs inline
STEP = Frame(
    Opcode.TEXT, json.dumps({"type": "step", "data": {"pad": "p" * 200}}).encode()
).serialize(mask=True, extensions=[])
# uvloop reads a socket again while each read fills its 256,000-byte buffer, up to 32 times a
# turn: unpaused, a flooder's turn is ~8 MB of frames. Paused after each large read, ~256 kB.
TURN_UNPAUSED = 32 * 256_000 // len(STEP)
FLOOD_FRAMES = 12 * TURN_UNPAUSED  # the flood's bound
WAIT = 120.0  # seconds any one reply may take on a loaded machine (a bound, not a measure)


def health(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        conn.request("GET", "/health")
        return conn.getresponse().status
    finally:
        conn.close()


def handshake(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        assert chunk, "closed during the handshake"
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


class Flood:
    """One client that writes up to ``frames`` pipelined ``frame``s as fast as the server takes
    them, in one thread, and (unless ``read`` is false) reads whatever comes back in another."""

    def __init__(self, port: int, frame: bytes, frames: int, read: bool = True) -> None:
        self.sock = handshake(port)
        self.sent_frames = 0
        self.received = 0
        self.stopping = threading.Event()
        batch = max(1, (1 << 20) // len(frame))
        self.blob, self.batch, self.frames = frame * batch, batch, frames
        self.threads = [threading.Thread(target=self._write, daemon=True)]
        if read:
            self.threads.append(threading.Thread(target=self._read, daemon=True))
        for thread in self.threads:
            thread.start()

    def _write(self) -> None:
        try:
            while not self.stopping.is_set() and self.sent_frames < self.frames:
                self.sock.sendall(self.blob)
                self.sent_frames += self.batch
        except OSError:
            pass

    def _read(self) -> None:
        try:
            while not self.stopping.is_set():
                data = self.sock.recv(1 << 20)
                if not data:
                    return
                self.received += len(data)
        except OSError:
            pass

    def stop(self) -> None:
        self.stopping.set()
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for thread in self.threads:
            thread.join(WAIT)


@contextmanager
def ticks_server() -> Iterator[tuple[int, ClientConnection, int]]:
    """The server's port, a client whose plain steps are answered inline, the server's pid."""
    port = free_port()
    with (
        server_process(APP, port) as process,
        connect(f"ws://127.0.0.1:{port}/ws", open_timeout=WAIT) as other,
    ):
        other.send('{"type": "reset"}')
        other.recv(timeout=WAIT)
        for _ in range(WARM_UP):
            tick(other)
        yield port, other, process.pid


def tick(conn: ClientConnection) -> int:
    conn.send('{"type": "step", "data": {}}')
    reply: dict[str, Any] = json.loads(conn.recv(timeout=WAIT))
    assert reply["type"] == "observation", reply
    return int(reply["data"]["observation"]["tick"])


def test_a_pipelining_client_leaves_turns_to_the_others() -> None:
    with ticks_server() as (port, other, _):
        flood = Flood(port, STEP, FLOOD_FRAMES)
        try:
            # under way: the first of its replies are back, and megabytes more are queued
            assert wait_until(lambda: flood.received > 0, timeout=WAIT)
            assert wait_until(lambda: flood.sent_frames >= TURN_UNPAUSED, timeout=WAIT)
            between_steps = []
            for _ in range(3):
                first = tick(other)
                between_steps.append(tick(other) - first - 1)
            first = tick(other)
            assert health(port) == 200
            around_health = tick(other) - first - 1
            flooding = flood.sent_frames < FLOOD_FRAMES
        finally:
            flood.stop()
    # The flooder's steps the server ran while the other client waited for one reply (or for
    # /health): a few reads' worth (~1,000 steps a read), never a turn of ~8 MB.
    assert max(between_steps) < TURN_UNPAUSED // 2, between_steps
    assert around_health < TURN_UNPAUSED, around_health
    assert flooding, "the flood ended before the other client was done: nothing was measured"


PING = Frame(Opcode.PING, b"p" * 125).serialize(mask=True, extensions=[])
PINGS = (64 << 20) // len(PING)  # 64 MB of pings: far more than the sockets' buffers hold


def test_a_client_that_pings_and_never_reads_stops_being_read() -> None:
    with ticks_server() as (port, _, pid):
        server = psutil.Process(pid)
        before = server.memory_info().rss
        flood = Flood(port, PING, PINGS, read=False)
        try:
            # The writer blocks once the server stops reading (its pongs not read), or finishes.
            last, still_since = -1, time.monotonic()
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline and flood.sent_frames < PINGS:
                if flood.sent_frames != last:
                    last, still_since = flood.sent_frames, time.monotonic()
                elif time.monotonic() - still_since > 5.0:
                    break
                time.sleep(0.05)
            grown = server.memory_info().rss - before
            sent = flood.sent_frames
        finally:
            flood.stop()
        assert health(port) == 200
    assert sent < PINGS, "the server read every ping of a client that never read a pong"
    assert grown < 24 << 20, f"the server's memory grew by {grown >> 20} MB"


def test_text_that_is_not_utf8_is_one_log_line_not_a_traceback_each(tmp_path: Path) -> None:
    bad = Frame(Opcode.TEXT, b'{"type":"step","data":{"pad":"\xff"}}').serialize(
        mask=True, extensions=[]
    )
    port = free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        process = spawn_server(APP, port, output=out)
        try:
            with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=WAIT) as warm:
                warm.send('{"type": "reset"}')
                warm.recv(timeout=WAIT)
                for _ in range(WARM_UP):
                    tick(warm)  # steps answered inline from now on: both ways in are tried
                warm.socket.sendall(bad)
                with pytest.raises(ConnectionClosed) as closed:
                    warm.recv(timeout=WAIT)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1007
            for _ in range(5):
                sock = handshake(port)
                sock.sendall(bad)
                assert wait_until(lambda s=sock: s.recv(65536) == b"", timeout=WAIT)
                sock.close()
        finally:
            stop_process(process)
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-3000:]
    assert text.count("not UTF-8") == 1, text[-3000:]

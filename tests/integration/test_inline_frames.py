"""Cheap steps answered in the WebSocket protocol, below ASGI, on a real uvicorn over real sockets.

The server runs in a thread of the test process (so the tests can read its protocol's counters);
the clients write raw frames, so the tests choose how the bytes are cut into reads.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from websockets.frames import Close, Frame, Opcode
from websockets.protocol import OPEN, Protocol, Side
from websockets.sync.client import connect

from openenv_runtime import Action, Environment, Observation, State, create_app
from openenv_runtime.serve import uvicorn_options
from openenv_runtime.server import ServerSettings
from openenv_runtime.server.config.settings import load_settings
from openenv_runtime.server.ws.inline_frames import InlineFrames
from openenv_runtime.testing import free_port
from tests.support.servers import REPO, SOURCES, healthy, stop_process, wait_until

WARM_UP = 40  # steps before a plain step() is proven cheap and runs inline (32 trials)
MAX_BYTES = 64 << 10


class Say(Action):
    message: str


class Heard(Observation):
    message: str = ""
    count: int = 0


class Parrot(Environment[Say, Heard, State]):
    """Repeats the message; counts steps. Its own class: placements are learnt per class."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State(episode_id="parrot")

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Heard:
        self._state = State(episode_id="parrot")
        return Heard(message="ready")

    def step(self, action: Say, **kw: Any) -> Heard:
        self._state.step_count += 1
        return Heard(
            message=action.message,
            count=self._state.step_count,
            reward=float(len(action.message)),
            metadata={"step": self._state.step_count},
        )

    @property
    def state(self) -> State:
        return self._state


class Server:
    """uvicorn with the server's own options and protocols, in a thread of this process."""

    def __init__(self) -> None:
        settings = load_settings(code={"max_message_bytes": MAX_BYTES}, environ={}).values
        options = uvicorn_options(settings)
        options.update(host="127.0.0.1", port=0, log_level="warning")
        app = create_app(Parrot, Say, Heard, settings=ServerSettings(max_message_bytes=MAX_BYTES))
        self.server = uvicorn.Server(uvicorn.Config(app, **options))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        [listener] = self.server.servers
        self.port = listener.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(15)

    def protocols(self) -> list[InlineFrames]:
        return [p for p in self.server.server_state.connections if isinstance(p, InlineFrames)]

    def protocol_of(self, client: RawClient) -> InlineFrames:
        """The server's end of ``client``'s connection (other tests' connections may linger)."""
        own = client.sock.getsockname()
        [protocol] = [p for p in self.protocols() if p.transport.get_extra_info("peername") == own]
        return protocol

    def inline_replies(self) -> int:
        return sum(p.inline_replies for p in self.protocols())

    def raw_replies(self) -> int:
        return sum(p.raw_replies for p in self.protocols())


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with Server() as running:
        yield running


class RawClient:
    """A WebSocket client over a plain socket: frames built and parsed by websockets' sans-I/O
    code, written in whatever cuts the test asks for."""

    def __init__(self, port: int, headers: dict[str, str] | None = None) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        key = base64.b64encode(os.urandom(16)).decode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self.sock.sendall(
            (
                f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                f"Sec-WebSocket-Version: 13\r\n{extra}\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            assert chunk, "closed during the handshake"
            head += chunk
        head, _, rest = head.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101"), head
        self.headers = head.decode()
        self.parser = Protocol(Side.CLIENT, state=OPEN, max_size=None)
        self.events: list[Frame] = []
        if rest:
            self._feed(rest)

    @staticmethod
    def frame(payload: bytes | str, opcode: Opcode = Opcode.TEXT) -> bytes:
        data = payload.encode() if isinstance(payload, str) else payload
        return Frame(opcode, data).serialize(mask=True, extensions=[])

    def _feed(self, data: bytes) -> None:
        self.parser.receive_data(data)
        self.events.extend(e for e in self.parser.events_received() if isinstance(e, Frame))
        answers = b"".join(self.parser.data_to_send())  # pongs to the server's keepalive pings
        if answers and self.parser.state is OPEN:
            self.sock.sendall(answers)

    def next_frame(self) -> Frame:
        while not self.events:
            data = self.sock.recv(65536)
            if not data:
                self.parser.receive_eof()
            self._feed(data)
            if not data and not self.events:
                raise EOFError("the server closed the connection")
        return self.events.pop(0)

    def reply(self) -> dict[str, Any]:
        frame = self.next_frame()
        assert frame.opcode is Opcode.TEXT, frame
        message: dict[str, Any] = json.loads(bytes(frame.data))
        return message

    def close_code(self) -> int:
        """The code of the close frame the server sends next (replies before it are skipped)."""
        while True:
            frame = self.next_frame()
            if frame.opcode is Opcode.CLOSE:
                return Close.parse(bytes(frame.data)).code

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(self.frame(json.dumps(message)))

    def step(self, text: str, **extra: Any) -> dict[str, Any]:
        self.send({"type": "step", "data": {"message": text}, **extra})
        return self.reply()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def client(server: Server) -> Iterator[RawClient]:
    raw = RawClient(server.port)
    raw.send({"type": "reset"})
    assert raw.reply()["type"] == "observation"
    for i in range(WARM_UP):
        assert raw.step(f"warm {i}")["type"] == "observation"
    yield raw
    raw.close()


def test_cheap_steps_are_answered_in_the_protocol_with_the_same_replies(
    server: Server, client: RawClient
) -> None:
    before, raw_before = server.inline_replies(), server.raw_replies()
    reply = client.step("hello")
    assert reply == {
        "type": "observation",
        "data": {
            "observation": {"metadata": {"step": WARM_UP + 1}, "message": "hello", "count": 41},
            "reward": 5.0,
            "done": False,
            "metadata": {"step": WARM_UP + 1},
        },
    }
    for i in range(20):
        assert client.step(str(i))["data"]["observation"]["count"] == WARM_UP + 2 + i
    assert server.inline_replies() - before == 21
    assert server.raw_replies() - raw_before == 21
    # the same session's other messages still go through ASGI, answered as before
    client.send({"type": "state"})
    assert client.reply()["data"]["step_count"] == WARM_UP + 21
    assert server.inline_replies() - before == 21


def test_errors_of_a_step_are_the_same_as_through_asgi(client: RawClient) -> None:
    bad = client.step("x", extra_field=1)  # outside data: ignored, as before
    assert bad["type"] == "observation"
    client.send({"type": "step", "data": {"message": 3}})
    error = client.reply()
    assert error["type"] == "error"
    assert error["data"]["code"] == "VALIDATION_ERROR"
    assert error["data"]["errors"][0]["loc"] == ["message"]
    client.sock.sendall(client.frame("{not json"))
    assert client.reply()["data"]["code"] == "INVALID_JSON"
    client.send({"type": "nope"})
    assert client.reply()["data"]["code"] == "UNKNOWN_TYPE"
    assert client.step("after")["type"] == "observation"


def test_frames_in_one_read_are_answered_in_order(server: Server, client: RawClient) -> None:
    messages = [
        {"type": "step", "data": {"message": "a"}},
        {"type": "state"},
        {"type": "step", "data": {"message": "b"}},
        {"type": "reset"},
        {"type": "step", "data": {"message": "c"}},
        {"type": "step", "data": {"message": "d"}},
    ]
    client.sock.sendall(b"".join(client.frame(json.dumps(m)) for m in messages))
    replies = [client.reply() for _ in messages]
    assert [r["type"] for r in replies] == [
        "observation",
        "state",
        "observation",
        "observation",
        "observation",
        "observation",
    ]
    assert replies[1]["data"]["step_count"] == WARM_UP + 1
    assert [replies[i]["data"]["observation"]["message"] for i in (0, 2, 3, 4, 5)] == [
        "a",
        "b",
        "ready",
        "c",
        "d",
    ]
    assert replies[5]["data"]["observation"]["count"] == 2  # counted from the reset


def test_a_batch_larger_than_a_turn_is_answered_once_in_order(client: RawClient) -> None:
    # ~200 kB in one write: parsed a part per loop turn (TURN_BYTES), frames cut between parts
    messages: list[dict[str, Any]] = [
        {"type": "step", "data": {"message": f"batch {i}"}} for i in range(4000)
    ]
    messages[1500] = {"type": "state"}  # through ASGI, between inline answers
    client.sock.sendall(b"".join(client.frame(json.dumps(m)) for m in messages))
    count = WARM_UP
    for i, message in enumerate(messages):
        reply = client.reply()
        if message["type"] == "state":
            assert reply["data"]["step_count"] == count
            continue
        count += 1
        assert reply["data"]["observation"] == {
            "metadata": {"step": count},
            "message": f"batch {i}",
            "count": count,
        }


def test_a_frame_cut_across_reads_is_answered_once(server: Server, client: RawClient) -> None:
    data = client.frame(json.dumps({"type": "step", "data": {"message": "split"}}))
    for cut in (1, 2, 6, len(data) - 1):
        client.sock.sendall(data[:cut])
        time.sleep(0.05)  # its own read on the server
        client.sock.sendall(data[cut:])
        assert client.reply()["data"]["observation"]["message"] == "split"
    assert client.step("whole")["data"]["observation"]["message"] == "whole"


def test_a_message_in_fragments_is_answered(client: RawClient) -> None:
    payload = json.dumps({"type": "step", "data": {"message": "fragments"}}).encode()
    first = Frame(Opcode.TEXT, payload[:10], fin=False).serialize(mask=True, extensions=[])
    rest = Frame(Opcode.CONT, payload[10:], fin=True).serialize(mask=True, extensions=[])
    client.sock.sendall(first)
    time.sleep(0.05)
    client.sock.sendall(rest)
    assert client.reply()["data"]["observation"]["message"] == "fragments"


def test_a_ping_between_steps_gets_its_pong(client: RawClient) -> None:
    client.sock.sendall(client.frame(b"are you there", Opcode.PING))
    frame = client.next_frame()
    assert (frame.opcode, bytes(frame.data)) == (Opcode.PONG, b"are you there")
    assert client.step("still")["data"]["observation"]["message"] == "still"


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b'{"type":"step","data":{"message":"\xff"}}', 1007),  # not UTF-8
        (Frame(Opcode.TEXT, b"{}").serialize(mask=False, extensions=[]), 1002),  # unmasked
        (RawClient.frame("x" * (MAX_BYTES + 1)), 1009),  # over the limit
    ],
    ids=["invalid-utf8", "unmasked", "too-big"],
)
def test_a_bad_frame_closes_the_connection_as_before(
    client: RawClient, data: bytes, code: int
) -> None:
    if code == 1007:
        data = client.frame(data)
    client.sock.sendall(data)
    assert client.close_code() == code


def test_a_client_that_does_not_read_makes_the_server_stop_reading(server: Server) -> None:
    raw = RawClient(server.port)
    raw.send({"type": "reset"})
    raw.reply()
    frame = raw.frame(json.dumps({"type": "step", "data": {"message": "z" * 4000}}))
    sent = 0
    stop = threading.Event()

    def write() -> None:  # blocks in sendall once the server stops reading
        nonlocal sent
        while not stop.is_set() and sent < 20_000:
            raw.sock.sendall(frame)
            sent += 1

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    last, still_since = -1, time.monotonic()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and time.monotonic() - still_since < 1.0:
        if sent != last:
            last, still_since = sent, time.monotonic()
        time.sleep(0.02)
    assert sent == last and sent < 20_000, "the server kept reading from a client that never reads"
    protocol = server.protocol_of(raw)
    assert protocol.transport.get_write_buffer_size() < 1 << 20  # bounded, not `sent` replies
    stop.set()
    replies = 0
    while writer.is_alive() or replies < sent:  # reading lets the writer finish its frame
        assert raw.reply()["data"]["observation"]["count"] == replies + 1  # each once, in order
        replies += 1
    assert replies == sent
    raw.close()


def test_a_resumable_session_steps_inline_and_a_repeat_is_not_stepped_again(
    server: Server,
) -> None:
    raw = RawClient(server.port, {"X-OpenEnv-Session": "inline-resume-key-0001"})
    try:
        assert "x-openenv-resume-token" in raw.headers.lower()
        raw.send({"type": "reset", "seq": 1})
        raw.reply()
        for seq in range(2, WARM_UP + 2):
            raw.step("warm", seq=seq)
        before = server.inline_replies()
        first = raw.step("once", seq=WARM_UP + 2)
        assert server.inline_replies() - before == 1
        again = raw.step("once", seq=WARM_UP + 2)  # a repeat: the kept reply, not a second step
        assert again == first
        older = raw.step("old", seq=3)
        assert older["type"] == "error"
        raw.send({"type": "state", "seq": WARM_UP + 3})
        assert raw.reply()["data"]["step_count"] == WARM_UP + 1
    finally:
        raw.close()


def test_the_runtime_client_gets_the_same_results(server: Server) -> None:
    with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
        ws.send('{"type":"reset"}')
        ws.recv()
        for i in range(WARM_UP + 10):
            ws.send(json.dumps({"type": "step", "data": {"message": "m" * (i % 5)}}))
            reply = json.loads(ws.recv())
            assert reply["data"]["observation"]["count"] == i + 1
            assert reply["data"]["reward"] == float(i % 5)


def test_a_declined_frame_is_asked_about_once(server: Server, client: RawClient) -> None:
    protocol = server.protocol_of(client)
    handler = protocol.frame_handler
    assert handler is not None
    asked: list[str] = []

    def counting(frame: str) -> str | None:
        asked.append(frame)
        return handler(frame)

    protocol.frame_handler = counting
    client.send({"type": "state"})  # declined: answered through ASGI
    assert client.reply()["type"] == "state"
    assert client.step("then")["type"] == "observation"
    assert [json.loads(f)["type"] for f in asked] == ["state", "step"]


def test_with_the_shortcut_turned_off_every_frame_goes_through_asgi(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENENV_INLINE_FRAMES", "0")
    with Server() as off:
        raw = RawClient(off.port)
        raw.send({"type": "reset"})
        assert raw.reply()["type"] == "observation"
        for i in range(WARM_UP + 10):
            assert raw.step(f"m{i}")["data"]["observation"]["count"] == i + 1
        assert off.inline_replies() == 0
        assert all(p.frame_handler is None for p in off.protocols())
        raw.close()


# The server of ``python -m openenv_runtime.serve``, told that uvicorn and websockets are of a
# version the shortcut is not tested with.
UNTESTED = (
    "import sys\n"
    "from openenv_runtime.server.ws import inline_frames\n"
    "inline_frames.installed_version = lambda distribution: '0.1.0'\n"
    "from openenv_runtime.serve import main\n"
    "main(sys.argv[1:])\n"
)


def test_an_untested_version_serves_every_frame_through_asgi_and_says_so_once(
    tmp_path: Path,
) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", UNTESTED, "tests.fixtures.ticks:app", "--port", str(port)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": SOURCES, "LOG_LEVEL": "warning"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            assert wait_until(lambda: healthy(url) or process.poll() is not None, timeout=60)
            for _ in range(2):  # connections work, steps past the warm-up included
                with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=30) as ws:
                    ws.send('{"type":"reset"}')
                    ws.recv(timeout=30)
                    for _ in range(WARM_UP + 10):
                        ws.send('{"type":"step","data":{}}')
                        assert json.loads(ws.recv(timeout=30))["type"] == "observation"
        finally:
            stop_process(process)
    text = log.read_text(errors="replace")
    assert text.count("through ASGI") == 1, text
    assert "uvicorn 0.1.0, websockets 0.1.0" in text, text

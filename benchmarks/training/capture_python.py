"""The Python a capture-proxy call runs, without sockets: ``rollouts.md`` cites it.

    python benchmarks/training/capture_python.py [--calls 5000]

One process, fake transports: the proxy's HTTP protocol (``capture.server.protocol_for``, or
uvicorn's own with its ASGI path when the runtime on ``PYTHONPATH`` has none, for an older
checkout) is fed an aiohttp-shaped chat completion again and again; its one upstream
connection answers each at once with the stand-in's answer (``say_policy``, 32 sampled tokens,
about 3.5 kB). Prints the CPU time (``time.process_time``) per call, then per entry of the
session's read-back. No kernel, no wake-ups: what is left of a call's cost in the overhead
part of ``rollouts.py`` is theirs. Compare two checkouts by running it under each one's
``PYTHONPATH`` (``runtime/`` first).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import uvloop
from rollouts_app import say_policy
from uvicorn.config import Config
from uvicorn.server import ServerState

from openenv_runtime.capture import CaptureProxy
from openenv_runtime.capture import upstream as capture_upstream
from openenv_runtime.llm.tokens import TOKEN_OPTIONS
from openenv_runtime.testing.stub_llm import StubLLM

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "x" * 200}], "max_tokens": 32}


class _Transport(asyncio.Transport):
    """Hands every write to ``peer``; never closes, never pushes back."""

    def __init__(self, peer: Any) -> None:
        super().__init__()
        self.peer = peer

    def write(self, data: Any) -> None:
        self.peer(bytes(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5), "sockname": ("127.0.0.1", 6)}.get(name, default)

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        return None

    def pause_reading(self) -> None:
        return None

    def resume_reading(self) -> None:
        return None


def _protocol_class(proxy: CaptureProxy) -> Any:
    try:
        from openenv_runtime.capture.server import protocol_for
    except ImportError:  # an older runtime: uvicorn's protocol, the forwarded calls via ASGI
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return HttpToolsProtocol
    return protocol_for(proxy)


async def measure(answer_body: bytes, calls: int) -> tuple[float, float]:
    answer = (
        b"HTTP/1.1 200 OK\r\ndate: x\r\nserver: uvicorn\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n" % len(answer_body) + answer_body
    )
    loop = asyncio.get_running_loop()
    proxy = CaptureProxy("http://127.0.0.1:9")
    session = proxy.create_session("http://proxy")
    # the harness reaches in where a socket would be: the upstream client's connection class
    # (and, in an older runtime, the proxy's client by its private name)
    client = getattr(proxy, "model_server", None) or proxy._upstream
    connection = capture_upstream._Connection(client)
    connection.connection_made(
        _Transport(lambda _: loop.call_soon(connection.data_received, answer))
    )
    client.keep(connection)
    protocol_class = _protocol_class(proxy)
    config = Config(proxy.app, http=protocol_class, access_log=False)
    config.load()
    answered = asyncio.Event()

    def to_client(data: bytes) -> None:
        if data.endswith(b"}"):
            answered.set()

    protocol = protocol_class(config=config, server_state=ServerState(), app_state={}, _loop=loop)
    protocol.connection_made(_Transport(to_client))
    body = orjson.dumps({**REQUEST, **TOKEN_OPTIONS})
    request = (
        b"POST /sessions/%s/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8300\r\n"
        b"User-Agent: Python/3.11 aiohttp/3.13\r\nAccept: */*\r\n"
        b"Accept-Encoding: gzip, deflate\r\ncontent-type: application/json\r\n"
        b"authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
        % (session["session_id"].encode(), session["api_key"].encode(), len(body))
    ) + body

    async def play(n: int) -> None:
        for _ in range(n):
            answered.clear()
            protocol.data_received(request)
            await answered.wait()

    await play(200)  # warm-up
    started = time.process_time()
    await play(calls)
    per_call = (time.process_time() - started) / calls
    started = time.process_time()
    entries = proxy.trace_entries(session["session_id"])
    per_entry = (time.process_time() - started) / len(entries)
    return per_call, per_entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    args = parser.parse_args()
    with StubLLM(say_policy).serve() as llm:
        answer = httpx.post(f"{llm}/v1/chat/completions", json={**REQUEST, **TOKEN_OPTIONS})
    per_call, per_entry = uvloop.run(measure(answer.content, args.calls))
    print(f"runtime: {Path(sys.modules['openenv_runtime'].__file__ or '').parent}")
    print(f"python per forwarded call: {per_call * 1e6:.1f} us")
    print(f"read-back per entry: {per_entry * 1e6:.1f} us")


if __name__ == "__main__":
    main()

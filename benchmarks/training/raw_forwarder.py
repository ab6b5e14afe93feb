"""The floor under the capture proxy's CPU per call: bytes relayed, nothing parsed.

``python benchmarks/training/raw_forwarder.py --port P --upstream-port Q`` relays every
connection to ``127.0.0.1:Q`` byte for byte (a connection upstream per connection in), on the
same event loop (uvloop) and interpreter as ``openenv capture``. It reads no HTTP, adds no
token options and records nothing: what it costs per call is the sockets, the wake-ups and the
event loop, a floor no Python proxy on this machine goes under. ``rollouts.py --parts overhead
--floor`` runs it in the same rounds as the proxy.
"""

from __future__ import annotations

import argparse
import asyncio
import gc

import uvloop


class _Upstream(asyncio.Protocol):
    def __init__(self, client: _Client) -> None:
        self.client = client

    def data_received(self, data: bytes) -> None:
        self.client.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.transport.close()


class _Client(asyncio.Protocol):
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.upstream: asyncio.Transport | None = None
        self.waiting: list[bytes] = []
        self.connecting: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.connecting = asyncio.ensure_future(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        upstream, _ = await loop.create_connection(
            lambda: _Upstream(self), "127.0.0.1", self.upstream_port
        )
        self.upstream = upstream
        for data in self.waiting:
            upstream.write(data)
        self.waiting = []

    def data_received(self, data: bytes) -> None:
        if self.upstream is None:
            self.waiting.append(data)
        else:
            self.upstream.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.upstream is not None:
            self.upstream.close()


async def _serve(port: int, upstream_port: int) -> None:
    loop = asyncio.get_running_loop()
    await loop.create_server(lambda: _Client(upstream_port), "127.0.0.1", port)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream-port", type=int, required=True)
    args = parser.parse_args()
    gc.freeze()  # as openenv capture does (serve.tune_gc)
    uvloop.run(_serve(args.port, args.upstream_port))


if __name__ == "__main__":
    main()

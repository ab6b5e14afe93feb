"""A TCP proxy on loopback that can cut its connections: dropped networks, on demand.

Runs its own event loop in a background thread. ``cut_all()`` aborts every connection going
through it (both sides see a reset, as after a network failure or a load balancer restart);
``cut_after_bytes`` makes it cut a connection at random once enough bytes went upstream.
"""

from __future__ import annotations

import asyncio
import random
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class CuttingProxy:
    def __init__(self, target_port: int, seed: int = 0) -> None:
        self.target_port = target_port
        self.random = random.Random(seed)
        self.cut_probability = 0.0  # per client→server chunk: chance to cut before forwarding
        self.cut_reply_probability = 0.0  # per server→client chunk: chance to cut instead
        self.cuts = 0
        self.connections = 0
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._sock = sock
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="proxy")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, sock=self._sock)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self.connections += 1
        pair = (writer, up_writer)
        self._pairs.add(pair)

        async def pipe(
            src: asyncio.StreamReader, dst: asyncio.StreamWriter, upstream: bool
        ) -> None:
            try:
                while data := await src.read(65536):
                    chance = self.cut_probability if upstream else self.cut_reply_probability
                    if chance and self.random.random() < chance:
                        self._abort(pair, cut=True)
                        return
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                self._abort(pair)

        await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))

    def _abort(
        self, pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter], cut: bool = False
    ) -> None:
        if pair in self._pairs:
            self._pairs.discard(pair)
            self.cuts += cut
            for w in pair:
                w.transport.abort()

    def cut_all(self) -> int:
        """Abort every open connection now; returns how many."""

        async def cut() -> int:
            pairs = list(self._pairs)
            for pair in pairs:
                self._abort(pair, cut=True)
            return len(pairs)

        return asyncio.run_coroutine_threadsafe(cut(), self._loop).result(10)

    def stop(self) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for pair in list(self._pairs):
                self._abort(pair)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)

        async def settle() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(settle(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


@contextmanager
def cutting_proxy(target_url: str, seed: int = 0) -> Iterator[CuttingProxy]:
    proxy = CuttingProxy(int(target_url.rsplit(":", 1)[1]), seed)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()

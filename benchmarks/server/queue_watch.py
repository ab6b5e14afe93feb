"""What the inline frame path's check "the connection's task waits in receive()" costs, two ways.

    python benchmarks/server/queue_watch.py            # prints a table, writes queue_watch_latest.md

``inline_frames.InlineFrames._may_answer`` must know that the connection's task waits in
``receive()`` for a frame with none queued. asyncio's ``Queue`` has no public way to ask whether
a ``get()`` waits; the shortcut reads ``Queue._getters``. The public way is a ``Queue`` subclass
whose ``get()`` counts its waiting callers, which adds a coroutine to every ``get()``: every
frame that takes the ASGI trip pays it. This measures, per call, on one event loop (asyncio's
and uvloop's): ``get()`` of a ready item, plain against the counting subclass; and the check
itself, ``bool(q._getters) and not q._queue`` against ``not q.empty()``-style public calls.
Numbers move with the machine's load (say it); the differences are what to read.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "queue_watch_latest.md"
N = 200_000
ROUNDS = 3


class Counting(asyncio.Queue[Any]):
    """A queue that knows, through its public methods alone, whether a ``get()`` waits."""

    waiting = 0

    async def get(self) -> Any:
        self.waiting += 1
        try:
            return await super().get()
        finally:
            self.waiting -= 1


async def per_get(cls: type[asyncio.Queue[Any]]) -> float:
    queue = cls()
    start = time.perf_counter()
    for i in range(N):
        queue.put_nowait(i)
        await queue.get()
    return (time.perf_counter() - start) / N


def per_check(public: bool) -> float:
    queue: asyncio.Queue[Any] = asyncio.Queue()
    start = time.perf_counter()
    if public:
        for _ in range(N):
            queue.empty()
    else:
        for _ in range(N):
            bool(queue._getters) and not queue._queue  # type: ignore[attr-defined]
    return (time.perf_counter() - start) / N


async def one_round() -> tuple[float, float, float, float]:
    return (
        await per_get(asyncio.Queue),
        await per_get(Counting),
        per_check(False),
        per_check(True),
    )


def main() -> None:
    rows = []
    loops: list[tuple[str, Any]] = [("asyncio", asyncio.new_event_loop)]
    try:
        import uvloop

        loops.append(("uvloop", uvloop.new_event_loop))
    except ImportError:
        pass
    for name, make in loops:
        for _ in range(ROUNDS):
            loop = make()
            try:
                plain, counting, private, public = loop.run_until_complete(one_round())
            finally:
                loop.close()
            rows.append((name, plain, counting, private, public))
    load = os.getloadavg()[0]
    lines = [
        f"# queue_watch: per call, ns (load average {load:.2f}, {N:,} calls, {ROUNDS} rounds)",
        "",
        "| loop | get() plain | get() counting | extra per ASGI frame | _getters/_queue check | empty() |",
        "|---|---|---|---|---|---|",
    ]
    for name, plain, counting, private, public in rows:
        lines.append(
            f"| {name} | {plain * 1e9:.0f} | {counting * 1e9:.0f} | "
            f"+{(counting - plain) * 1e9:.0f} | {private * 1e9:.0f} | {public * 1e9:.0f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    OUT.write_text(text)


if __name__ == "__main__":
    main()

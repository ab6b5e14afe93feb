"""Collecting the reference cycles each closed connection leaves behind."""

from __future__ import annotations

import asyncio
import gc

from openenv_runtime.server.sessions.registry import SessionManager

CYCLE_COLLECTION_EVERY = 2000
"""Sessions closed between two full garbage collections, at least."""


async def collect_connection_cycles(
    manager: SessionManager, every: int = CYCLE_COLLECTION_EVERY
) -> None:
    """Collect reference cycles once ``every`` sessions, and at least as many as are open, closed.

    uvicorn's per-connection HTTP protocol object (``HttpToolsProtocol`` with its parser,
    transport and flow control, about 17 objects) lives in a reference cycle, so only the
    cyclic collector frees it. ``serve`` makes full collections rare (see its GC tuning), and
    without this they piled up: RSS grew by ~0.45 KiB per session opened and closed.

    A full collection walks everything alive that start-up did not freeze: its cost grows
    with the sessions open (0.3 ms with none, 38 ms with 1,000), while what it frees grows
    with the sessions closed since the last one. Waiting for as many closes as there are open
    sessions keeps the cost per closed session flat (tens of µs) and the uncollected garbage
    within the size of what is alive. A burst of new sessions, which closes none, collects
    nothing: counted per session opened, the collections of one replica opening 8,192
    sessions at once took 18% of its CPU (``benchmarks/scale/connect_latency.md``).
    """
    seen = manager.total_opened - manager.active
    while True:
        await asyncio.sleep(1.0)
        closed = manager.total_opened - manager.active
        if closed - seen >= max(every, manager.active):
            seen = closed
            gc.collect()

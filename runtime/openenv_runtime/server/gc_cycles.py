"""Collecting the reference cycles each closed connection leaves behind."""

from __future__ import annotations

import asyncio
import gc

from .sessions import SessionManager

CYCLE_COLLECTION_EVERY = 2000
"""Sessions opened between two full garbage collections."""


async def collect_connection_cycles(
    manager: SessionManager, every: int = CYCLE_COLLECTION_EVERY
) -> None:
    """Collect reference cycles every ``every`` sessions.

    uvicorn's per-connection HTTP protocol object (``HttpToolsProtocol`` with its parser,
    transport and flow control, about 17 objects) lives in a reference cycle, so only the
    cyclic collector frees it. ``serve`` makes full collections rare (see its GC tuning), and
    without this they piled up: RSS grew by ~0.45 KiB per session opened and closed. A full
    collection here costs little, because what start-up created is frozen out of its sight:
    measured 0.3 ms with no session open and 38 ms with 1,000 open (about 19 µs per session
    opened, amortized).
    """
    seen = manager.total_opened
    while True:
        await asyncio.sleep(1.0)
        if manager.total_opened - seen >= every:
            seen = manager.total_opened
            gc.collect()

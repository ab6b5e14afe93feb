"""The garbage collector's running time, so the timing of a call can leave it out.

The server decides where a plain ``step()``, constructor or ``close()`` runs by timing the
calls (``step_placement.py``, ``call_cost.py``). A collection of the older generations walks
the whole heap and may land in any call: tens of milliseconds in a process holding a model, a
dataset or a test suite. That is the heap's cost, not the call's, and must not send a cheap
environment to the thread pool for good. :data:`GC_SECONDS` adds up the time of every
collection in this process (one callback per collection, a few hundred nanoseconds); a timer
subtracts what it grew by during the call, and only when the call already looks slow.
"""

from __future__ import annotations

import gc
import time
from typing import Any


class _GcClock:
    __slots__ = ("seconds", "started")

    def __init__(self) -> None:
        self.seconds = 0.0  # every collection's wall time, added up since import
        self.started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
        elif self.started:
            self.seconds += time.perf_counter() - self.started
            self.started = 0.0


GC_SECONDS = _GcClock()
gc.callbacks.append(GC_SECONDS)

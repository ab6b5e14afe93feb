"""Environment instances constructed ahead of demand, so a session does not wait for ``__init__``.

The pool keeps up to ``size`` idle instances, never more than the free slots (capacity minus
sessions), and refills in the background after each take and each released session. Instances
that were never handed out are closed (once) on shutdown.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from .adapter import EnvRunner

logger = logging.getLogger("openenv_runtime.server")


class WarmPool:
    def __init__(self, runner: EnvRunner, size: int, free_slots: Callable[[], int]) -> None:
        self.runner = runner
        self.size = size
        self.free_slots = free_slots
        self.ready: deque[Any] = deque()
        self.building = 0
        self.closed = False
        self._refill: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self.ready)

    def _target(self) -> int:
        return min(self.size, max(self.free_slots(), 0))

    async def take(self) -> Any:
        """A ready instance when there is one, else a new one built now."""
        env = self.ready.popleft() if self.ready else None
        self.kick()
        return env if env is not None else await self.runner.create()

    def kick(self) -> None:
        """Start refilling in the background, unless already refilling or full."""
        if self.size <= 0 or self.closed or (self._refill is not None and not self._refill.done()):
            return
        if len(self.ready) + self.building < self._target():
            self._refill = asyncio.get_running_loop().create_task(
                self._fill(), name="openenv-warm-pool"
            )

    async def _fill(self) -> None:
        while not self.closed and len(self.ready) + self.building < self._target():
            self.building += 1
            try:
                env = await self.runner.create()
            except Exception:
                logger.exception("warm pool: creating an environment failed; retrying on demand")
                return
            finally:
                self.building -= 1
            if self.closed or len(self.ready) >= self._target():
                await self._close(env)  # shut down, or the slots filled meanwhile
            else:
                self.ready.append(env)

    async def _close(self, env: Any) -> None:
        try:
            await self.runner.close(env)
        except Exception:
            logger.exception("close() of %s raised", type(env).__qualname__)

    async def close(self, timeout: float = 30.0) -> None:
        """Close every instance never handed out (and one being built, once it exists)."""
        self.closed = True
        refill = self._refill
        if refill is not None and not refill.done():
            # A constructor in a thread cannot be interrupted: let it finish, then close its result.
            await asyncio.wait({refill}, timeout=timeout)
        while self.ready:
            await self._close(self.ready.popleft())

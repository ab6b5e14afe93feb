"""Environment instances constructed ahead of demand, so a session does not wait for ``__init__``.

The pool keeps up to ``size`` idle instances, never more than the free slots (capacity minus
sessions), and refills in the background after each take and after each released session's
instance is closed. A session that finds the pool empty while an instance is being built
waits for that one rather than building a second beside it, so instances alive at once never
exceed the capacity. Instances that were never handed out are closed (once) on shutdown.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from openenv_runtime.server.running.adapter import EnvRunner

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
        self._waiting: deque[asyncio.Future[Any]] = deque()  # takers waiting for a build

    def __len__(self) -> int:
        return len(self.ready)

    def _target(self) -> int:
        return min(self.size, max(self.free_slots(), 0))

    async def take(self) -> Any:
        """A ready instance when there is one, else the one being built, else a new one."""
        env = self.ready.popleft() if self.ready else None
        if env is None and self.building > len(self._waiting):
            waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                env = await waiter
            except BaseException:  # the taker went away: close what was handed to it
                if waiter.done() and not waiter.cancelled() and waiter.result() is not None:
                    asyncio.get_running_loop().create_task(self._close(waiter.result()))
                raise
            finally:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)
        self.kick()
        return env if env is not None else await self.runner.create()

    def _hand_over(self, env: Any) -> bool:
        """Give ``env`` to a waiting taker; False when none waits."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(env)
                return True
        return False

    def _release_waiters(self) -> None:
        """A build failed: the takers build their own (None means: make one)."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def kick(self) -> None:
        """Start refilling in the background, unless already refilling or full."""
        if self.size <= 0 or self.closed or (self._refill is not None and not self._refill.done()):
            return
        if len(self.ready) + self.building < self._target():
            self._refill = asyncio.get_running_loop().create_task(
                self._fill(), name="openenv-warm-pool"
            )

    async def _fill(self) -> None:
        try:
            while not self.closed and len(self.ready) + self.building < self._target():
                self.building += 1
                try:
                    env = await self.runner.create()
                except Exception:
                    logger.exception(
                        "warm pool: creating an environment failed; retrying on demand"
                    )
                    return
                finally:
                    self.building -= 1
                if not self.closed and self._hand_over(env):
                    continue
                if self.closed or len(self.ready) >= self._target():
                    await self._close(env)  # shut down, or the slots filled meanwhile
                else:
                    self.ready.append(env)
        finally:
            self._release_waiters()  # nothing is being built now: whoever waits builds its own

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

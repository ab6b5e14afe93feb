"""One lockstep batch of a pool: every slot's request sent at once, each reply parsed as it comes.

:class:`SlotReply` receives one slot's raw reply straight from the connection (it is the
``ReplySink`` the session sends to); :class:`Batch` counts the replies still due and ends the
wait when none is left, or when the batch's time is up.
"""

from __future__ import annotations

import asyncio

from ..errors import EnvError
from ..protocol import reply_data
from .port import Result, SessionPort, SlotPool, as_env_error
from .transport import ConnectionLost

CAPACITY_REACHED = "CAPACITY_REACHED"


class Batch:
    """One batched call: its results, how many replies are still due, and its end."""

    __slots__ = ("finished", "moves", "pool", "remaining", "results")

    def __init__(self, pool: SlotPool, loop: asyncio.AbstractEventLoop) -> None:
        self.pool = pool
        self.results: list[Result | None] = [None] * pool.size
        self.remaining = 1  # a guard, dropped once every request is sent
        self.finished: asyncio.Future[None] = loop.create_future()
        self.moves: list[int] = []

    def one_done(self) -> None:
        self.remaining -= 1
        if self.remaining == 0 and not self.finished.done():
            self.finished.set_result(None)

    def expire(self) -> None:
        if not self.finished.done():
            self.finished.set_result(None)


class SlotReply:
    """Receives one slot's reply straight from the connection and parses it on the spot.

    Cheaper than a future per slot (no callbacks through the event loop, no ``asyncio.wait``),
    and the parsing overlaps with the server still working on the other slots.
    """

    __slots__ = ("batch", "client", "finished", "index")

    def __init__(self, batch: Batch, index: int, client: SessionPort) -> None:
        self.batch = batch
        self.index = index
        self.client = client
        self.finished = False

    def done(self) -> bool:
        return self.finished

    def set_result(self, raw: str | bytes) -> None:
        if self.finished:
            return
        self.finished = True
        client = self.client
        result: Result
        try:
            result = client.parse_result(reply_data(raw))
        except EnvError as error:
            if error.code == CAPACITY_REACHED:
                self.batch.moves.append(self.index)
            result = error
        except Exception as exc:
            result = as_env_error(exc, "CLIENT_ERROR")
        self.batch.results[self.index] = result
        self.batch.one_done()

    def set_exception(self, exception: BaseException) -> None:
        if self.finished:
            return
        self.finished = True
        lost = (
            exception if isinstance(exception, ConnectionLost) else ConnectionLost(str(exception))
        )
        self.batch.results[self.index] = self.batch.pool.fail_slot(
            self.index, self.client.lost(lost)
        )
        self.batch.one_done()

"""Code mode's worker slots, shared fairly by the sessions and clients of one server process.

A run takes a slot before its worker starts and gives it back when the worker is gone. When
every slot is taken, runs wait in one queue that is served in turn, not first come first
served: the next free slot goes to the waiting run whose client, then whose session, was
served longest ago (one never served goes first), so a session that loops long runs cannot
keep another session's one-line run waiting for more than about one run. Besides the total,

* a session holds at most ``per_session`` slots at once (half of them);
* a client (its token with auth on, else its address: ``Session.client``) at most
  ``per_client`` (``CODE_SLOTS_PER_CLIENT``; by default half of them on a public server,
  no cap on a local one, where every session is the same client);
* a run waits at most ``wait_s`` (``CODE_WAIT_TIMEOUT``) for its slot, then gets
  :data:`~openenv_runtime.protocol.ErrorCode.CAPACITY_REACHED` with a message.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field

SLOT_WAIT_S = 30.0
"""Seconds a run waits for a slot before it is refused (``CODE_WAIT_TIMEOUT``)."""
REMEMBERED = 4096  # sessions and clients whose last turn is kept (the oldest are forgotten)


@dataclass(eq=False, slots=True)
class Ticket:
    """One run's place: waiting in the queue, then holding a slot."""

    session: Hashable
    client: str | None
    arrival: int
    granted: threading.Event = field(default_factory=threading.Event)

    @property
    def party(self) -> Hashable:
        """Whom the per-client share counts: the client, else the session alone."""
        return ("client", self.client) if self.client is not None else ("session", self.session)


class CodeSlots:
    """``total`` slots, a share per session and per client, and a queue served in turn."""

    def __init__(
        self, total: int, per_client: int | None = None, wait_s: float = SLOT_WAIT_S
    ) -> None:
        self.total = total
        self.per_session = max(1, total // 2)
        self.per_client = per_client
        self.wait_s = wait_s
        self._lock = threading.Lock()
        self._running = 0
        self._by_session: Counter[Hashable] = Counter()
        self._by_party: Counter[Hashable] = Counter()
        self._waiting: list[Ticket] = []
        self._arrivals = itertools.count()
        self._turns = itertools.count()
        self._served: OrderedDict[Hashable, int] = OrderedDict()
        # since start, for /metrics: runs given a slot, their seconds in the queue, runs refused
        self.granted_runs = 0
        self.wait_seconds = 0.0
        self.refused_runs = 0

    def configure(self, per_client: int | None, wait_s: float) -> None:
        """Apply a server's settings (a client's share, the wait bound)."""
        with self._lock:
            self.per_client, self.wait_s = per_client, wait_s
            self._grant()

    @property
    def running(self) -> int:
        """Runs holding a slot now."""
        return self._running

    def queued(self) -> int:
        """Runs waiting for a slot now."""
        with self._lock:
            return len(self._waiting)

    def acquire(self, session: Hashable, client: str | None = None) -> Ticket | None:
        """A slot for a run of ``session`` (by ``client``); None when none came within
        ``wait_s``. Give it back with :meth:`release`."""
        start = time.monotonic()
        with self._lock:
            ticket = Ticket(session, client, next(self._arrivals))
            self._waiting.append(ticket)
            self._grant()
            wait_s = self.wait_s
        granted = ticket.granted.wait(wait_s)
        with self._lock:
            if granted or ticket.granted.is_set():  # (or granted just as the wait ended)
                self.granted_runs += 1
                self.wait_seconds += time.monotonic() - start
                return ticket
            self._waiting.remove(ticket)
            self.refused_runs += 1
            self._grant()  # a share it held back may now go to someone else
        return None

    def release(self, ticket: Ticket) -> None:
        with self._lock:
            self._running -= 1
            self._by_session[ticket.session] -= 1
            if self._by_session[ticket.session] <= 0:
                del self._by_session[ticket.session]
            self._by_party[ticket.party] -= 1
            if self._by_party[ticket.party] <= 0:
                del self._by_party[ticket.party]
            self._grant()

    def _eligible(self, ticket: Ticket) -> bool:
        if self._by_session[ticket.session] >= self.per_session:
            return False
        return (
            ticket.client is None
            or self.per_client is None
            or self._by_party[ticket.party] < self.per_client
        )

    def _order(self, ticket: Ticket) -> tuple[int, int, int]:
        served = self._served
        return (
            served.get(ticket.party, -1),
            served.get(("session", ticket.session), -1),
            ticket.arrival,
        )

    def _grant(self) -> None:
        """Hand free slots to waiting runs, in turn (called with the lock held)."""
        while self._running < self.total and self._waiting:
            eligible = [t for t in self._waiting if self._eligible(t)]
            if not eligible:
                return
            ticket = min(eligible, key=self._order)
            self._waiting.remove(ticket)
            self._running += 1
            self._by_session[ticket.session] += 1
            self._by_party[ticket.party] += 1
            turn = next(self._turns)
            for key in (ticket.party, ("session", ticket.session)):
                self._served[key] = turn
                self._served.move_to_end(key)
            while len(self._served) > REMEMBERED:
                self._served.popitem(last=False)
            ticket.granted.set()

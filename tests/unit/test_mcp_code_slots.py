"""Code mode's worker slots: the share of a session and of a client, the order of the queue."""

from __future__ import annotations

import threading
from collections.abc import Hashable

import pytest

from openenv_runtime.mcp import code_slots
from openenv_runtime.mcp.code_slots import CodeSlots, Ticket


class Waiter:
    """A run waiting for a slot on its own thread."""

    def __init__(self, slots: CodeSlots, session: Hashable, client: str | None = None) -> None:
        self.ticket: Ticket | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._take, args=(slots, session, client))
        self.thread.start()

    def _take(self, slots: CodeSlots, session: Hashable, client: str | None) -> None:
        self.ticket = slots.acquire(session, client)
        self.done.set()


def queue(slots: CodeSlots, *runs: tuple[Hashable, str | None]) -> list[Waiter]:
    """Start ``runs`` one after another, each queued before the next arrives."""
    waiters = []
    for session, client in runs:
        before = slots.queued()
        waiters.append(Waiter(slots, session, client))
        for _ in range(2000):
            if slots.queued() > before or waiters[-1].done.is_set():
                break
            threading.Event().wait(0.005)
    return waiters


def granted(waiters: list[Waiter]) -> list[int]:
    return [i for i, w in enumerate(waiters) if w.done.is_set() and w.ticket is not None]


def wait_granted(waiters: list[Waiter], count: int) -> list[int]:
    for _ in range(2000):
        if len(granted(waiters)) >= count:
            break
        threading.Event().wait(0.005)
    return granted(waiters)


def release(slots: CodeSlots, waiter: Waiter) -> None:
    assert waiter.ticket is not None
    slots.release(waiter.ticket)
    waiter.thread.join()


def test_the_least_recently_served_session_goes_next() -> None:
    slots = CodeSlots(1, wait_s=30)
    first = slots.acquire("looper")
    assert first is not None
    # the looper queues again before the newcomer arrives; FIFO would serve it first
    waiters = queue(slots, ("looper", None), ("newcomer", None))
    slots.release(first)
    assert wait_granted(waiters, 1) == [1]
    release(slots, waiters[1])
    assert wait_granted(waiters, 2) == [0, 1]
    release(slots, waiters[0])


def test_clients_take_turns_before_their_sessions() -> None:
    slots = CodeSlots(1, wait_s=30)
    first = slots.acquire("a1", "client-a")
    assert first is not None
    # a second session of client a is new, but its client was just served
    waiters = queue(slots, ("a2", "client-a"), ("b1", "client-b"))
    slots.release(first)
    assert wait_granted(waiters, 1) == [1]
    release(slots, waiters[1])
    assert wait_granted(waiters, 2) == [0, 1]
    release(slots, waiters[0])


def test_a_session_and_a_client_hold_at_most_their_share() -> None:
    slots = CodeSlots(4, per_client=2, wait_s=30)
    assert slots.per_session == 2
    held = [slots.acquire("s1", "a"), slots.acquire("s1", "b")]
    waiters = queue(slots, ("s1", "c"), ("s2", "a"), ("s3", "a"), ("s4", "c"))
    # s1 is at its share (2), client a at 2 after s2: s3 waits though two slots are free
    assert wait_granted(waiters, 2) == [1, 3]
    assert slots.running == 4 and slots.queued() == 2
    for ticket in held:
        assert ticket is not None
        slots.release(ticket)
    assert wait_granted(waiters, 4) == [0, 1, 2, 3]
    for waiter in waiters:
        release(slots, waiter)
    assert slots.running == 0


def test_a_run_that_waits_too_long_gets_none_and_leaves_the_queue() -> None:
    slots = CodeSlots(1, wait_s=0.05)
    held = slots.acquire("busy")
    assert held is not None
    assert slots.acquire("late") is None
    assert slots.queued() == 0
    slots.release(held)
    again = slots.acquire("late")
    assert again is not None
    slots.release(again)


def test_configure_applies_a_servers_settings_and_grants_what_it_frees() -> None:
    slots = CodeSlots(2, per_client=1, wait_s=30)
    held = slots.acquire("s1", "a")
    assert held is not None
    waiters = queue(slots, ("s2", "a"))
    assert granted(waiters) == []
    slots.configure(per_client=None, wait_s=5)
    assert wait_granted(waiters, 1) == [0] and slots.wait_s == 5
    slots.release(held)
    release(slots, waiters[0])


def test_what_is_remembered_of_past_turns_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(code_slots, "REMEMBERED", 10)
    slots = CodeSlots(1)
    for n in range(50):
        ticket = slots.acquire(f"session-{n}", f"client-{n}")
        assert ticket is not None
        slots.release(ticket)
    assert len(slots._served) == 10


def test_runs_granted_refused_and_their_waits_are_counted() -> None:
    slots = CodeSlots(1, wait_s=1.0)
    first = slots.acquire("a")
    assert first is not None
    assert slots.acquire("b") is None  # waited its wait_s, then refused
    slots.release(first)
    second = slots.acquire("b")
    assert second is not None
    slots.release(second)
    assert (slots.granted_runs, slots.refused_runs) == (2, 1)
    # the refused run's wait (at least wait_s) is not added to the granted runs' (none waited)
    assert 0 <= slots.wait_seconds < 1.0

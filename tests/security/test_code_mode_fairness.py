"""Code mode's worker slots are shared fairly (issue 30, Medium 5).

Eight sessions that loop long runs held all four slots, and another session's one-line run
waited 28-47 s behind them. Here the long runs are held open by a tool until the test lets
one end, so the order in which sessions get slots is asserted without timing anything: the
newcomer's run must be the next to start once one run ends, and another client's run must
find a slot while one client's sessions loop.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fastmcp import FastMCP

from openenv_runtime import Observation, State
from openenv_runtime.mcp import MCPEnvironment, code_mode
from openenv_runtime.mcp.code_slots import CodeSlots

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="code mode: Linux and macOS")
WAIT_S = 120.0  # bound on every wait below (a loaded machine starts workers slowly)
LOOPERS = 8
SLOTS = 4


class Gate:
    """Holds each run inside its ``hold()`` tool call until the test lets it go."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.entered = 0
        self.permits = 0
        self.open = False

    def hold(self) -> int:
        with self.cond:
            self.entered += 1
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.permits > 0 or self.open, WAIT_S)
            if self.permits > 0:
                self.permits -= 1
            return self.entered

    def let(self, runs: int) -> None:
        with self.cond:
            self.permits += runs
            self.cond.notify_all()

    def wait_entered(self, runs: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.entered >= runs, WAIT_S), self.entered

    def release_all(self) -> None:
        with self.cond:
            self.open = True
            self.cond.notify_all()


class Holding(MCPEnvironment):
    """One session's environment: ``hold()`` blocks on the gate, ``entered()`` counts."""

    def __init__(self, gate: Gate, client: str | None = None) -> None:
        server = FastMCP("holding")

        @server.tool
        def hold() -> int:
            return gate.hold()

        @server.tool
        def entered() -> int:
            return gate.entered

        super().__init__(server)
        self.code_client = client  # what the server sets from the session's client

    def reset(self, **kwargs: Any) -> Observation:
        return Observation()

    @property
    def state(self) -> State:
        return State()


def wait_queued(count: int) -> None:
    """Until ``count`` runs wait for a slot (bounded)."""
    done = threading.Event()
    for _ in range(int(WAIT_S / 0.05)):
        if code_mode.slots.queued() == count:
            return
        done.wait(0.05)
    raise AssertionError(f"{code_mode.slots.queued()} runs queued, not {count}")


@pytest.fixture
def loopers() -> Iterator[tuple[Gate, Any]]:
    """Start ``LOOPERS`` sessions (of ``client``) that run ``hold()`` over and over."""
    gate, stop, threads = Gate(), threading.Event(), []

    def start(client: str | None = None) -> None:
        for _ in range(LOOPERS):
            env = Holding(gate, client)

            def loop(env: Holding = env) -> None:
                while not stop.is_set():
                    env.execute_code("result = hold()", timeout_s=WAIT_S)

            thread = threading.Thread(target=loop, daemon=True)
            thread.start()
            threads.append(thread)

    yield gate, start
    stop.set()
    gate.release_all()
    for thread in threads:
        thread.join(WAIT_S)
    code_mode._stop_spare()


def run_aside(env: Holding, code: str) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: box.update(env.execute_code(code, timeout_s=WAIT_S).metadata),
        daemon=True,
    )
    thread.start()
    return thread, box


def test_a_new_sessions_run_is_next_after_one_run_of_eight_looping_sessions(
    monkeypatch: pytest.MonkeyPatch, loopers: tuple[Gate, Any]
) -> None:
    monkeypatch.setattr(code_mode, "slots", CodeSlots(SLOTS, wait_s=WAIT_S))
    gate, start = loopers
    start()
    gate.wait_entered(SLOTS)  # four sessions run, four wait
    wait_queued(LOOPERS - SLOTS)
    gate.let(SLOTS)  # the first four end and queue again; the other four run
    gate.wait_entered(LOOPERS)
    wait_queued(LOOPERS - SLOTS)
    # every looping session has had a turn: a session that never had one goes next
    thread, box = run_aside(Holding(gate), "result = entered()")
    wait_queued(LOOPERS - SLOTS + 1)
    gate.let(1)  # one run ends: one slot comes free
    thread.join(WAIT_S)
    assert box == {"result": LOOPERS}, box  # it ran before any looping session's next run


def test_another_clients_run_finds_a_slot_while_one_client_loops(
    monkeypatch: pytest.MonkeyPatch, loopers: tuple[Gate, Any]
) -> None:
    monkeypatch.setattr(code_mode, "slots", CodeSlots(SLOTS, per_client=SLOTS // 2, wait_s=WAIT_S))
    gate, start = loopers
    start("addr:10.0.0.1")  # one client, eight sessions: it holds its share, half the slots
    gate.wait_entered(SLOTS // 2)
    wait_queued(LOOPERS - SLOTS // 2)
    assert code_mode.slots.running == SLOTS // 2
    thread, box = run_aside(Holding(gate, "addr:10.0.0.2"), "result = entered()")
    thread.join(WAIT_S)  # no run of the first client ended meanwhile
    assert box == {"result": SLOTS // 2}, box


def test_a_run_that_waits_past_the_bound_is_told_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(code_mode, "slots", CodeSlots(1, wait_s=0.2))
    held = code_mode.slots.acquire("a looping session")
    assert held is not None
    try:
        metadata = Holding(Gate()).execute_code("result = 1").metadata
    finally:
        code_mode.slots.release(held)
    assert metadata["code"] == "CAPACITY_REACHED", metadata
    assert "CODE_WAIT_TIMEOUT" in metadata["error"] and "0.2 s" in metadata["error"]
    assert code_mode.slots.queued() == 0  # the refused run left the queue

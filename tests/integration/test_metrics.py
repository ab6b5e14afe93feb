"""``/metrics`` of a real two-worker server: exact counts, every worker showing the totals."""

from __future__ import annotations

import json
import stat
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from pathlib import Path

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from openenv_runtime.testing import free_port
from tests.support.servers import spawn_server, stop_process, wait_until

STEPS_PER_SESSION = 3
CAPACITY = 2  # per worker: 4 in all


def scrape(url: str) -> dict[str, float]:
    """Each sample of one fresh connection's /metrics (labels in the name), summed by name too."""
    request = urllib.request.Request(url + "/metrics", headers={"Connection": "close"})
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def ask(ws: ClientConnection, kind: str, data: object) -> dict[str, object]:
    ws.send(json.dumps({"type": kind, "data": data}))
    reply: dict[str, object] = json.loads(ws.recv(timeout=30))
    return reply


def open_session(stack: ExitStack, url: str) -> ClientConnection | None:
    """A new session (its first reset answered), kept open by ``stack``; None when refused."""
    own = ExitStack()
    ws = own.enter_context(connect(url, open_timeout=30))
    try:
        reply = ask(ws, "reset", {})
    except ConnectionClosed as exc:  # refused, and closed before the reset was sent
        assert exc.rcvd is not None and exc.rcvd.reason == "capacity reached"
        reply = None
    if reply is not None and reply["type"] == "observation":
        stack.enter_context(own)
        return ws
    if reply is not None:
        assert reply["data"]["code"] == "CAPACITY_REACHED"  # type: ignore[index]
    with suppress(ConnectionClosed):
        own.close()
    return None


@pytest.fixture
def server() -> Iterator[str]:
    port = free_port()
    process = spawn_server(
        "tests.fixtures.echo_app:app",
        port,
        workers=2,
        env={"MAX_CONCURRENT_ENVS": str(CAPACITY), "SESSION_TIMEOUT": "0"},
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(process)


def test_counts_are_exact_and_every_worker_shows_the_totals(server: str) -> None:
    ws_url = server.replace("http", "ws") + "/ws"
    opened, refused = [], 0
    with ExitStack() as stack:
        # Open sessions until one is refused (a worker is full): their number is then known.
        for _ in range(4 * CAPACITY):
            ws = open_session(stack, ws_url)
            if ws is None:
                refused += 1
                break
            opened.append(ws)
        assert refused == 1 and len(opened) >= CAPACITY
        for ws in opened:
            for _ in range(STEPS_PER_SESSION):
                assert ask(ws, "step", {"message": "hi"})["type"] == "observation"
            assert ask(ws, "reset", {})["type"] == "observation"  # a second episode: not a step
        sessions, steps = len(opened), len(opened) * STEPS_PER_SESSION

        def every_scrape_says(expected: dict[str, float]) -> bool:
            # 16 fresh connections: SO_REUSEPORT spreads them over both workers
            return all(
                all(got.get(k) == v for k, v in expected.items())
                for got in (scrape(server) for _ in range(16))
            )

        while_open = {
            "openenv_steps_total{outcome=ok,transport=ws}": steps,
            "openenv_steps_total": steps,
            "openenv_step_duration_seconds_count": steps,
            "openenv_resets_total{outcome=ok,transport=ws}": 2 * sessions,
            "openenv_sessions_opened_total{transport=ws}": sessions,
            "openenv_sessions_opened_total": sessions,
            "openenv_sessions_refused_total{reason=capacity}": 1,
            "openenv_sessions_active{transport=ws}": sessions,
            "openenv_sessions_capacity": 2 * CAPACITY,
            "openenv_workers": 2,
        }
        # the other worker's counts arrive within its flush interval: a bounded wait
        assert wait_until(lambda: every_scrape_says(while_open), timeout=30, interval=0.5), scrape(
            server
        )
    closed = {
        "openenv_sessions_active": 0,
        "openenv_sessions_closed_total{reason=client,transport=ws}": sessions,
        "openenv_steps_total": steps,
    }
    assert wait_until(lambda: every_scrape_says(closed), timeout=30, interval=0.5), scrape(server)


def test_the_workers_folder_is_private_and_removed_at_exit() -> None:
    port = free_port()
    process = spawn_server("tests.fixtures.echo_app:app", port, workers=2)
    try:
        workers = psutil.Process(process.pid).children()
        folders = {w.environ().get("PROMETHEUS_MULTIPROC_DIR") for w in workers}
        assert len(folders) == 1 and None not in folders  # one folder, shared by the workers
        folder = Path(folders.pop())
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        scrape(f"http://127.0.0.1:{port}")
        assert any(folder.glob("*.db"))
    finally:
        stop_process(process)
    assert not folder.exists()

"""A real Prometheus (Debian's package) scrapes a two-worker server and reads its counters back."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

from websockets.sync.client import connect

from openenv_runtime.testing import free_port
from tests.support.optional import unavailable
from tests.support.servers import spawn_server, stop_process, wait_until

SESSIONS, STEPS = 4, 5


def query(prometheus: str, expression: str) -> float | None:
    url = f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            result = json.loads(response.read())["data"]["result"]
    except (OSError, ValueError, KeyError):
        return None
    return float(result[0]["value"][1]) if result else None


def test_prometheus_reads_the_exact_counts(tmp_path: Path) -> None:
    binary = shutil.which("prometheus")
    if binary is None:
        unavailable("needs Prometheus: apt-get install -y prometheus")
    port, prom_port = free_port(), free_port()
    server = spawn_server(
        "tests.fixtures.echo_app:app", port, workers=2, env={"SESSION_TIMEOUT": "0"}
    )
    prometheus = None
    try:
        for _ in range(SESSIONS):
            with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=30) as ws:
                ws.send(json.dumps({"type": "reset", "data": {}}))
                assert json.loads(ws.recv(timeout=30))["type"] == "observation"
                for _ in range(STEPS):
                    ws.send(json.dumps({"type": "step", "data": {"message": "hi"}}))
                    assert json.loads(ws.recv(timeout=30))["type"] == "observation"
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n"
            "scrape_configs:\n  - job_name: openenv\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        )
        prometheus = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / "prometheus.log").open("wb"),
        )
        url = f"http://127.0.0.1:{prom_port}"
        expected = {
            "sum(openenv_steps_total)": SESSIONS * STEPS,
            'sum(openenv_sessions_opened_total{transport="ws"})': SESSIONS,
            "sum(openenv_resets_total)": SESSIONS,
            "sum(openenv_step_duration_seconds_count)": SESSIONS * STEPS,
        }
        assert wait_until(
            lambda: all(query(url, q) == v for q, v in expected.items()), timeout=60, interval=1
        ), {q: query(url, q) for q in expected}
    finally:
        if prometheus is not None:
            prometheus.terminate()  # by its own handle
            try:
                prometheus.wait(15)
            except subprocess.TimeoutExpired:
                prometheus.kill()
                prometheus.wait(5)
        stop_process(server)

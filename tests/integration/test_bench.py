"""``openenv bench`` against real servers: the built-in environment (--serve) and one started here.

Only tiny grids, and never an assertion on how fast anything was: the outputs must exist
and make sense (every session accounted for, steps counted, CPU read from /proc).
With ``test_bench_token.py`` and ``test_bench_action.py``, the tests of ``bench/sessions.py``,
``bench/runner.py`` and ``bench/server.py``, which drive real servers.
"""

from __future__ import annotations

import asyncio
import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from openenv_cli.bench.server import bench_server, running
from openenv_cli.bench.wsclient import open_connection
from openenv_runtime.http_reads import read_json
from openenv_runtime.testing import free_port

ROOT = Path(__file__).resolve().parents[2]


def openenv(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openenv_cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )


def only(directory: Path, pattern: str) -> Path:
    found = sorted(directory.glob(pattern))
    assert len(found) == 1, f"expected one {pattern} in {directory}: {found}"
    return found[0]


def test_serve_sessions_grid(tmp_path: Path) -> None:
    result = openenv(
        "bench",
        "--serve",
        "--requests-grid",
        "8,32",
        "--wait-grid",
        "0.05",
        "--reps",
        "1",
        "--processes",
        "2",
        "--output-dir",
        str(tmp_path),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "max batch at ≥95% success, wait 0.05 s: 32" in result.stdout

    data = json.loads(only(tmp_path, "bench-sessions-*.json").read_text())
    assert data["mode"] == "sessions"
    assert [(c["batch"], c["ok"]) for c in data["sessions"]] == [(8, 8), (32, 32)]
    for c in data["sessions"]:
        assert c["success_rate"] == 1.0 and c["errors"] == {}
        assert c["connect"]["n"] == c["batch"] and c["total"]["n"] == c["batch"]
        assert c["step"]["p50"] >= 50.0  # the step includes the 0.05 s wait
        assert c["total"]["p99"] >= c["step"]["p99"]
        assert c["requests_per_s"] > 0
        # --serve knows the server's pid (/proc counts in 10 ms ticks, so a tiny run may read 0)
        assert c["server_cpu_s"] is not None and c["server_cpu_s"] >= 0
        assert c["loadgen_cpu_s"] > 0
    assert data["max_batch"] == {"0.05": 32}
    assert data["environment"]["server_pids"]

    rows = list(csv.DictReader(only(tmp_path, "bench-sessions-*.csv").open()))
    assert [r["batch"] for r in rows] == ["8", "32"]
    markdown = only(tmp_path, "bench-sessions-*.md").read_text()
    assert "| batch |" in markdown and "**32**" in markdown
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert only(tmp_path, "bench-sessions-*-sessions.png").stat().st_size > 0


def test_serve_sync_variant(tmp_path: Path) -> None:
    result = openenv(
        "bench",
        "--serve",
        "--sync",
        "--requests-grid",
        "16",
        "--wait-grid",
        "0.05",
        "--reps",
        "1",
        "--no-plots",
        "--output-dir",
        str(tmp_path),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(only(tmp_path, "bench-sessions-*.json").read_text())
    assert data["sessions"][0]["ok"] == 16
    assert "sync" in data["environment"]["server"]


@pytest.mark.parametrize(
    ("transport", "client"), [("ws", "lean"), ("ws", "websockets"), ("http", "lean")]
)
def test_throughput_against_a_running_server(tmp_path: Path, transport: str, client: str) -> None:
    with running(bench_server()) as server:
        result = openenv(
            "bench",
            "--url",
            server.url,
            "--mode",
            "throughput",
            "--sessions",
            "1,4",
            "--steps",
            "50",
            "--reps",
            "1",
            "--transport",
            transport,
            "--client",
            client,
            "--server-pid",
            str(server.pids[0]),
            "--output-dir",
            str(tmp_path),
        )
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(only(tmp_path, "bench-throughput-*.json").read_text())
    cells = data["throughput"]
    assert [(c["sessions"], c["steps"], c["ok"]) for c in cells] == [(1, 50, 1), (4, 200, 4)]
    for c in cells:
        assert c["steps_per_s"] > 0
        assert c["step_latency"]["n"] == c["steps"]
        assert c["step_latency"]["p50"] <= c["step_latency"]["p99"] <= c["step_latency"]["max"]
        assert c["server_cpu_us_per_step"] is not None and c["server_cpu_us_per_step"] >= 0
    assert data["transport"] == transport
    assert "openenv bench: throughput" in result.stdout


@pytest.mark.parametrize("client", ["lean", "websockets"])
@pytest.mark.parametrize("compression", [True, False])
def test_ws_clients_survive_keepalive_pings_and_close_cleanly(
    client: str, compression: bool
) -> None:
    """Idle longer than the server's ping timeout: the client must answer its pings."""
    env = {"WS_PING_INTERVAL": "0.1", "WS_PING_TIMEOUT": "0.2"}

    async def session(url: str) -> list[str]:
        ws = await open_connection(url, client=client, compression=compression)
        replies = [str(await ws.request('{"type":"reset","data":{}}'))]
        await asyncio.sleep(1.0)
        replies.append(str(await ws.request('{"type":"step","data":{"wait":0.0}}')))
        await asyncio.wait_for(ws.finish(), 10)
        return replies

    with running(bench_server(env=env)) as server:
        replies = asyncio.run(session(f"ws://127.0.0.1:{server.port}/ws"))
        health = read_json(server.url, "/health")
    assert all(json.loads(r)["type"] == "observation" for r in replies)
    assert health["active_sessions"] == 0


def test_every_session_failing_is_an_error(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    result = openenv(
        "bench",
        "--url",
        f"http://127.0.0.1:{port}",
        "--requests-grid",
        "4",
        "--wait-grid",
        "0",
        "--reps",
        "1",
        "--timeout",
        "2",
        "--action",
        "{}",
        "--no-plots",
        "--output-dir",
        str(tmp_path),
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Every session failed" in result.stderr
    data = json.loads(
        only(tmp_path, "bench-sessions-*.json").read_text()
    )  # the report is still written
    assert data["sessions"][0]["ok"] == 0
    assert "connect: ConnectionRefusedError" in data["sessions"][0]["errors"]


def test_without_a_server_nor_an_action_it_says_what_to_do(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = openenv("bench", "--url", url, "--output-dir", str(tmp_path), timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"Could not read {url}/schema" in result.stderr and "--action" in result.stderr
    assert not list(tmp_path.iterdir())


def test_without_the_bench_extra_it_names_the_extra(tmp_path: Path) -> None:
    hide_psutil = (
        "import sys; sys.modules['psutil'] = None; sys.argv[0] = 'openenv';"
        "from openenv_cli.main import main; main()"
    )
    run = [sys.executable, "-c", hide_psutil]
    kwargs = {"capture_output": True, "text": True, "timeout": 60, "cwd": ROOT}
    listed = subprocess.run([*run, "--help"], **kwargs)  # type: ignore[call-overload]
    assert listed.returncode == 0 and "bench" in listed.stdout
    result = subprocess.run([*run, "bench", "--serve", "--output-dir", str(tmp_path)], **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 1, result.stdout + result.stderr
    assert "openenv-toolkit[bench]" in result.stderr and "Traceback" not in result.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--serve", "--action", "[1]"],
        ["--serve", "--action", "{}", "--action-file", "x.json"],
        ["--url", "http://127.0.0.1:1", "--serve"],
        ["--serve", "--requests-grid", "a,b"],
        ["--serve", "--wait-grid", "-1"],
        ["--serve", "--mode", "bogus"],
        ["--url", "http://127.0.0.1:1", "--workers", "2"],
        ["--url", "https://example.com"],
    ],
)
def test_usage_errors_exit_2(args: list[str], tmp_path: Path) -> None:
    result = openenv("bench", *args, "--output-dir", str(tmp_path), timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert not list(tmp_path.iterdir())


def test_compare_script_ours_and_floor(tmp_path: Path) -> None:
    """benchmarks/server/compare.py end to end on a tiny scale (the reference is left to the full run)."""
    result = subprocess.run(
        [
            sys.executable,
            "benchmarks/server/compare.py",
            "--servers",
            "ours,floor",
            "--metrics",
            "memory,latency,throughput",
            "--idle-sessions",
            "20",
            "--latency-steps",
            "50",
            "--steps",
            "20",
            "--reps",
            "1",
            "--no-latest",
            "--results-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(only(tmp_path, "compare-*.json").read_text())
    rows = {r["metric"]: r for r in doc["comparison"]}
    row = rows["server CPU per step (64 sessions)"]
    assert row["ours"] > 0 and row["floor"] > 0 and row["ours_over_floor"] > 0
    assert row["reference"] is None
    assert doc["servers"]["ours"]["memory"]["idle_sessions"] == 20
    assert doc["servers"]["floor"]["throughput"]["runs"][0]["steps"] == 64 * 20
    assert "| metric |" in result.stdout


def test_capacity_and_pid_come_from_health_and_output_is_whole_when_piped(
    tmp_path: Path,
) -> None:
    with running(bench_server(env={"MAX_CONCURRENT_ENVS": "4"})) as server:
        result = openenv(
            "bench",
            "--url",
            server.url,
            "--requests-grid",
            "2,6",
            "--wait-grid",
            "0.2",
            "--reps",
            "1",
            "--output-dir",
            str(tmp_path),
        )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "server capacity: 4 sessions at once (from /health)" in out
    assert "batch 6 exceeds the server's capacity of 4 sessions" in out
    assert "(from /health): its CPU is measured" in out
    assert "run 1/2: 2 sessions" in out and "run 2/2: 6 sessions" in out  # progress, piped
    assert "…" not in out  # no column cut at 80 characters
    assert "CPU: load generator" in out and "server unknown" not in out
    data = json.loads(only(tmp_path, "bench-sessions-*.json").read_text())
    assert data["environment"]["server_capacity"] == 4
    assert data["environment"]["server_pids"]

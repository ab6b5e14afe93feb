"""``openenv bench --url`` against a generated project (the template's echo environment), served for real.

Every step must succeed with the environment's own action: from the project's
``openenv.yaml`` when run inside it, from the server's ``/schema`` elsewhere, or from
``--action`` / ``--action-file``; a wrong action stops the benchmark with the server's
first error instead of a table. No assertion on speed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_cli.bench.server import ServerProcess, running, serve_command
from openenv_runtime.testing import free_port

ROOT = Path(__file__).resolve().parents[2]


def openenv(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openenv_cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("bench-project")
    result = openenv("init", "my_env", cwd=work)
    assert result.returncode == 0, result.stdout + result.stderr
    return work / "my_env"


@pytest.fixture(scope="module")
def server(project: Path) -> Iterator[ServerProcess]:
    port = free_port()
    argv = serve_command("my_env.server.app:app", port, app_dir=str(project.parent))
    with running(ServerProcess(argv, port, env={"LOG_LEVEL": "warning"}, name="echo")) as s:
        yield s


def only_json(directory: Path) -> dict:
    (found,) = sorted(directory.glob("bench-*.json"))
    return json.loads(found.read_text())


def all_steps_succeeded(data: dict) -> None:
    cells = data["sessions"] or data["throughput"]
    assert cells
    for c in cells:
        assert c["errors"] == {} and c["success_rate"] == 1.0, c


@pytest.mark.parametrize(
    ("transport", "client"), [("ws", "lean"), ("ws", "websockets"), ("http", "lean")]
)
def test_inside_the_project_the_manifest_example_is_stepped(
    project: Path, server: ServerProcess, tmp_path: Path, transport: str, client: str
) -> None:
    result = openenv(
        "bench", "--url", server.url, "--mode", "throughput", "--transport", transport, "--client", client,
        "--sessions", "2,4", "--steps", "20", "--reps", "1", "--no-plots",
        "--server-pid", str(server.pids[0]), "--output-dir", str(tmp_path),
        cwd=project,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'step action: {"message": "Hello, world"} (example_action of' in result.stdout
    data = only_json(tmp_path)
    all_steps_succeeded(data)
    assert [c["steps"] for c in data["throughput"]] == [40, 80]
    assert data["settings"]["action"] == {"message": "Hello, world"}
    assert data["settings"]["wait_field"] is False


def test_elsewhere_the_action_is_built_from_the_schema(
    server: ServerProcess, tmp_path: Path
) -> None:
    result = openenv(
        "bench", "--url", server.url, "--requests-grid", "4,8", "--reps", "1", "--no-plots",
        "--output-dir", str(tmp_path / "out"),
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "example built from" in result.stdout and "/schema" in result.stdout
    data = only_json(tmp_path / "out")
    all_steps_succeeded(data)
    assert [(c["batch"], c["ok"], c["wait"]) for c in data["sessions"]] == [
        (4, 4, 0.0),
        (8, 8, 0.0),
    ]
    assert data["settings"]["action"] == {"message": "hello"}


def test_action_and_action_file(server: ServerProcess, tmp_path: Path) -> None:
    action_file = tmp_path / "action.json"
    action_file.write_text(json.dumps({"message": "from a file"}))
    for flag, value in (
        ("--action", '{"message": "from a flag"}'),
        ("--action-file", str(action_file)),
    ):
        out = tmp_path / flag.strip("-")
        result = openenv(
            "bench", "--url", server.url, "--mode", "throughput", "--sessions", "2",
            "--steps", "10", "--reps", "1", "--no-plots", flag, value, "--output-dir", str(out),
            cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        data = only_json(out)
        all_steps_succeeded(data)
        assert data["settings"]["action"]["message"].startswith("from a")


def test_a_wrong_action_stops_with_the_first_error_and_no_table(
    server: ServerProcess, tmp_path: Path
) -> None:
    result = openenv(
        "bench", "--url", server.url, "--requests-grid", "4,8,16", "--reps", "2", "--no-plots",
        "--action", '{"wait": 0.1}', "--output-dir", str(tmp_path / "out"),
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert "openenv bench: sessions" not in result.stdout  # no table
    assert "answered most steps with an error" in result.stderr
    assert "VALIDATION_ERROR" in result.stderr and "message" in result.stderr
    data = only_json(tmp_path / "out")
    assert len(data["sessions"]) == 1  # stopped after the first run
    assert data["failure"].startswith("step: error VALIDATION_ERROR")


def test_wait_grid_needs_a_wait_field(server: ServerProcess, tmp_path: Path) -> None:
    result = openenv(
        "bench", "--url", server.url, "--wait-grid", "1.0", "--output-dir", str(tmp_path / "out"),
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--wait-grid applies only" in result.stderr
    assert not (tmp_path / "out").exists()

"""`openenv deploy slurm --apply` on the local one-node Slurm cluster: a job with two tasks
(two servers) and Envoy in front on the first node; an episode goes through the front; the
job is cancelled by its id and nothing keeps listening."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from openenv_cli.scaffold import render_project, write_project
from openenv_runtime.testing import free_port
from tests.support.deploy_tools import episode, openenv, tool, wait_for
from tests.support.optional import reason
from tests.support.servers import get_json

HOW = "run `bash .ci/slurm.sh` as root (a one-node cluster)"


@pytest.fixture(scope="module")
def slurm() -> None:
    tool("sbatch", HOW)
    tool("envoy", reason("envoy"))
    done = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, check=False)
    if done.returncode != 0 or not any(s in done.stdout for s in ("idle", "mix", "alloc")):
        from tests.support.deploy_tools import missing

        missing("a Slurm cluster that answers", HOW)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_apply_runs_two_servers_behind_envoy_and_scancel_stops_all(
    slurm: None, tmp_path: Path
) -> None:
    project = tmp_path / "slurm_env"
    write_project(render_project("slurm_env"), project)
    base, front = free_port(), free_port()
    while _listening(base + 1) or front in (base, base + 1):
        base, front = free_port(), free_port()
    done = openenv(
        "deploy",
        "slurm",
        "--replicas",
        "2",
        "--apply",
        "--json",
        "--timeout",
        "120",
        cwd=project,
        PORT=str(base),
        OPENENV_DEPLOY_PORT=str(front),
    )
    result = json.loads(done.stdout) if done.returncode == 0 else None
    assert result is not None, f"deploy failed:\n{done.stdout}\n{done.stderr}"
    job_id = result["job_id"]
    try:
        assert result["url"].endswith(f":{front}")
        assert sorted(e.rsplit(":", 1)[1] for e in result["endpoints"]) == [
            str(base),
            str(base + 1),
        ]
        run_dir = project / "deploy" / "slurm" / f"openenv-run-{job_id}"
        assert (run_dir / "endpoints.txt").read_text().count("\n") == 2
        assert episode(result["url"], "hello") == pytest.approx(0.5)
        for endpoint in result["endpoints"]:
            assert get_json(f"http://{endpoint}/health")[0] == 200
        state = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, check=False
        ).stdout.strip()
        assert state == "RUNNING"
    finally:
        stopped = openenv("deploy", "slurm", "--remove", "--job-id", job_id, "--json", cwd=project)
        assert stopped.returncode == 0, stopped.stderr
    wait_for(
        lambda: (
            not subprocess.run(
                ["squeue", "-h", "-j", job_id], capture_output=True, text=True, check=False
            ).stdout.strip()
        ),
        60,
        f"job {job_id} to leave the queue",
    )
    wait_for(
        lambda: not any(_listening(p) for p in (base, base + 1, front)),
        30,
        "the servers and Envoy to stop",
    )


def test_two_fronts_share_the_front_port_and_both_carry_sessions(
    slurm: None, tmp_path: Path
) -> None:
    """--fronts 2: two Envoy processes on one port (SO_REUSEPORT), each with its admin address
    in the run folder; sessions through the port reach the replicas through either."""
    import urllib.request

    project = tmp_path / "fronts_env"
    write_project(render_project("fronts_env"), project)
    base, front = free_port(), free_port()
    while _listening(base + 1) or front in (base, base + 1):
        base, front = free_port(), free_port()
    done = openenv(
        "deploy", "slurm", "--replicas", "2", "--fronts", "2", "--apply", "--json",
        "--timeout", "120", cwd=project, PORT=str(base), OPENENV_DEPLOY_PORT=str(front),
    )  # fmt: skip
    result = json.loads(done.stdout) if done.returncode == 0 else None
    assert result is not None, f"deploy failed:\n{done.stdout}\n{done.stderr}"
    job_id = result["job_id"]
    try:
        assert result["fronts"] == 2
        run_dir = project / "deploy" / "slurm" / f"openenv-run-{job_id}"
        admins = [run_dir / f"front-{i}.admin" for i in (1, 2)]
        wait_for(lambda: all(a.is_file() and a.read_text().strip() for a in admins), 30, "admins")
        for _ in range(40):  # the kernel spreads new connections over both listeners
            assert episode(result["url"], "hi") == pytest.approx(0.2)
        accepted = []
        for admin in admins:
            url = f"http://{admin.read_text().strip()}/stats?filter=http.front.downstream_cx_total"
            with urllib.request.urlopen(url, timeout=5) as response:
                accepted.append(int(response.read().decode().rsplit(":", 1)[1]))
        assert sum(accepted) >= 40 and all(n > 0 for n in accepted), accepted
    finally:
        stopped = openenv("deploy", "slurm", "--remove", "--job-id", job_id, "--json", cwd=project)
        assert stopped.returncode == 0, stopped.stderr
    wait_for(
        lambda: not any(_listening(p) for p in (base, base + 1, front)),
        30,
        "the servers and Envoy to stop",
    )

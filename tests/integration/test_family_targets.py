"""FAMILY:NAME targets in the CLI: collect and validate serve them themselves (real servers on
free 127.0.0.1 ports, stopped at the end)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openenv_cli.collect.store import read_rows
from openenv_runtime import GenericEnvClient
from openenv_runtime.adapters.served import family_provider
from openenv_runtime.providers.base import health
from tests.support.optional import require
from tests.support.servers import REPO

pytestmark = pytest.mark.integration


def openenv(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a child process, importing this checkout (runtime included)."""
    path = os.pathsep.join([str(REPO / "runtime"), str(REPO), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "openenv_cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": path},
    )


def test_collect_serves_a_reasoning_gym_target_and_plays_random_answers(tmp_path: Path) -> None:
    require("reasoning_gym")
    require("jsf")
    out = tmp_path / "legs"
    done = openenv(
        "collect",
        "reasoning_gym:leg_counting?size=20&seed=3",
        "--policy",
        "random",
        "-n",
        "50",
        "--format",
        "jsonl",
        "-o",
        str(out),
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    rows = list(read_rows(out))
    assert len(rows) == 50
    assert all(row["error"] == "" and row["done"] and row["num_steps"] == 1 for row in rows)
    first = json.loads(rows[0]["observations"][0])
    assert "legs" in first["question"]
    assert set(json.loads(rows[0]["actions"][0])) == {"answer"}  # the family's action schema
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert run["provenance"]["environment"]["family"] == "reasoning_gym:leg_counting?size=20&seed=3"


def test_random_actions_follow_a_gymnasium_action_space(tmp_path: Path) -> None:
    require("gymnasium")
    require("jsf")
    out = tmp_path / "pole"
    done = openenv(
        "collect",
        "gymnasium:CartPole-v1",
        "--policy",
        "random",
        "-n",
        "10",
        "--max-turns",
        "500",
        "--format",
        "jsonl",
        "-o",
        str(out),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    rows = list(read_rows(out))
    assert len(rows) == 10 and all(row["error"] == "" and row["done"] for row in rows)
    actions = {json.loads(action)["action"] for row in rows for action in row["actions"]}
    assert actions == {0, 1}  # Discrete(2): both, and nothing else
    assert all(row["total_reward"] == row["num_steps"] for row in rows)  # +1 per step


def test_eval_serves_a_family_target_and_reports_on_it(tmp_path: Path) -> None:
    require("reasoning_gym")
    require("jsf")
    out = tmp_path / "eval"
    target = "reasoning_gym:leg_counting?size=10&seed=1"
    done = openenv("eval", target, "--policy", "random", "-n", "10", "-o", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert (report["episodes"], report["completed"], report["errors"]) == (10, 10, {})
    assert report["provenance"]["environment"]["family"] == target


def test_validate_serves_a_gymnasium_target_and_checks_it(tmp_path: Path) -> None:
    require("gymnasium")
    done = openenv("validate", "gymnasium:CartPole-v1", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["target"] == "gymnasium:CartPole-v1"
    statuses = {check["name"]: check["status"] for check in report["checks"]}
    assert statuses == {
        "family": "pass",
        "remote.health": "pass",
        "remote.schema": "pass",
        "remote.metadata": "pass",
        "remote.episode": "pass",
    }


def test_validate_says_what_is_wrong_with_a_target_in_one_line(tmp_path: Path) -> None:
    require("gymnasium")
    done = openenv("validate", "gymnasium:NoSuchEnv-v9", "--json", cwd=tmp_path)
    assert done.returncode == 1
    (check,) = json.loads(done.stdout)["checks"]
    assert check["name"] == "family" and "NoSuchEnv" in check["message"]
    assert "Traceback" not in check["message"]


def test_bench_serves_a_family_target_measures_it_and_stops_it(tmp_path: Path) -> None:
    require("gymnasium")
    psutil = require("psutil", "bench")
    done = openenv(
        "bench",
        "--url",
        "gymnasium:CartPole-v1",
        "--mode",
        "throughput",
        "--sessions",
        "2",
        "--steps",
        "20",
        "--reps",
        "1",
        "--no-plots",
        "--output-dir",
        str(tmp_path / "reports"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert '{"action": 0}' in done.stdout  # the example built from the family's /schema
    (report,) = (tmp_path / "reports").glob("bench-throughput-*.json")
    measured = json.loads(report.read_text(encoding="utf-8"))
    assert measured["environment"]["server"].startswith("gymnasium:CartPole-v1, ")
    (run,) = measured["throughput"]
    assert run["success_rate"] == 1.0 and run["steps"] == 40
    pids = measured["environment"]["server_pids"]
    assert pids and not any(psutil.pid_exists(pid) for pid in pids)  # stopped when bench ended


def test_a_client_owns_a_family_server_through_its_provider() -> None:
    require("gymnasium")
    provider = family_provider("gymnasium:CartPole-v1")
    with GenericEnvClient.from_provider(provider).sync() as env:
        first = env.reset(seed=7)
        assert len(first.observation["observation"]) == 4
        assert env.step({"action": 1}).reward == 1.0
    assert provider.processes == []  # closing the client stopped the server


def test_from_env_serves_a_family_target_exactly_as_the_library() -> None:
    require("gymnasium")
    import gymnasium

    native = gymnasium.make("CartPole-v1")
    expected, _ = native.reset(seed=11)
    client = GenericEnvClient.from_env("gymnasium:CartPole-v1?max_episode_steps=20")
    with client.sync() as env:
        assert env.reset(seed=11).observation["observation"] == expected.tolist()
        for _ in range(20):
            result = env.step({"action": 0})
            if result.done:
                break
        assert result.done
    assert health(client.base_url, timeout=2) is None  # closing the client stopped its server

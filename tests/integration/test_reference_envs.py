"""The reference OpenEnv's own environments, ported only by ``openenv migrate``, on our runtime.

Each environment is copied at test time from the reference's repository at a pinned commit
(``tests/support/ref_snapshot.py``; nothing of it is committed here; without that source the
module skips with one line saying how to provide it, see docs/reference-compat.md), rewritten by
``openenv migrate``, served by ``openenv serve``, and driven through one episode by its own
client: echo (MCP), connect4, maze, wildfire, chess (rubrics), coding, snake, reasoning gym,
carla (its mock mode), repl. Environments left out need engines or data this machine lacks:

* atari_env (ale_py ROMs), browsergym_env / openapp_env (Playwright browsers and their sites),
  carla_env's real mode (the CARLA simulator), dm_control_env (MuJoCo), unity_env (Unity
  ML-Agents), sumo_rl_env (SUMO), julia_env (a Julia toolchain), kernrl (CUDA, Triton),
  tbench2_env (Docker-in-Docker and terminal-bench), finrl_env (FinRL), finqa_env and
  dipg_safety_env (their datasets), textarena_env (TextArena + NLTK data), openspiel_env
  (OpenSpiel build), calendar_env / agent_world_model_env (their own databases and MCP
  services), git_env (a Gitea server), websearch_env (the web), chat_env (a tokenizer
  download).
* grid_world_env runs on neither: its client builds ``StepResult(info=...)``, a field the
  reference's ``StepResult`` does not have either.
* No reference environment serves the Task API; test_reference_server.py covers its routes.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv_cli.migrate import apply_migration, plan_migration
from openenv_cli.scaffold import render_project
from openenv_runtime.testing import free_port
from tests.support import ref_snapshot
from tests.support.docker_engine import started_container
from tests.support.ref_snapshot import SnapshotMissing, materialize
from tests.support.reference import wait_until_healthy

pytestmark = pytest.mark.timeout(300)


def _episode_echo(pkg: Any, url: str) -> dict[str, Any]:
    with pkg.EchoEnv(base_url=url) as env:
        env.reset()
        names = sorted(t.name for t in env.list_tools())
        return {"tools": names, "echo": env.call_tool("echo_message", message="Hello!")}


def _episode_connect4(pkg: Any, url: str) -> dict[str, Any]:
    with pkg.Connect4Env(base_url=url) as env:
        result = env.reset()
        steps = 0
        while not result.done and steps < 42:
            legal = result.observation.legal_actions
            result = env.step(pkg.Connect4Action(column=legal[0]))
            steps += 1
        return {"steps": steps, "done": result.done, "reward": result.reward}


def _episode_maze(pkg: Any, url: str) -> dict[str, Any]:
    with pkg.MazeEnv(base_url=url) as env:
        result = env.reset()
        for move in range(4):
            result = env.step(pkg.MazeAction(action=move))
        return {"done": result.done, "reward": result.reward, "steps": env.state().step_count}


def _episode_wildfire(pkg: Any, url: str) -> dict[str, Any]:
    with pkg.WildfireEnv(base_url=url) as env:
        env.reset()
        result = env.step(pkg.WildfireAction(action="wait"))
        return {"done": result.done, "reward": result.reward}


def _episode_chess(pkg: Any, url: str) -> dict[str, Any]:
    with pkg.ChessEnv(base_url=url) as env:
        result = env.reset()
        first = result.observation.legal_moves[0]
        result = env.step(pkg.ChessAction(move=first))
        return {"moved": first, "fen": result.observation.fen, "reward": result.reward}


def _episode_coding(pkg: Any, url: str) -> dict[str, Any]:
    with pkg.CodingEnv(base_url=url) as env:
        env.reset()
        result = env.step(pkg.CodeAction(code="print(6 * 7)"))
        return {"stdout": result.observation.stdout, "exit_code": result.observation.exit_code}


def _episode_snake(pkg: Any, url: str) -> dict[str, Any]:
    with pkg.SnakeEnv(base_url=url) as env:
        result = env.reset()
        steps = 0
        while not result.done and steps < 20:
            result = env.step(pkg.SnakeAction(action=0))  # keep going straight
            steps += 1
        return {"steps": steps, "grid": result.observation.grid, "reward": result.reward}


def _episode_reasoning_gym(pkg: Any, url: str) -> dict[str, Any]:
    with pkg.ReasoningGymEnv(base_url=url) as env:
        result = env.reset(dataset_name="leg_counting", seed=42, size=3)
        question = result.observation.question
        result = env.step(pkg.ReasoningGymAction(answer="4"))
        return {
            "question": question,
            "answer": result.observation.correct_answer,
            "score": result.observation.score,
            "done": result.done,
        }


def _episode_carla(pkg: Any, url: str) -> dict[str, Any]:
    with pkg.CarlaEnv(base_url=url) as env:  # the server's mock mode: no simulator needed
        env.reset()
        result = env.step(pkg.CarlaAction(action_type="emergency_stop"))
        return {"done": result.done, "reward": result.reward}


def _episode_repl(pkg: Any, url: str) -> dict[str, Any]:
    with pkg.REPLEnv(base_url=url) as env:  # the reference's async client, called plainly
        env.reset()
        result = env.step(pkg.REPLAction(code="x = 6 * 7\nprint(x)"))
        final = env.step(pkg.REPLAction(code="print('FINAL(42)')"))
        return {"stdout": result.observation.result.stdout, "done": final.done}


# name → (episode, what the episode must show)
EPISODES: dict[
    str, tuple[Callable[[Any, str], dict[str, Any]], Callable[[dict[str, Any]], bool]]
] = {
    "echo_env": (_episode_echo, lambda r: r["echo"] == "Hello!" and "echo_message" in r["tools"]),
    "connect4_env": (_episode_connect4, lambda r: r["steps"] > 0),
    "maze_env": (_episode_maze, lambda r: r["steps"] == 4),
    "wildfire_env": (_episode_wildfire, lambda r: r["reward"] is not None),
    # these need their engines' packages (tests/support/reference-envs.txt; .ci/run installs them)
    "chess_env": (_episode_chess, lambda r: r["fen"] and r["moved"]),  # rewards from its rubric
    "coding_env": (_episode_coding, lambda r: r["stdout"].strip() == "42" and r["exit_code"] == 0),
    "snake_env": (_episode_snake, lambda r: r["steps"] > 0 and r["grid"]),  # marlenv + gym 0.24
    "reasoning_gym_env": (  # reasoning-gym's generated datasets (no download)
        _episode_reasoning_gym,
        lambda r: r["question"] and r["answer"] is not None and r["done"],
    ),
    "carla_env": (_episode_carla, lambda r: r["reward"] is not None),
    "repl_env": (_episode_repl, lambda r: r["stdout"].strip() == "42" and r["done"]),  # gradio
}


# Without the reference's source (and no way to fetch it), skip the module, also in CI, with
# one line saying how to run it.
if (_missing := ref_snapshot.missing_reason()) is not None:
    pytest.skip(_missing, allow_module_level=True)


@pytest.fixture(scope="module")
def reference_source() -> None:
    """The reference's source, fetched into the cache if need be (skips when that fails)."""
    try:
        ref_snapshot.source()
    except SnapshotMissing as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def snapshot(reference_source: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("reference-envs")
    materialize([f"envs/{name}" for name in EPISODES], root)
    return root / "envs"


@contextlib.contextmanager
def _served(project: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "openenv_cli.main",
            "serve",
            str(project),
            "--port",
            str(port),
            "--no-web",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_until_healthy(url, proc, timeout=60)  # type: ignore[arg-type]
        except Exception:
            proc.kill()
            out = proc.communicate(timeout=10)[0].decode(errors="replace")
            raise AssertionError(f"openenv serve did not come up:\n{out[-3000:]}") from None
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=15)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


@pytest.mark.parametrize("name", sorted(EPISODES))
def test_reference_env_ported_by_migrate_runs_an_episode(snapshot: Path, name: str) -> None:
    project = snapshot / name
    plan = plan_migration(project)
    apply_migration(plan)
    code = "".join(p.read_text() for p in project.rglob("*.py"))
    assert "from openenv.core" not in code.replace(">>> from openenv.core", "")
    episode, check = EPISODES[name]
    sys.path.insert(0, str(snapshot))
    try:
        package = importlib.import_module(name)  # the environment's own client, ported
        with _served(project) as url:
            result = episode(package, url)
    finally:
        sys.path.remove(str(snapshot))
    assert check(result), result


@pytest.mark.docker
@pytest.mark.timeout(900)
def test_migrated_reference_env_builds_and_runs_in_a_container(
    reference_source: None,
    tmp_path: Path,
    client: Any,
    base_image: str,
) -> None:
    materialize(["envs/connect4_env"], tmp_path)
    project = tmp_path / "envs" / "connect4_env"
    apply_migration(plan_migration(project, render_project("connect4_env")["server/Dockerfile"]))
    tag = f"openenv-parity-connect4:{uuid.uuid4().hex[:8]}"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "openenv_cli.main",
            "build",
            str(project),
            "-b",
            base_image,
            "-t",
            tag,
        ],
        capture_output=True,
        text=True,
        timeout=800,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    try:
        port = free_port()
        with started_container(client, tag, ports={"8000/tcp": ("127.0.0.1", port)}):
            url = f"http://127.0.0.1:{port}"
            wait_until_healthy(url, timeout=90)
            sys.path.insert(0, str(tmp_path / "envs"))
            try:
                result = _episode_connect4(importlib.import_module("connect4_env"), url)
            finally:
                sys.path.remove(str(tmp_path / "envs"))
        assert result["steps"] > 0
    finally:
        client.images.remove(tag, force=True)

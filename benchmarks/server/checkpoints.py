"""Checkpoints: next-step equivalence after a restore on a new server process, and restore time.

    python benchmarks/server/checkpoints.py                        # about a minute
    python benchmarks/server/checkpoints.py --checkpoints 200 --restores 50

* **equivalence** — the project ``openenv init`` generates (it opts in to checkpoints) is
  served by ``python -m openenv_runtime.serve`` with a fresh ``CHECKPOINT_DIR``. ``--sessions``
  clients play episodes with random messages; at random mid-episode steps each takes a
  checkpoint and then its next step (the uninterrupted twin), until ``--checkpoints`` are
  taken. That server is stopped; a second server process on the same folder restores every
  checkpoint into one session (no reset) and takes the same next step. Counted: next steps
  (observation, reward, done) and states equal to the twin's.
* **restore time** — the same generated environment with ``--ballast-bytes`` of padding in
  its state (1 MB by default), on two server processes sharing the folder: a checkpoint
  taken on the first, ``--restores`` restores on the second, timed at the client (the
  round trip of ``env.restore``: read, size/digest/identity checks, decode, ``import_state``).

Prints a table and writes ``benchmarks/results/checkpoints-<timestamp>.json`` (ignored by
git) and ``benchmarks/server/checkpoints.json`` (committed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import string
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from openenv_cli.bench.report import markdown_table  # noqa: E402
from openenv_cli.bench.server import ServerProcess, serve_command  # noqa: E402
from openenv_cli.scaffold import render_project, write_project  # noqa: E402
from openenv_runtime import Checkpoint, GenericEnvClient  # noqa: E402
from openenv_runtime.testing import free_port  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
NAME = "ckbench"
BALLAST_MODULE = f'''"""The generated environment with padding in its state, to time large restores."""

import os

from openenv_runtime import create_app

from {NAME}.models import CkbenchAction, CkbenchObservation, CkbenchState
from {NAME}.server.{NAME}_environment import CkbenchEnvironment


class BallastEnvironment(CkbenchEnvironment):
    def reset(self, seed=None, episode_id=None, **kwargs):
        observation = super().reset(seed=seed, episode_id=episode_id)
        self._state.ballast = "x" * int(os.environ.get("BALLAST_BYTES", "0"))
        return observation


app = create_app(
    BallastEnvironment, CkbenchAction, CkbenchObservation, CkbenchState, env_name="{NAME}"
)
'''


def server(app: str, root: Path, folder: Path, **env: str) -> ServerProcess:
    port = free_port()
    return ServerProcess(
        serve_command(app, port),
        port,
        env={
            "PYTHONPATH": f"{root}:{ROOT / 'runtime'}:{ROOT}",
            "LOG_LEVEL": "warning",
            "ENABLE_WEB_INTERFACE": "false",
            "CHECKPOINT_DIR": str(folder),
            **env,
        },
        name="checkpoints",
    )


def message(rng: random.Random) -> dict[str, str]:
    return {"message": "".join(rng.choices(string.ascii_letters, k=rng.randint(0, 40)))}


async def take(url: str, total: int, sessions: int, seed: int) -> list[dict[str, Any]]:
    """Play episodes; at random mid-episode steps: checkpoint, then the twin's next step."""
    taken: list[dict[str, Any]] = []

    async def player(k: int) -> None:
        rng = random.Random(seed * 1000 + k)
        async with GenericEnvClient(url) as env:
            while len(taken) < total:
                await env.reset()
                done = False
                while not done and len(taken) < total:
                    if rng.random() < 0.2:
                        ckpt = await env.checkpoint()
                        action = message(rng)
                        nxt = await env.step(action)
                        state = await env.state()
                        taken.append(
                            {
                                "checkpoint": ckpt,
                                "action": action,
                                "next": (nxt.observation, nxt.reward, nxt.done),
                                "state": state,
                            }
                        )
                        done = nxt.done
                    else:
                        done = (await env.step(message(rng))).done

    await asyncio.gather(*(player(k) for k in range(sessions)))
    return taken[:total]


async def replay(url: str, taken: list[dict[str, Any]]) -> tuple[int, list[int]]:
    """Restore each checkpoint (no reset) and take the twin's action; count equal next steps."""
    equal, differing = 0, []
    async with GenericEnvClient(url) as env:
        for n, item in enumerate(taken):
            await env.restore(item["checkpoint"])
            nxt = await env.step(item["action"])
            state = await env.state()
            if (nxt.observation, nxt.reward, nxt.done) == item["next"] and state == item["state"]:
                equal += 1
            else:
                differing.append(n)
    return equal, differing


async def restore_times(first: str, second: str, restores: int) -> dict[str, Any]:
    async with GenericEnvClient(first) as env:
        await env.reset()
        await env.step({"message": "hello"})
        ckpt: Checkpoint = await env.checkpoint()
        started = time.perf_counter()
        for _ in range(5):
            await env.checkpoint()
        take_ms = (time.perf_counter() - started) / 5 * 1000
    times = []
    async with GenericEnvClient(second) as env:
        await env.restore(ckpt)  # warm-up (first read from disk)
        for _ in range(restores):
            began = time.perf_counter()
            await env.restore(ckpt)
            times.append((time.perf_counter() - began) * 1000)
        assert (await env.state())["step_count"] == ckpt.step
    times.sort()
    return {
        "state_bytes": ckpt.size,
        "restores": restores,
        "restore_ms_p50": statistics.median(times),
        "restore_ms_p95": times[int(0.95 * (len(times) - 1))],
        "restore_ms_max": times[-1],
        "checkpoint_ms_mean": take_ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoints", type=int, default=1000)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--restores", type=int, default=200)
    parser.add_argument("--ballast-bytes", type=int, default=1 << 20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--note", default="", help="free text stored with the results")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="openenv-ckbench-") as tmp:
        root = Path(tmp) / "src"
        write_project(render_project(NAME), root / NAME)
        (root / NAME / "server" / "ballast.py").write_text(BALLAST_MODULE)
        folder = Path(tmp) / "checkpoints"
        app = f"{NAME}.server.app:app"
        with server(app, root, folder) as first:
            taken = asyncio.run(take(first.url, args.checkpoints, args.sessions, args.seed))
            first_pid = first.pids
        with server(app, root, folder) as second:
            assert second.pids != first_pid
            equal, differing = asyncio.run(replay(second.url, taken))
        ballast = f"{NAME}.server.ballast:app"
        big = {"BALLAST_BYTES": str(args.ballast_bytes)}
        with (
            server(ballast, root, folder, **big) as one,
            server(ballast, root, folder, **big) as two,
        ):
            timing = asyncio.run(restore_times(one.url, two.url, args.restores))

    share = equal / len(taken) if taken else 0.0
    rows = [
        ["checkpoints taken (generated env, random actions)", f"{len(taken)}"],
        ["next step equal after restore on a new process", f"{equal} ({share:.1%})"],
        ["state size for restore timing", f"{timing['state_bytes']:,} B"],
        [
            "restore p50 / p95 / max",
            "{restore_ms_p50:.1f} / {restore_ms_p95:.1f} / {restore_ms_max:.1f} ms".format(
                **timing
            ),
        ],
        ["checkpoint (mean)", f"{timing['checkpoint_ms_mean']:.1f} ms"],
    ]
    print(markdown_table(["measure", "value"], rows))
    print(
        f"\nequivalence {share:.1%} (goal 100%); restore p95 {timing['restore_ms_p95']:.1f} ms "
        "(goal ≤ 50 ms)"
    )
    report = {
        "benchmark": "checkpoints",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": {k: v for k, v in vars(args).items() if k != "note"},
        "note": args.note,
        "checkpoints": len(taken),
        "equal_next_steps": equal,
        "differing": differing[:20],
        "equivalence": share,
        "restore": timing,
        "goals_met": {
            "equivalence_100pct": share == 1.0,
            "restore_p95_50ms": timing["restore_ms_p95"] <= 50,
        },
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    for path in (
        RESULTS / f"checkpoints-{stamp}.json",
        ROOT / "benchmarks" / "server" / "checkpoints.json",
    ):
        path.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""Fork-N and group-consistent starts: ``env.fork(n=32)`` time and ``pool.reset_group`` identity.

    python benchmarks/client/fork_n.py                        # a minute or two
    python benchmarks/client/fork_n.py --rounds 10 --groups 200

* **fork(n=32)** — one server process (``tests/fixtures/walk.py``, checkpoints in memory, the
  default) holds a session whose state is ``--state-bytes`` (1 MB) of JSON. One checkpoint is
  taken; then ``--rounds`` times ``fork(ckpt, n=32)`` opens 32 sessions from it (each its own
  WebSocket, restored from the checkpoint and checked at its step), timed at the client;
  the forks are closed between rounds. Beside it: ``fork(n=32)`` without a checkpoint (it
  takes one first), the same 32 forks opened one after another (what ``fork()`` alone
  gives), the floor (32 fresh sessions opened at once, each answering one ``state``: what
  any 32 sessions cost, with no restore), and ``EnvPool.fork`` over two server processes
  sharing a ``CHECKPOINT_DIR``.
* **reset_group** — two server processes of ``tests/fixtures/dice.py`` (12 dice rolled from
  the seed at reset), an ``EnvPool`` of ``--group-size`` (8) sessions spread over both;
  ``--groups`` (1,000) calls of ``reset_group(8, seed=g)``. Counted: groups whose first
  observations are all identical and equal to the rolls the seed gives. As a control, the
  same on the variant that ignores its seed: every group should be refused
  (``GROUP_MISMATCH``).

The machine is shared: the load average before and after is stored with the results.
Prints a table and writes ``benchmarks/results/fork-n-<timestamp>.json`` (ignored by git)
and ``benchmarks/client/fork_n.json`` (committed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
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
from openenv_runtime import EnvError, EnvPool, StepResult  # noqa: E402
from openenv_runtime.testing import free_port  # noqa: E402
from tests.fixtures.dice import DiceClient, DiceEnvironment  # noqa: E402
from tests.fixtures.walk import WalkClient  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FORKS = 32


def server(app: str, **env: str) -> ServerProcess:
    port = free_port()
    return ServerProcess(
        serve_command(app, port),
        port,
        env={
            "PYTHONPATH": f"{ROOT / 'runtime'}:{ROOT}",
            "LOG_LEVEL": "warning",
            "ENABLE_WEB_INTERFACE": "false",
            **env,
        },
        name="fork-n",
    )


def summary(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {
        "p50": statistics.median(ordered),
        "p95": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
        "min": ordered[0],
        "max": ordered[-1],
    }


async def close_all(clients: list[Any]) -> None:
    await asyncio.gather(*(c.close() for c in clients))


async def fork_times(url: str, rounds: int, state_bytes: int) -> dict[str, Any]:
    times: dict[str, list[float]] = {
        "fork_n": [],
        "fork_n_with_checkpoint": [],
        "new_sessions": [],
        "one_by_one": [],
    }
    async with WalkClient(url) as env:
        await env.reset(seed=1, ballast=state_bytes)
        await env.step({"move": 1})
        ckpt = await env.checkpoint()
        for _ in range(rounds):
            started = time.perf_counter()
            forks = await env.fork(ckpt, n=FORKS)
            times["fork_n"].append((time.perf_counter() - started) * 1000)
            await close_all(forks)
            started = time.perf_counter()
            forks = await env.fork(n=FORKS)
            times["fork_n_with_checkpoint"].append((time.perf_counter() - started) * 1000)
            await close_all(forks)
            # the floor: as many fresh sessions (connect, then one state request), no restore
            started = time.perf_counter()
            fresh = [WalkClient(url) for _ in range(FORKS)]
            await asyncio.gather(*(c.connect() for c in fresh))
            await asyncio.gather(*(c.state() for c in fresh))
            times["new_sessions"].append((time.perf_counter() - started) * 1000)
            await close_all(fresh)
        for _ in range(max(1, rounds // 4)):  # the sequential baseline is slow: fewer rounds
            started = time.perf_counter()
            forks = [await env.fork(ckpt) for _ in range(FORKS)]
            times["one_by_one"].append((time.perf_counter() - started) * 1000)
            await close_all(forks)
    return {"state_bytes": ckpt.size, **{k: summary(v) for k, v in times.items()}}


async def pool_fork_times(urls: list[str], rounds: int, state_bytes: int) -> dict[str, Any]:
    spent: list[float] = []
    spread: dict[str, int] = {}
    async with EnvPool(WalkClient, urls=urls, size=1) as pool:
        await pool[0].reset(seed=1, ballast=state_bytes)
        ckpt = await pool[0].checkpoint()
        for _ in range(rounds):
            started = time.perf_counter()
            forks = await pool.fork(0, n=FORKS, checkpoint=ckpt)
            spent.append((time.perf_counter() - started) * 1000)
            for f in forks:
                spread[f.base_url] = spread.get(f.base_url, 0) + 1
            await close_all(forks)
    return {"fork_n": summary(spent), "forks_per_server": sorted(spread.values())}


def rolls_of(seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(1, 6) for _ in range(DiceEnvironment.DICE)]


async def group_identity(urls: list[str], groups: int, group_size: int) -> dict[str, Any]:
    identical = mismatched = failed = 0
    started = time.perf_counter()
    async with EnvPool(DiceClient, urls=urls, size=group_size) as pool:
        servers = sorted(sum(1 for i in range(group_size) if pool.server_of(i) == u) for u in urls)
        for seed in range(groups):
            try:
                group = await pool.reset_group(group_size, seed=seed)
            except EnvError as error:
                if error.code != "GROUP_MISMATCH":
                    raise
                mismatched += 1
                continue
            if not all(isinstance(r, StepResult) for r in group):
                failed += 1
                continue
            firsts = [r.observation.rolls for r in group]  # type: ignore[union-attr]
            identical += firsts == [rolls_of(seed)] * group_size
    return {
        "groups": groups,
        "group_size": group_size,
        "sessions_per_server": servers,
        "identical": identical,
        "mismatched": mismatched,
        "failed": failed,
        "seconds": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--state-bytes", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--control-groups", type=int, default=50)
    parser.add_argument("--note", default="", help="free text stored with the results")
    args = parser.parse_args()

    load_before = os.getloadavg()
    with server("tests.fixtures.walk:app") as one:
        forks = asyncio.run(fork_times(one.url, args.rounds, args.state_bytes))
    with tempfile.TemporaryDirectory(prefix="openenv-fork-n-") as folder:
        shared = {"CHECKPOINT_DIR": str(Path(folder) / "checkpoints")}
        with (
            server("tests.fixtures.walk:app", **shared) as one,
            server("tests.fixtures.walk:app", **shared) as two,
        ):
            pooled = asyncio.run(pool_fork_times([one.url, two.url], args.rounds, args.state_bytes))
    with server("tests.fixtures.dice:app") as one, server("tests.fixtures.dice:app") as two:
        groups = asyncio.run(group_identity([one.url, two.url], args.groups, args.group_size))
    with (
        server("tests.fixtures.dice:seedless_app") as one,
        server("tests.fixtures.dice:seedless_app") as two,
    ):
        control = asyncio.run(
            group_identity([one.url, two.url], args.control_groups, args.group_size)
        )
    load_after = os.getloadavg()

    def ms(figures: dict[str, float]) -> str:
        return "{p50:.1f} / {p95:.1f} / {min:.1f} ms".format(**figures)

    share = groups["identical"] / groups["groups"]
    rows = [
        ["state size", f"{forks['state_bytes']:,} B"],
        [f"fork(ckpt, n={FORKS}), one server: p50 / p95 / min", ms(forks["fork_n"])],
        [f"fork(n={FORKS}) (takes the checkpoint too)", ms(forks["fork_n_with_checkpoint"])],
        [f"{FORKS} × fork(ckpt), one after another", ms(forks["one_by_one"])],
        [f"floor: {FORKS} fresh sessions at once (connect + state)", ms(forks["new_sessions"])],
        [
            f"pool.fork(0, n={FORKS}), 2 servers sharing a folder "
            f"(forks per server {pooled['forks_per_server']})",
            ms(pooled["fork_n"]),
        ],
        [
            f"reset_group({groups['group_size']}) identical and from the seed, 2 servers",
            f"{groups['identical']} / {groups['groups']} ({share:.1%})",
        ],
        [
            "control: seed ignored, groups refused (GROUP_MISMATCH)",
            f"{control['mismatched']} / {control['groups']}",
        ],
        ["load average before / after (1 min)", f"{load_before[0]:.2f} / {load_after[0]:.2f}"],
    ]
    print(markdown_table(["measure", "value"], rows))
    print(
        f"\nfork(n={FORKS}) p50 {forks['fork_n']['p50']:.1f} ms (goal ≤ 100 ms); "
        f"reset_group identity {share:.1%} over {groups['groups']} groups (goal 100%)"
    )
    report = {
        "benchmark": "fork_n",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": {k: v for k, v in vars(args).items() if k != "note"},
        "note": args.note,
        "cpus": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": load_after,
        "fork": forks,
        "pool_fork": pooled,
        "reset_group": groups,
        "reset_group_seed_ignored": control,
        "goals_met": {
            "fork_n32_p50_100ms": forks["fork_n"]["p50"] <= 100,
            "reset_group_identity_100pct": share == 1.0,
        },
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    for path in (RESULTS / f"fork-n-{stamp}.json", ROOT / "benchmarks" / "client" / "fork_n.json"):
        path.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""Client CPU per step: the bench's lean client, ``EnvClient``, ``EnvPool`` and openenv-core's client.

    python benchmarks/client/client_cost.py                 # about a minute
    python benchmarks/client/client_cost.py --seconds 3 --rounds 5

In a trainer the client runs in the trainer's own process, so its CPU per step is paid for
every session of every batch. This measures it against the client's goals (CPU per step at
most 1.5× a lean client's, pool throughput at least 80% of it):

* **cost** — one benchmark server (``openenv_cli.bench.bench_env:app``, steps that do no
  work) pinned to core 0, the clients in this process pinned to core 1, 64 sessions
  stepping back to back. Client CPU per step = this process's CPU time / steps. The kinds
  run in rotation for ``--rounds`` rounds so drift of a shared machine hits all alike;
  the median round is reported. ``lean`` is ``openenv bench``'s sans-I/O connection sending
  the environment's action frame and checking the reply's prefix (no parsing);
  ``EnvClient`` sends typed actions and returns typed ``StepResult``\\ s; ``EnvPool`` does the
  same through one batched ``step``; ``openenv-core`` is the reference 0.3.0 client in its
  cached virtualenv (``tests/support/reference.py``), measured in its own process on core 1.
* **throughput** — two servers on core 0, 256 sessions from this process on core 1:
  steps/s of the lean client (128 sessions per server, as ``openenv bench`` drives them)
  and of one ``EnvPool`` of 256 sessions over both servers.

Prints a table and writes ``benchmarks/results/client-cost-<timestamp>.json`` (ignored by
git) and ``benchmarks/client/client_cost.json`` (committed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# first, even when an editable install already lists it after site-packages (whose
# stray `tests` package would win)
sys.path.insert(0, str(ROOT))

from openenv_cli.bench.bench_env import BenchAction, BenchObservation  # noqa: E402
from openenv_cli.bench.report import markdown_table  # noqa: E402
from openenv_cli.bench.server import bench_server  # noqa: E402
from openenv_cli.bench.target import Target, step_frame  # noqa: E402
from openenv_cli.bench.wsclient import LeanConnection  # noqa: E402
from openenv_runtime import EnvClient, EnvPool, State  # noqa: E402
from openenv_runtime.client import ws_url  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
SERVER_CPU, CLIENT_CPU = 0, 1
OBSERVATION_PREFIX = '{"type":"observation"'


class BenchClient(EnvClient[BenchAction, BenchObservation, State]):
    pass


# -- the kinds, each: run `sessions` sessions on `urls` for `seconds`; return steps -------------
async def run_lean(urls: list[str], sessions: int, seconds: float) -> int:
    conns = await asyncio.gather(
        *(
            LeanConnection.open(ws_url(urls[i % len(urls)]), compression=False)
            for i in range(sessions)
        )
    )
    # The environment's own action, as `openenv bench --action` sends it: the same bytes as
    # EnvClient's step(BenchAction()).
    frame = step_frame(Target("127.0.0.1", 0, action=BenchAction().model_dump_json()), 0.0)
    loop = asyncio.get_running_loop()
    counts = [0] * sessions

    async def one(i: int, deadline: float) -> None:
        conn = conns[i]
        n = 0
        while loop.time() < deadline:
            reply = await conn.request(frame)
            if not (isinstance(reply, str) and reply.startswith(OBSERVATION_PREFIX)):
                raise RuntimeError(f"unexpected reply {reply!r}")
            n += 1
        counts[i] = n

    steps = await _measured(
        lambda d: asyncio.gather(*(one(i, d) for i in range(sessions))), counts, seconds
    )
    await asyncio.gather(*(c.finish() for c in conns))
    return steps


async def run_client(urls: list[str], sessions: int, seconds: float) -> int:
    clients = [BenchClient(urls[i % len(urls)]) for i in range(sessions)]
    await asyncio.gather(*(c.connect() for c in clients))
    action = BenchAction()
    loop = asyncio.get_running_loop()
    counts = [0] * sessions

    async def one(i: int, deadline: float) -> None:
        env = clients[i]
        n = 0
        while loop.time() < deadline:
            result = await env.step(action)
            assert result.observation.ok
            n += 1
        counts[i] = n

    steps = await _measured(
        lambda d: asyncio.gather(*(one(i, d) for i in range(sessions))), counts, seconds
    )
    await asyncio.gather(*(c.close() for c in clients))
    return steps


async def run_pool(urls: list[str], sessions: int, seconds: float) -> int:
    pool = EnvPool(BenchClient, urls=urls, size=sessions)
    await pool.open()
    actions = [BenchAction()] * sessions
    loop = asyncio.get_running_loop()
    counts = [0]

    async def batches(deadline: float) -> None:
        n = 0
        while loop.time() < deadline:
            results = await pool.step(actions)
            n += sum(1 for r in results if not isinstance(r, Exception))
        counts[0] = n

    steps = await _measured(batches, counts, seconds)
    await pool.close()
    return steps


_last_cpu: list[float] = []


async def _measured(
    body: Callable[[float], Awaitable[Any]], counts: list[int], seconds: float
) -> int:
    """Warm up briefly, then run ``body`` for ``seconds`` and record this process's CPU time."""
    loop = asyncio.get_running_loop()
    await body(loop.time() + min(0.5, seconds / 4))
    cpu = time.process_time()
    await body(loop.time() + seconds)
    _last_cpu.append(time.process_time() - cpu)
    return sum(counts)


def measure(kind: str, urls: list[str], sessions: int, seconds: float) -> dict[str, float]:
    runner = {"lean": run_lean, "EnvClient": run_client, "EnvPool": run_pool}[kind]
    wall = time.perf_counter()
    steps = asyncio.run(runner(urls, sessions, seconds))
    wall = time.perf_counter() - wall
    cpu = _last_cpu.pop()
    return {
        "steps": steps,
        "cpu_us_per_step": cpu / steps * 1e6,
        "steps_per_s": steps / seconds,
        "wall": wall,
    }


REFERENCE_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from openenv.core import EnvClient
    from openenv.core.client_types import StepResult
    from openenv.core.env_server.types import Action, Observation, State

    class BenchAction(Action):
        wait: float = 0.0

    class BenchObservation(Observation):
        ok: bool = True

    class Bench(EnvClient[BenchAction, BenchObservation, State]):
        def _step_payload(self, action):
            return action.model_dump(exclude={"metadata"})
        def _parse_result(self, payload):
            obs = BenchObservation(**payload.get("observation", {}), reward=payload.get("reward"), done=payload.get("done", False))
            return StepResult(observation=obs, reward=payload.get("reward"), done=payload.get("done", False))
        def _parse_state(self, payload):
            return State(**payload)

    async def main(url, sessions, seconds):
        clients = [Bench(base_url=url) for _ in range(sessions)]
        for c in clients:
            await c.connect()
        loop = asyncio.get_running_loop()
        counts = [0] * sessions
        action = BenchAction()
        async def one(i, deadline):
            n = 0
            while loop.time() < deadline:
                await clients[i].step(action)
                n += 1
            counts[i] = n
        await asyncio.gather(*(one(i, loop.time() + 0.5) for i in range(sessions)))
        cpu = time.process_time()
        await asyncio.gather(*(one(i, loop.time() + seconds) for i in range(sessions)))
        cpu = time.process_time() - cpu
        for c in clients:
            await c.close()
        steps = sum(counts)
        print(json.dumps({"steps": steps, "cpu_us_per_step": cpu / steps * 1e6, "steps_per_s": steps / seconds}))

    asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
    """
)


def reference_python() -> Path | None:
    try:
        from tests.support.reference import reference_python as find

        return find()
    except Exception as exc:  # the reference virtualenv cannot be built here
        print(f"openenv-core client skipped: {exc}", file=sys.stderr)
        return None


def measure_reference(python: Path, url: str, sessions: int, seconds: float) -> dict[str, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(REFERENCE_SCRIPT)
    try:
        done = subprocess.run(
            [
                "taskset",
                "-c",
                str(CLIENT_CPU),
                str(python),
                handle.name,
                url,
                str(sessions),
                str(seconds),
            ],
            capture_output=True,
            text=True,
            timeout=seconds * 4 + 120,
            check=True,
        )
    finally:
        os.unlink(handle.name)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--seconds", type=float, default=3.0, help="measured seconds per kind and round"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--pool-sessions", type=int, default=256)
    parser.add_argument("--no-reference", action="store_true", help="skip openenv-core's client")
    parser.add_argument("--note", default="", help="free text stored with the results")
    args = parser.parse_args()

    os.sched_setaffinity(0, {CLIENT_CPU})
    python = None if args.no_reference else reference_python()
    kinds = ["lean", "EnvClient", "EnvPool"] + (["openenv-core"] if python else [])
    rounds: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    throughput: dict[str, list[dict[str, float]]] = {"lean": [], "EnvPool": []}
    with bench_server(cpus=[SERVER_CPU]) as one, bench_server(cpus=[SERVER_CPU]) as two:
        for r in range(args.rounds):
            for kind in kinds:
                if kind == "openenv-core":
                    assert python is not None
                    rounds[kind].append(
                        measure_reference(python, one.url, args.sessions, args.seconds)
                    )
                else:
                    rounds[kind].append(measure(kind, [one.url], args.sessions, args.seconds))
                print(
                    f"round {r + 1} {kind}: {rounds[kind][-1]['cpu_us_per_step']:.1f} µs/step",
                    file=sys.stderr,
                )
            for kind in throughput:
                throughput[kind].append(
                    measure(kind, [one.url, two.url], args.pool_sessions, args.seconds)
                )
                print(
                    f"round {r + 1} {kind} x{args.pool_sessions}: {throughput[kind][-1]['steps_per_s']:.0f} steps/s",
                    file=sys.stderr,
                )

    cost = {k: statistics.median(x["cpu_us_per_step"] for x in v) for k, v in rounds.items()}
    rate = {k: statistics.median(x["steps_per_s"] for x in v) for k, v in throughput.items()}
    lean = cost["lean"]
    rows = [
        [
            k,
            f"{v:.1f}",
            f"{v / lean:.2f}×",
            f"{statistics.median(x['steps_per_s'] for x in rounds[k]):.0f}",
        ]
        for k, v in cost.items()
    ]
    print(
        f"\nClient CPU per step ({args.sessions} sessions, one server on core {SERVER_CPU}, clients on core {CLIENT_CPU}; median of {args.rounds} rounds)\n"
    )
    print(markdown_table(["client", "µs CPU / step", "vs lean", "steps/s"], rows))
    ratio = rate["EnvPool"] / rate["lean"]
    print(f"\nThroughput, {args.pool_sessions} sessions over two servers on core {SERVER_CPU}\n")
    print(
        markdown_table(
            ["client", "steps/s", "vs lean"],
            [[k, f"{v:.0f}", f"{v / rate['lean']:.2f}"] for k, v in rate.items()],
        )
    )
    goals = {
        "EnvClient_vs_lean": cost["EnvClient"] / lean,
        "EnvPool_vs_lean": cost["EnvPool"] / lean,
        "pool_throughput_vs_lean": ratio,
    }
    print(
        f"\nGoals: EnvClient {goals['EnvClient_vs_lean']:.2f}× and EnvPool "
        f"{goals['EnvPool_vs_lean']:.2f}× the lean client's CPU (≤ 1.5×); pool throughput "
        f"{ratio:.0%} of the lean client's (≥ 80%)"
    )
    report = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": vars(args),
        "cpu_us_per_step": cost,
        "throughput_steps_per_s": rate,
        "goals": goals,
        "rounds": rounds,
        "throughput_rounds": throughput,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    for path in (
        RESULTS / f"client-cost-{stamp}.json",
        ROOT / "benchmarks" / "client" / "client_cost.json",
    ):
        path.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""Client CPU per step: the bench's lean client, ``EnvClient``, ``EnvPool`` and openenv-core's client.

    python benchmarks/client/client_cost.py                 # about two minutes
    python benchmarks/client/client_cost.py --seconds 3 --rounds 5
    python benchmarks/client/client_cost.py --compare before=/tmp/before/runtime

In a trainer the client runs in the trainer's own process, so its CPU per step is paid for
every session of every batch. This measures it against the client's goals (CPU per step at
most 1.5× a lean client's, pool throughput at least 80% of it):

* **cost** — one benchmark server (``openenv_cli.bench.bench_env:app``, steps that do no
  work) pinned to core 0, each client kind in a process of its own pinned to core 1, 64
  sessions stepping back to back. Client CPU per step = that process's CPU time / steps.
  The kinds run in rotation for ``--rounds`` rounds so drift of a shared machine hits all
  alike; the median round is reported, with the load average before each measurement.
  ``lean`` is ``openenv bench``'s sans-I/O connection sending the environment's action
  frame and checking the reply's prefix (no parsing); ``typed`` is the lean connection plus
  the least work a typed client on pydantic must do per step (``typed_floor.py``);
  ``EnvClient`` sends typed actions and returns typed ``StepResult``\\ s; ``EnvPool`` does the
  same through one batched ``step``; ``openenv-core`` is the reference 0.3.0 client in its
  cached virtualenv (``tests/support/reference.py``), measured in its own process on core 1.
* **interleaved** (``--cycles``, ``--window``) — ``lean``, ``typed`` and ``EnvClient`` open
  at once in one process pinned to core 1, on the same server; each steps its 64 sessions
  for a window (0.5 s) in turn, the order rotating, for 30 cycles. The kinds of one cycle
  meet the same moment of a shared machine, so the median of the cycles' ratios (reported
  with its quartiles) moves less with other tenants than whole rounds do.
* **throughput** — two servers on core 0, 256 sessions from a process on core 1:
  steps/s of the lean client (128 sessions per server, as ``openenv bench`` drives them)
  and of one ``EnvPool`` of 256 sessions over both servers.

``--compare NAME=DIR`` measures the runtime in ``DIR`` too, in the same rounds (put first on
the clients' ``PYTHONPATH``; ``openenv_cli``, the lean client included, comes from this
checkout), e.g. an older revision's ``runtime`` from
``git archive HEAD runtime | tar -x -C /tmp/before``: before and after side by side, each
against its own lean client.

Prints a table and writes ``benchmarks/results/client-cost-<timestamp>.json`` (ignored by
git) and, unless ``--no-write``, ``benchmarks/client/client_cost.json`` (committed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# first, even when an editable install already lists it after site-packages (whose
# stray `tests` package would win)
sys.path.insert(0, str(ROOT))

from benchmarks.client.typed_floor import floor_reader, floor_step  # noqa: E402
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


# -- the kinds, each: open `sessions` sessions on `urls`, ready to step ------------------------
# (each kind's step loop is written out in full: a shared helper would add a call per step to
# every kind and so shrink the ratios being measured)
@dataclass
class Stepping:
    """One kind's sessions, open: ``run(deadline)`` steps every one of them back to back until
    ``deadline`` (the loop's clock), leaving each one's steps in ``counts``; ``close()`` ends them."""

    run: Callable[[float], Awaitable[Any]]
    counts: list[int]
    close: Callable[[], Awaitable[Any]]


async def open_lean(urls: list[str], sessions: int) -> list[LeanConnection]:
    """``sessions`` lean connections, spread over ``urls``."""
    return await asyncio.gather(
        *(
            LeanConnection.open(ws_url(urls[i % len(urls)]), compression=False)
            for i in range(sessions)
        )
    )


async def lean_kind(urls: list[str], sessions: int) -> Stepping:
    conns = await open_lean(urls, sessions)
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

    return Stepping(
        lambda d: asyncio.gather(*(one(i, d) for i in range(sessions))),
        counts,
        lambda: asyncio.gather(*(c.finish() for c in conns)),
    )


async def typed_kind(urls: list[str], sessions: int) -> Stepping:
    conns = await open_lean(urls, sessions)
    read = floor_reader(BenchObservation)
    action = BenchAction()
    loop = asyncio.get_running_loop()
    counts = [0] * sessions

    async def one(i: int, deadline: float) -> None:
        conn = conns[i]
        n = 0
        while loop.time() < deadline:
            result = await floor_step(conn, action, read)
            assert result.observation.ok
            n += 1
        counts[i] = n

    return Stepping(
        lambda d: asyncio.gather(*(one(i, d) for i in range(sessions))),
        counts,
        lambda: asyncio.gather(*(c.finish() for c in conns)),
    )


async def client_kind(urls: list[str], sessions: int) -> Stepping:
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

    return Stepping(
        lambda d: asyncio.gather(*(one(i, d) for i in range(sessions))),
        counts,
        lambda: asyncio.gather(*(c.close() for c in clients)),
    )


async def pool_kind(urls: list[str], sessions: int) -> Stepping:
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

    return Stepping(batches, counts, pool.close)


KINDS: dict[str, Callable[[list[str], int], Awaitable[Stepping]]] = {
    "lean": lean_kind,
    "typed": typed_kind,
    "EnvClient": client_kind,
    "EnvPool": pool_kind,
}
INTERLEAVED = ("lean", "typed", "EnvClient")


async def run_kind(kind: str, urls: list[str], sessions: int, seconds: float) -> int:
    stepping = await KINDS[kind](urls, sessions)
    steps = await _measured(stepping.run, stepping.counts, seconds)
    await stepping.close()
    return steps


async def run_interleaved(
    urls: list[str], sessions: int, cycles: int, window: float
) -> dict[str, list[dict[str, float]]]:
    """Every kind of :data:`INTERLEAVED` open at once in this process; ``cycles`` times, each
    steps for ``window`` seconds in turn (the order rotating). Each window's CPU per step:
    the kinds of one cycle meet the same moment of a shared machine."""
    opened = {kind: await KINDS[kind](urls, sessions) for kind in INTERLEAVED}
    loop = asyncio.get_running_loop()
    for stepping in opened.values():  # warm-up
        await stepping.run(loop.time() + 0.3)
    windows: dict[str, list[dict[str, float]]] = {kind: [] for kind in INTERLEAVED}
    for cycle in range(cycles):
        shift = cycle % len(INTERLEAVED)
        for kind in INTERLEAVED[shift:] + INTERLEAVED[:shift]:
            stepping = opened[kind]
            before = resource.getrusage(resource.RUSAGE_SELF)
            await stepping.run(loop.time() + window)
            after = resource.getrusage(resource.RUSAGE_SELF)
            steps = sum(stepping.counts)
            user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
            windows[kind].append(
                {
                    "steps": steps,
                    "cpu_us_per_step": (user + system) / steps * 1e6,
                    "user_us_per_step": user / steps * 1e6,
                    "system_us_per_step": system / steps * 1e6,
                }
            )
    for stepping in opened.values():
        await stepping.close()
    return windows


_last_cpu: list[tuple[float, float, float]] = []


async def _measured(
    body: Callable[[float], Awaitable[Any]], counts: list[int], seconds: float
) -> int:
    """Warm up briefly, then run ``body`` for ``seconds`` and record this process's CPU time
    (in all, then user and system as the kernel splits it)."""
    loop = asyncio.get_running_loop()
    await body(loop.time() + min(0.5, seconds / 4))
    cpu, usage = time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
    await body(loop.time() + seconds)
    after = resource.getrusage(resource.RUSAGE_SELF)
    _last_cpu.append(
        (
            time.process_time() - cpu,
            after.ru_utime - usage.ru_utime,
            after.ru_stime - usage.ru_stime,
        )
    )
    return sum(counts)


def measure_here(kind: str, urls: list[str], sessions: int, seconds: float) -> dict[str, float]:
    wall = time.perf_counter()
    steps = asyncio.run(run_kind(kind, urls, sessions, seconds))
    wall = time.perf_counter() - wall
    cpu, user, system = _last_cpu.pop()
    return {
        "steps": steps,
        "cpu_us_per_step": cpu / steps * 1e6,
        # the user-space part is what the client's Python costs; the system part (socket
        # calls) also moves with how many replies each pass of the event loop finds
        "user_us_per_step": user / steps * 1e6,
        "system_us_per_step": system / steps * 1e6,
        "steps_per_s": steps / seconds,
        "wall": wall,
    }


def in_child(runtime: Path, kind: str, urls: list[str], *flags: str, seconds: float) -> Any:
    """What this script prints as ``--child KIND URLS FLAGS`` in a process of its own (on this
    process's core) running the runtime in ``runtime``; ``seconds``: how long it measures."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", kind, ",".join(urls), *flags],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(runtime), str(ROOT)])},
        capture_output=True,
        text=True,
        timeout=seconds * 4 + 120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(
    kind: str, runtime: Path, urls: list[str], sessions: int, seconds: float
) -> dict[str, float]:
    """``kind``'s figures from a process of its own running the runtime in ``runtime``."""
    load = os.getloadavg()[0]
    found = in_child(
        runtime, kind, urls, f"--sessions={sessions}", f"--seconds={seconds}", seconds=seconds
    )
    return {**found, "load_average": load}


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
    load = os.getloadavg()[0]
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
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "load_average": load}


def measure_interleaved(
    runtime: Path, urls: list[str], args: argparse.Namespace
) -> dict[str, list[dict[str, float]]]:
    """The interleaved windows (:func:`run_interleaved`) from a process of its own running
    the runtime in ``runtime``."""
    windows: dict[str, list[dict[str, float]]] = in_child(
        runtime,
        "interleaved",
        urls,
        f"--sessions={args.sessions}",
        f"--cycles={args.cycles}",
        f"--window={args.window}",
        seconds=args.cycles * args.window * len(INTERLEAVED),
    )
    return windows


def interleaved_summary(windows: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, Any]]:
    """Each kind's median window and, against the lean client, the median and quartiles of
    the cycles' ratios."""
    summary: dict[str, dict[str, Any]] = {}
    for kind, rows in windows.items():
        ratios = [
            x["cpu_us_per_step"] / lean["cpu_us_per_step"]
            for x, lean in zip(rows, windows["lean"], strict=True)
        ]
        summary[kind] = {
            "cpu_us_per_step": statistics.median(x["cpu_us_per_step"] for x in rows),
            "user_us_per_step": statistics.median(x["user_us_per_step"] for x in rows),
            "system_us_per_step": statistics.median(x["system_us_per_step"] for x in rows),
            "vs_lean": statistics.median(ratios),
            "vs_lean_quartiles": statistics.quantiles(ratios, n=4),
            "windows": rows,
        }
    return summary


def _medians(rounds: dict[str, list[dict[str, float]]], key: str) -> dict[str, float]:
    return {k: statistics.median(x[key] for x in v) for k, v in rounds.items() if v}


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
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="also measure the runtime in DIR (the directory holding openenv_runtime)",
    )
    parser.add_argument(
        "--no-write", action="store_true", help="print only; leave client_cost.json as it is"
    )
    parser.add_argument(
        "--cycles",
        type=int,
        default=30,
        help="interleaved cycles (0: none): lean, typed and EnvClient in one process, "
        "each stepping for --window seconds in turn",
    )
    parser.add_argument("--window", type=float, default=0.5, help="seconds per interleaved window")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "URLS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, urls = args.child
        if kind == "interleaved":
            found = run_interleaved(urls.split(","), args.sessions, args.cycles, args.window)
            print(json.dumps(asyncio.run(found)))
        else:
            print(json.dumps(measure_here(kind, urls.split(","), args.sessions, args.seconds)))
        return

    os.sched_setaffinity(0, {CLIENT_CPU})  # the clients' processes inherit it
    runtimes = {
        **{name: Path(d) for name, d in (item.split("=", 1) for item in args.compare)},
        "current": ROOT / "runtime",
    }
    python = None if args.no_reference else reference_python()
    kinds = ["lean", "typed", "EnvClient", "EnvPool"]
    rounds: dict[str, dict[str, list[dict[str, float]]]] = {
        label: {k: [] for k in kinds} for label in runtimes
    }
    reference: list[dict[str, float]] = []
    throughput: dict[str, dict[str, list[dict[str, float]]]] = {
        label: {"lean": [], "EnvPool": []} for label in runtimes
    }
    load_at_start = os.getloadavg()
    with bench_server(cpus=[SERVER_CPU]) as one, bench_server(cpus=[SERVER_CPU]) as two:
        for r in range(args.rounds):
            for label, runtime in runtimes.items():
                for kind in kinds:
                    row = measure(kind, runtime, [one.url], args.sessions, args.seconds)
                    rounds[label][kind].append(row)
                    print(
                        f"round {r + 1} {label} {kind}: {row['cpu_us_per_step']:.1f} µs/step "
                        f"(load {row['load_average']:.2f})",
                        file=sys.stderr,
                    )
            if python is not None:
                reference.append(measure_reference(python, one.url, args.sessions, args.seconds))
                print(
                    f"round {r + 1} openenv-core: {reference[-1]['cpu_us_per_step']:.1f} µs/step",
                    file=sys.stderr,
                )
            for label, runtime in runtimes.items():
                for kind in ("lean", "EnvPool"):
                    row = measure(
                        kind, runtime, [one.url, two.url], args.pool_sessions, args.seconds
                    )
                    throughput[label][kind].append(row)
                    print(
                        f"round {r + 1} {label} {kind} x{args.pool_sessions}: "
                        f"{row['steps_per_s']:.0f} steps/s",
                        file=sys.stderr,
                    )

        interleaved = {
            label: measure_interleaved(runtime, [one.url], args) if args.cycles else {}
            for label, runtime in runtimes.items()
        }

    results: dict[str, dict[str, Any]] = {}
    for label in runtimes:
        windows = interleaved_summary(interleaved[label])
        cost = _medians(rounds[label], "cpu_us_per_step")
        rate = _medians(throughput[label], "steps_per_s")
        results[label] = {
            "runtime": str(runtimes[label]),
            "cpu_us_per_step": cost,
            "user_us_per_step": _medians(rounds[label], "user_us_per_step"),
            "system_us_per_step": _medians(rounds[label], "system_us_per_step"),
            "throughput_steps_per_s": rate,
            "goals": {
                "EnvClient_vs_lean": cost["EnvClient"] / cost["lean"],
                "EnvPool_vs_lean": cost["EnvPool"] / cost["lean"],
                "typed_floor_vs_lean": cost["typed"] / cost["lean"],
                "pool_throughput_vs_lean": rate["EnvPool"] / rate["lean"],
                **{
                    f"{k}_vs_lean_interleaved": windows[k]["vs_lean"]
                    for k in windows
                    if k != "lean"
                },
            },
            # each round's ratio (the kinds run back to back), then their median: steadier
            # than the ratio of medians while other work comes and goes
            "paired_vs_lean": {
                k: statistics.median(
                    x["cpu_us_per_step"] / lean["cpu_us_per_step"]
                    for x, lean in zip(rounds[label][k], rounds[label]["lean"], strict=True)
                )
                for k in ("typed", "EnvClient", "EnvPool")
            },
            "load_average_median": statistics.median(
                x["load_average"] for v in rounds[label].values() for x in v
            ),
            "interleaved": windows,
        }
    if reference:
        results["current"]["cpu_us_per_step"]["openenv-core"] = statistics.median(
            x["cpu_us_per_step"] for x in reference
        )

    print(
        f"\nClient CPU per step ({args.sessions} sessions, one server on core {SERVER_CPU}, "
        f"clients on core {CLIENT_CPU}; median of {args.rounds} rounds)\n"
    )
    table = []
    for label, result in results.items():
        cost, lean = result["cpu_us_per_step"], result["cpu_us_per_step"]["lean"]
        for k, v in cost.items():
            per_s = statistics.median(
                x["steps_per_s"] for x in (reference if k == "openenv-core" else rounds[label][k])
            )
            user = result["user_us_per_step"].get(k)
            split = f"{user:.1f} / {result['system_us_per_step'][k]:.1f}" if user else "–"
            table.append([label, k, f"{v:.1f}", f"{v / lean:.2f}×", split, f"{per_s:.0f}"])
    print(
        markdown_table(
            ["runtime", "client", "µs CPU / step", "vs lean", "user / system µs", "steps/s"],
            table,
        )
    )
    print(f"\nThroughput, {args.pool_sessions} sessions over two servers on core {SERVER_CPU}\n")
    print(
        markdown_table(
            ["runtime", "client", "steps/s", "vs lean"],
            [
                [label, k, f"{v:.0f}", f"{v / result['throughput_steps_per_s']['lean']:.2f}"]
                for label, result in results.items()
                for k, v in result["throughput_steps_per_s"].items()
            ],
        )
    )
    if args.cycles:
        print(
            f"\nInterleaved: {args.cycles} cycles of {args.window} s windows, the kinds in one "
            "process (median window; the ratio is the median of each cycle's)\n"
        )
        print(
            markdown_table(
                ["runtime", "client", "µs CPU / step", "vs lean", "middle half of the ratios"],
                [
                    [
                        label,
                        k,
                        f"{v['cpu_us_per_step']:.1f}",
                        f"{v['vs_lean']:.2f}×" if k != "lean" else "1.00×",
                        f"{v['vs_lean_quartiles'][0]:.2f}–{v['vs_lean_quartiles'][2]:.2f}"
                        if k != "lean"
                        else "",
                    ]
                    for label, result in results.items()
                    for k, v in result["interleaved"].items()
                ],
            )
        )
    for label, result in results.items():
        goals = result["goals"]
        print(
            f"\n{label} (load average {result['load_average_median']:.2f}): typed floor "
            f"{goals['typed_floor_vs_lean']:.2f}× (paired {result['paired_vs_lean']['typed']:.2f}×), "
            f"EnvClient "
            f"{goals['EnvClient_vs_lean']:.2f}× and EnvPool {goals['EnvPool_vs_lean']:.2f}× "
            f"the lean client's CPU (medians of the rounds' ratios: "
            f"{result['paired_vs_lean']['EnvClient']:.2f}× and "
            f"{result['paired_vs_lean']['EnvPool']:.2f}×; user space "
            f"{result['user_us_per_step']['EnvClient'] / result['user_us_per_step']['lean']:.2f}× "
            f"and {result['user_us_per_step']['EnvPool'] / result['user_us_per_step']['lean']:.2f}×)"
            "; pool throughput "
            f"{goals['pool_throughput_vs_lean']:.0%} of the lean client's"
        )
    current = results["current"]
    report = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": vars(args),
        "load_average": {"start": load_at_start, "end": os.getloadavg()},
        # this checkout's runtime (other tools read these keys)
        "cpu_us_per_step": current["cpu_us_per_step"],
        "throughput_steps_per_s": current["throughput_steps_per_s"],
        "goals": current["goals"],
        "rounds": {**rounds["current"], **({"openenv-core": reference} if reference else {})},
        "throughput_rounds": throughput["current"],
        # every runtime measured (--compare), each against its own lean client
        "compare": {
            label: {**result, "rounds": rounds[label], "throughput_rounds": throughput[label]}
            for label, result in results.items()
        },
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    written = [RESULTS / f"client-cost-{stamp}.json"]
    if not args.no_write:
        written.append(ROOT / "benchmarks" / "client" / "client_cost.json")
    for path in written:
        path.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()

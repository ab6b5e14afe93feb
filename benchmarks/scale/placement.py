"""Where ``EnvPool`` opens sessions over replicas of unequal capacity, against round-robin.

    python benchmarks/scale/placement.py                 # under a minute
    python benchmarks/scale/placement.py --sessions 200 --capacities 16,64,128

Three replicas of the built-in benchmark environment (``openenv_cli.bench.bench_env:app``) on
127.0.0.1, each with its own ``MAX_CONCURRENT_ENVS`` (16 / 64 / 128 by default) and an
``OPENENV_ADMIN_TOKEN`` so ``POST /admin/drain`` works. Scenarios, one after the other on
the same replicas (each waits until every replica's ``/health`` shows 0 sessions again):

* **pool** — one ``EnvPool`` of ``--sessions`` sessions over the three URLs (it places by
  each replica's free capacity read from ``/health``);
* **round-robin** — the same number of plain clients, client ``i`` on URL ``i % 3``;
* **two pools, one after the other** — two pools of half the sessions each, the second opened
  once the first is open (another trainer's sessions, as the second pool sees them);
* **two pools at once** — the same two pools opened concurrently (neither can see the other's
  sessions in ``/health`` when it places its own);
* **drain** — a pool of ``--drain-first`` sessions is opened and reset, the middle replica
  is drained (``POST /admin/drain``), then a second pool of ``--drain-second`` new sessions
  opens; sessions per replica from each replica's ``/health`` ``active_sessions``. Then the
  first pool's slots on the draining replica are moved with ``pool.replace(i)`` and timed
  against the replica's drain timeout;
* **follow drain** — on fresh replicas, a pool of ``--drain-first`` sessions (``follow_drain``, the default) is
  opened and reset, the middle replica drained, and the pool resets its next episode: the
  replica leaves the resets of its sessions unanswered (close code 1012) and the pool opens
  those slots on the other replicas and resets them there. Timed from the drain request to
  the last slot moved (the reset returned) and to the replica's ``/health`` showing 0 sessions.

Sessions refused (``CAPACITY_REACHED``, or any failed open) after the first reset, sessions the
pool re-placed itself (a replica refused at the first request, the pool opened the session on
another), sessions per replica against its capacity (from ``/health``, while every session is open) and whether any replica went past it.
Prints a table and writes ``benchmarks/scale/placement_latest.md`` and ``.json``. Every server is
started and stopped by handle; every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from openenv_cli.bench.bench_env import BenchAction, BenchObservation  # noqa: E402
from openenv_cli.bench.report import markdown_table  # noqa: E402
from openenv_cli.bench.server import ServerProcess, bench_server  # noqa: E402
from openenv_runtime import EnvClient, EnvError, EnvPool, State  # noqa: E402
from openenv_runtime.http_reads import read_json  # noqa: E402

OUT_MD = ROOT / "benchmarks" / "scale" / "placement_latest.md"
OUT_JSON = ROOT / "benchmarks" / "scale" / "placement_latest.json"
OPEN_TIMEOUT = 120.0  # seconds allowed for opening a scenario's sessions
SETTLE_TIMEOUT = 30.0  # seconds allowed for the replicas to show 0 sessions between scenarios


class BenchClient(EnvClient[BenchAction, BenchObservation, State]):
    pass


def active(urls: Sequence[str]) -> list[int]:
    """Each replica's ``active_sessions`` from its ``/health``."""
    return [int(read_json(u, "/health", timeout=5.0)["active_sessions"]) for u in urls]


def settle(urls: Sequence[str]) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while any(active(urls)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"sessions still open after {SETTLE_TIMEOUT:g}s: {active(urls)}")
        time.sleep(0.1)


def drain(url: str, token: str) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{url}/admin/drain", method="POST", headers={"X-OpenEnv-Admin-Token": token}
    )
    with urllib.request.urlopen(request, timeout=5.0) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def reason(error: BaseException) -> str:
    if not isinstance(error, EnvError):
        return type(error).__name__
    return "CAPACITY_REACHED" if "at capacity" in error.message else error.code


async def refused_codes(pool: EnvPool[BenchClient]) -> Counter[str]:
    """The slots without a session after the first reset, by why.

    A replica that is full accepts the WebSocket and refuses with a ``CAPACITY_REACHED``
    message (unless asked through a balancer), so a refusal shows at the first request: the
    pool then opens that session on another replica itself. What is left failed for good.
    """
    results = await pool.reset()
    return Counter(reason(r) for r in results if isinstance(r, EnvError))


def figures(
    name: str, urls: Sequence[str], capacities: Sequence[int], refused: Counter[str]
) -> dict[str, Any]:
    """Sessions per replica (``/health``, now) against capacity, and the refusals."""
    per_replica = active(urls)
    return {
        "scenario": name,
        "refused": sum(refused.values()),
        "refused_codes": dict(refused),
        "per_replica": per_replica,
        "capacity": list(capacities),
        "past_capacity": any(n > c for n, c in zip(per_replica, capacities, strict=True)),
    }


async def pool_scenario(
    urls: list[str], capacities: Sequence[int], sizes: Sequence[int], together: bool, name: str
) -> dict[str, Any]:
    pools = [EnvPool(BenchClient, urls=urls, size=n, timeout=30.0) for n in sizes]
    try:
        if together:
            await asyncio.wait_for(asyncio.gather(*(p.open() for p in pools)), OPEN_TIMEOUT)
        else:
            for p in pools:
                await asyncio.wait_for(p.open(), OPEN_TIMEOUT)
        planned = [[p.server_of(i) for i in range(p.size)] for p in pools]
        refused: Counter[str] = Counter()
        for p in pools:
            refused += await refused_codes(p)
        result = figures(name, urls, capacities, refused)
        result["re_placed"] = sum(
            p.server_of(i) != plan[i]
            for p, plan in zip(pools, planned, strict=True)
            for i in range(p.size)
        )
        result["per_pool"] = [
            [[p.server_of(i) for i in range(p.size)].count(u) for u in urls] for p in pools
        ]
        return result
    finally:
        await asyncio.gather(*(p.close() for p in pools), return_exceptions=True)


async def round_robin(urls: list[str], capacities: Sequence[int], n: int) -> dict[str, Any]:
    clients = [BenchClient(urls[i % len(urls)], resume=False) for i in range(n)]
    try:
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(c.reset() for c in clients), return_exceptions=True), OPEN_TIMEOUT
        )
        refused = Counter(reason(o) for o in outcomes if isinstance(o, BaseException))
        return figures("round-robin", urls, capacities, refused)
    finally:
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)


async def drain_scenario(
    urls: list[str], capacities: Sequence[int], first: int, second: int, token: str, victim: int
) -> dict[str, Any]:
    pool = EnvPool(BenchClient, urls=urls, size=first, timeout=30.0)
    later = EnvPool(BenchClient, urls=urls, size=second, timeout=30.0)
    try:
        await asyncio.wait_for(pool.open(), OPEN_TIMEOUT)
        refused = await refused_codes(pool)  # running episodes: the drain lets them go on
        before = active(urls)
        answer = drain(urls[victim], token)
        await asyncio.wait_for(later.open(), OPEN_TIMEOUT)
        refused += await refused_codes(later)
        after_second = active(urls)
        placed_second = [[later.server_of(i) for i in range(second)].count(u) for u in urls]
        on_victim = [i for i in range(first) if pool.server_of(i) == urls[victim]]
        began = time.perf_counter()
        moved = await asyncio.wait_for(move(pool, on_victim), OPEN_TIMEOUT)
        deadline = time.monotonic() + float(answer["drain_timeout"])
        while active(urls)[victim] and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        move_seconds = time.perf_counter() - began
        after_move = active(urls)
        result = figures("drain", urls, capacities, refused)
        result.update(
            {
                "drained": urls[victim],
                "drain_timeout": answer["drain_timeout"],
                "before_drain": before,
                "second_pool_placed": placed_second,
                "after_second_pool": after_second,
                "on_drained_replica": len(on_victim),
                "moved": sum(1 for o in moved if not isinstance(o, BaseException)),
                "move_failures": [repr(o) for o in moved if isinstance(o, BaseException)],
                "move_seconds": move_seconds,
                "after_move": after_move,
                "moved_within_drain_timeout": after_move[victim] == 0
                and move_seconds < float(answer["drain_timeout"]),
            }
        )
        return result
    finally:
        await asyncio.gather(pool.close(), later.close(), return_exceptions=True)


async def follow_scenario(
    urls: list[str], capacities: Sequence[int], first: int, token: str, victim: int
) -> dict[str, Any]:
    pool = EnvPool(BenchClient, urls=urls, size=first, timeout=30.0)
    try:
        await asyncio.wait_for(pool.open(), OPEN_TIMEOUT)
        refused = await refused_codes(pool)
        before = active(urls)
        on_victim = sum(pool.server_of(i) == urls[victim] for i in range(first))
        began = time.perf_counter()
        answer = drain(urls[victim], token)
        results = await asyncio.wait_for(pool.reset(), OPEN_TIMEOUT)  # the next episode
        last_moved = time.perf_counter() - began
        deadline = time.monotonic() + float(answer["drain_timeout"])
        while active(urls)[victim] and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        emptied = time.perf_counter() - began
        result = figures("follow drain", urls, capacities, refused)
        result.update(
            {
                "drained": urls[victim],
                "drain_timeout": answer["drain_timeout"],
                "before_drain": before,
                "on_drained_replica": on_victim,
                "drain_moves": pool.drain_moves,
                "reset_failures": sum(isinstance(r, EnvError) for r in results),
                "last_moved_seconds": last_moved,
                "emptied_seconds": emptied,
                "moved_within_drain_timeout": active(urls)[victim] == 0
                and emptied < float(answer["drain_timeout"]),
            }
        )
        return result
    finally:
        await pool.close()


async def move(pool: EnvPool[BenchClient], slots: Sequence[int]) -> list[BaseException | None]:
    """``pool.replace(i)`` one slot after the other: each reads ``/health`` after the previous
    one's session is open, so they do not crowd onto one replica."""
    outcomes: list[BaseException | None] = []
    for i in slots:
        try:
            await pool.replace(i)
            outcomes.append(None)
        except EnvError as error:
            outcomes.append(error)
    return outcomes


@contextlib.contextmanager
def replicas(capacities: Sequence[int], token: str, drain_timeout: float) -> Iterator[list[str]]:
    servers: list[ServerProcess] = []
    try:
        for capacity in capacities:
            server = bench_server(
                env={
                    "MAX_CONCURRENT_ENVS": str(capacity),
                    "OPENENV_ADMIN_TOKEN": token,
                    "DRAIN_TIMEOUT": str(drain_timeout),
                }
            )
            servers.append(server)
            server.start()
        for server in servers:
            server.wait_healthy(60.0)
        yield [s.url for s in servers]
    finally:
        for server in servers:
            server.stop()


def render(results: list[dict[str, Any]], capacities: Sequence[int]) -> str:
    headers = [
        "scenario",
        "sessions refused",
        "re-placed by the pool",
        *(f"replica {i} (cap {c})" for i, c in enumerate(capacities)),
        "past capacity",
    ]
    rows = [
        [
            r["scenario"],
            str(r["refused"]),
            str(r["re_placed"]) if "re_placed" in r else "—",
            *(f"{n}/{c}" for n, c in zip(r["per_replica"], r["capacity"], strict=True)),
            "yes" if r["past_capacity"] else "no",
        ]
        for r in results
    ]
    return markdown_table(headers, rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--capacities", default="16,64,128", help="MAX_CONCURRENT_ENVS each")
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--drain-first", type=int, default=90, help="pool open before the drain")
    parser.add_argument("--drain-second", type=int, default=40, help="pool opened after it")
    parser.add_argument("--drain-replica", type=int, default=1, help="which replica drains")
    parser.add_argument("--drain-timeout", type=float, default=20.0, help="DRAIN_TIMEOUT (s)")
    parser.add_argument("--note", default="", help="free text stored with the results")
    args = parser.parse_args()
    capacities = [int(c) for c in args.capacities.split(",")]
    token = secrets.token_urlsafe(24)
    half = [args.sessions // 2, args.sessions - args.sessions // 2]
    results: list[dict[str, Any]] = []
    with replicas(capacities, token, args.drain_timeout) as urls:
        steps: list[Callable[[], Coroutine[Any, Any, dict[str, Any]]]] = [
            lambda: pool_scenario(urls, capacities, [args.sessions], False, "pool"),
            lambda: round_robin(urls, capacities, args.sessions),
            lambda: pool_scenario(urls, capacities, half, False, "two pools, one after the other"),
            lambda: pool_scenario(urls, capacities, half, True, "two pools at once"),
            lambda: drain_scenario(
                urls,
                capacities,
                args.drain_first,
                args.drain_second,
                token,
                args.drain_replica,
            ),
        ]
        for step in steps:
            settle(urls)
            result = asyncio.run(step())
            results.append(result)
            print(f"{result['scenario']}: {result}", file=sys.stderr)
    # fresh replicas: the one drained above stays draining
    with replicas(capacities, token, args.drain_timeout) as urls:
        follow = follow_scenario(urls, capacities, args.drain_first, token, args.drain_replica)
        result = asyncio.run(follow)
        results.append(result)
        print(f"{result['scenario']}: {result}", file=sys.stderr)
    table = render(results, capacities)
    d, f = results[-2], results[-1]
    drain_lines = (
        f"Drain: a pool of {args.drain_first} opened and reset "
        f"(per replica {d['before_drain']}), replica {args.drain_replica} drained "
        f"(DRAIN_TIMEOUT {d['drain_timeout']:g} s), then a pool of {args.drain_second} opened: "
        f"it placed {d['second_pool_placed']} per replica (/health after: "
        f"{d['after_second_pool']}). The first pool's {d['on_drained_replica']} sessions on the "
        f"draining replica moved with pool.replace(i), one after the other: {d['moved']} moved in "
        f"{d['move_seconds']:.2f} s, per replica after: {d['after_move']} "
        f"(within the drain timeout: {'yes' if d['moved_within_drain_timeout'] else 'no'})."
        f"\n\nFollow drain: a pool of {args.drain_first} (follow_drain=True) opened and reset "
        f"(per replica {f['before_drain']}), replica {args.drain_replica} drained, then "
        f"pool.reset(): {f['drain_moves']} of the {f['on_drained_replica']} slots on the draining "
        f"replica moved by the pool itself ({f['reset_failures']} resets failed); drain start to "
        f"last slot moved {f['last_moved_seconds']:.2f} s, to the replica empty "
        f"{f['emptied_seconds']:.2f} s (within the drain timeout: "
        f"{'yes' if f['moved_within_drain_timeout'] else 'no'})."
    )
    print(table)
    print("\n" + drain_lines)
    report = {
        "benchmark": "placement",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": {k: v for k, v in vars(args).items() if k != "note"},
        "note": args.note,
        "results": results,
    }
    OUT_JSON.write_text(json.dumps(report, indent=2) + "\n")
    OUT_MD.write_text(
        f"# Placement by free capacity ({report['when']})\n\n"
        f"`python benchmarks/scale/placement.py` — {args.sessions} sessions over three replicas of "
        f"the benchmark environment with MAX_CONCURRENT_ENVS {args.capacities}; sessions per "
        "replica from each one's `/health` `active_sessions` while every session is open.\n\n"
        f"{table}\n\n{drain_lines}\n"
    )


if __name__ == "__main__":
    main()

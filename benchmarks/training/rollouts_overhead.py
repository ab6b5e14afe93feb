"""The capture proxy's overhead, for ``benchmarks/training/rollouts.py --parts overhead``.

``--sessions`` concurrent sessions each make ``--calls`` chat completions, ``--pace`` seconds
apart, to the stand-in model server (its own process) either directly or through
``openenv capture`` (its own process). Direct and proxied phases rotate within one run
(``--rounds`` rounds; the order shifts each round) so that a machine that drifts affects them
alike; ``--proxy-src DIR`` adds a second proxy, run from another checkout's ``runtime/`` and
CLI (an earlier version: before and after in the same run). Both send the same body with the token options (``return_token_ids``, ``logprobs``):
the proxy adds them, and a trainer calling the server directly would ask for them too, so the
difference is the proxy's forwarding and recording, not a larger answer.

Cores (when the machine has two or more): the stand-in server and this load generator on
core 0, the proxy alone on core 1. Other tenants of the machine are not pinned away: the load
average is reported with every round.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from openenv_runtime.llm.tokens import TOKEN_OPTIONS

CLIENT_CORE, PROXY_CORE = 0, 1


def pin(pid: int, core: int) -> int | None:
    """Pin ``pid`` (0: this process) to ``core`` when the machine has it; the core or None."""
    if (os.cpu_count() or 1) < 2:
        return None
    try:
        os.sched_setaffinity(pid, {core})
    except OSError:
        return None
    return core


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process, from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, from ``/proc``."""
    return sum(cpu_times(pid))


def exited(process: subprocess.Popen[bytes]) -> str | None:
    """Why ``process`` can no longer answer (it exited), or None while it runs."""
    code = process.poll()
    return None if code is None else f"{process.args!r} exited with {code}"


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


async def phase(
    target: str | None, sessions: int, calls: int, pace: float, llm: str, floor: bool = False
) -> list[float]:
    """One phase: ``sessions`` sessions of ``calls`` calls, to ``llm`` (``target`` None) or
    through the proxy at ``target`` (``floor``: a raw forwarder, no sessions); the latencies
    in ms."""
    body = orjson.dumps(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "x" * 200}],
            "max_tokens": 32,
            **TOKEN_OPTIONS,
        }
    )
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=2)
    async with aiohttp.ClientSession(connector=connector) as client:

        async def one_session(index: int) -> None:
            headers = {"content-type": "application/json"}
            if floor:
                url = f"{target}/v1/chat/completions"
            elif target is not None:
                async with client.post(f"{target}/sessions") as made:
                    s = await made.json()
                url = f"{s['base_url']}/chat/completions"
                headers["authorization"] = f"Bearer {s['api_key']}"
            else:
                url = f"{llm}/v1/chat/completions"
            await asyncio.sleep(pace * index / sessions)  # spread the sessions' phases
            for _ in range(calls):
                started = time.perf_counter()
                async with client.post(url, data=body, headers=headers) as answer:
                    await answer.read()
                latencies.append((time.perf_counter() - started) * 1000)
                assert answer.status == 200, answer.status
                await asyncio.sleep(pace)  # think time: keeps the model server unsaturated
            # read back what was recorded, then end the session, as a harness does (the proxy
            # holds at most --max-sessions); both count as the proxy's
            if target is not None and not floor:
                session_url = f"{target}/sessions/{s['session_id']}"
                async with client.get(f"{session_url}/trace_entries", headers=headers) as entries:
                    assert len(await entries.json()) == calls
                async with client.delete(session_url, headers=headers) as ended:
                    assert ended.status == 204, ended.status

        await asyncio.gather(*(one_session(i) for i in range(sessions)))
    return latencies


def overhead(
    *,
    sessions: int,
    calls: int,
    pace: float,
    rounds: int,
    llm: str,
    proxies: dict[str, tuple[str, int]],
    stub_pid: int,
    cores: dict[str, Any],
    floors: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Direct and proxied phases in rotation (``proxies``: name → (URL, pid)); latency
    percentiles, CPU per call, load averages. The first proxy is the one reported as
    ``proxy``; others (an earlier version, say) get their own ``<name>_`` figures; those in
    ``floors`` are raw forwarders (``raw_forwarder.py``), called without sessions."""
    targets: dict[str, str | None] = {"direct": None, **{n: u for n, (u, _) in proxies.items()}}
    floor_urls = {proxies[n][0] for n in floors}
    for target in targets.values():  # warm-up, every path
        asyncio.run(phase(target, sessions, 2, pace / 4, llm, target in floor_urls))
    names = list(targets)
    pooled: dict[str, list[float]] = {n: [] for n in names}
    proxy_cpu = dict.fromkeys(names, 0.0)
    proxy_sys = dict.fromkeys(names, 0.0)
    stub_cpu = dict.fromkeys(names, 0.0)
    client_cpu = dict.fromkeys(names, 0.0)
    per_round = []
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        row: dict[str, Any] = {"round": r, "order": order, "load_before": os.getloadavg()[0]}
        for name in order:
            pid = proxies[name][1] if name in proxies else None
            p0, p0_sys = cpu_times(pid) if pid else (0.0, 0.0)
            s0, c0 = cpu_seconds(stub_pid), time.process_time()
            values = asyncio.run(phase(targets[name], sessions, calls, pace, llm, name in floors))
            if pid:
                p1, p1_sys = cpu_times(pid)
                proxy_cpu[name] += p1 + p1_sys - p0 - p0_sys
                proxy_sys[name] += p1_sys - p0_sys
            stub_cpu[name] += cpu_seconds(stub_pid) - s0
            client_cpu[name] += time.process_time() - c0
            pooled[name] += values
            row[f"{name}_p50_ms"] = percentile(values, 50)
            row[f"{name}_p99_ms"] = percentile(values, 99)
        for name in proxies:
            row[f"{name}_overhead_p50_ms"] = row[f"{name}_p50_ms"] - row["direct_p50_ms"]
            row[f"{name}_overhead_p99_ms"] = row[f"{name}_p99_ms"] - row["direct_p99_ms"]
        row["load_after"] = os.getloadavg()[0]
        per_round.append(row)
    result: dict[str, Any] = {
        "sessions": sessions,
        "calls_per_session": calls,
        "pace_s": pace,
        "rounds": rounds,
        "calls_per_s_offered": sessions / pace,
        "cores": cores,
        "load_generator": "aiohttp, one process",
        "proxies": list(proxies),
    }
    for name, values in pooled.items():
        n = max(1, len(values))
        prefix = "" if name == "direct" else f"{name}_"
        result[f"{name}_calls"] = len(values)
        result[f"{name}_p50_ms"] = percentile(values, 50)
        result[f"{name}_p99_ms"] = percentile(values, 99)
        result[f"{prefix}stub_cpu_us_per_call"] = stub_cpu[name] / n * 1e6
        result[f"{prefix}client_cpu_us_per_call"] = client_cpu[name] / n * 1e6
        if name in proxies:
            result[f"{name}_overhead_p50_ms"] = result[f"{name}_p50_ms"] - result["direct_p50_ms"]
            result[f"{name}_overhead_p99_ms"] = result[f"{name}_p99_ms"] - result["direct_p99_ms"]
            for q in ("p50", "p99"):
                result[f"{name}_overhead_{q}_ms_median_of_rounds"] = statistics.median(
                    row[f"{name}_overhead_{q}_ms"] for row in per_round
                )
            result[f"{name}_cpu_us_per_call"] = proxy_cpu[name] / n * 1e6
            result[f"{name}_system_cpu_us_per_call"] = proxy_sys[name] / n * 1e6
    loads = [row["load_before"] for row in per_round] + [row["load_after"] for row in per_round]
    result["load_average_range"] = [min(loads), max(loads)]
    result["per_round"] = per_round
    return result

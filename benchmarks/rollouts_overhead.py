"""The capture proxy's overhead, for ``benchmarks/rollouts.py --parts overhead``.

``--sessions`` concurrent sessions each make ``--calls`` chat completions, ``--pace`` seconds
apart, to the stand-in model server (its own process) either directly or through
``openenv capture`` (its own process). Direct and proxied phases alternate within one run
(``--rounds`` rounds; the order flips each round) so that a machine that drifts affects both
alike. Both send the same body with the token options (``return_token_ids``, ``logprobs``):
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
import time
from pathlib import Path
from typing import Any

import httpx

from openenv_runtime.llm_tokens import TOKEN_OPTIONS

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


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


async def _phase(
    through_proxy: bool, sessions: int, calls: int, pace: float, llm: str, proxy: str
) -> list[float]:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "x" * 200}],
        "max_tokens": 32,
        **TOKEN_OPTIONS,
    }
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=None, keepalive_expiry=2)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def one_session(index: int) -> None:
            if through_proxy:
                s = (await client.post(f"{proxy}/sessions")).json()
                url = f"{s['base_url']}/chat/completions"
                headers = {"Authorization": f"Bearer {s['api_key']}"}
            else:
                url, headers = f"{llm}/v1/chat/completions", {}
            await asyncio.sleep(pace * index / sessions)  # spread the sessions' phases
            for _ in range(calls):
                started = time.perf_counter()
                answer = await client.post(url, json=body, headers=headers)
                latencies.append((time.perf_counter() - started) * 1000)
                answer.raise_for_status()
                await asyncio.sleep(pace)  # think time: keeps the model server unsaturated
            if through_proxy:  # read back what was recorded: its CPU counts as the proxy's
                entries = await client.get(f"{proxy}/sessions/{s['session_id']}/trace_entries")
                assert len(entries.json()) == calls

        await asyncio.gather(*(one_session(i) for i in range(sessions)))
    return latencies


def overhead(
    *,
    sessions: int,
    calls: int,
    pace: float,
    rounds: int,
    llm: str,
    proxy: str,
    proxy_pid: int,
    stub_pid: int,
    cores: dict[str, Any],
) -> dict[str, Any]:
    """Direct and proxied phases in alternation; latency percentiles, CPU, load averages."""
    asyncio.run(_phase(False, sessions, 2, pace / 4, llm, proxy))  # warm-up, both paths
    asyncio.run(_phase(True, sessions, 2, pace / 4, llm, proxy))
    pooled: dict[str, list[float]] = {"direct": [], "proxy": []}
    proxy_cpu = {"direct": 0.0, "proxy": 0.0}
    stub_cpu = {"direct": 0.0, "proxy": 0.0}
    client_cpu = {"direct": 0.0, "proxy": 0.0}
    per_round = []
    for r in range(rounds):
        order = ("direct", "proxy") if r % 2 == 0 else ("proxy", "direct")
        row: dict[str, Any] = {"round": r, "order": list(order), "load_before": os.getloadavg()}
        for name in order:
            p0, s0, c0 = cpu_seconds(proxy_pid), cpu_seconds(stub_pid), time.process_time()
            values = asyncio.run(_phase(name == "proxy", sessions, calls, pace, llm, proxy))
            proxy_cpu[name] += cpu_seconds(proxy_pid) - p0
            stub_cpu[name] += cpu_seconds(stub_pid) - s0
            client_cpu[name] += time.process_time() - c0
            pooled[name] += values
            row[f"{name}_p50_ms"] = percentile(values, 50)
            row[f"{name}_p99_ms"] = percentile(values, 99)
        row["overhead_p50_ms"] = row["proxy_p50_ms"] - row["direct_p50_ms"]
        row["overhead_p99_ms"] = row["proxy_p99_ms"] - row["direct_p99_ms"]
        row["load_after"] = os.getloadavg()
        per_round.append(row)
    result: dict[str, Any] = {
        "sessions": sessions,
        "calls_per_session": calls,
        "pace_s": pace,
        "rounds": rounds,
        "calls_per_s_offered": sessions / pace,
        "cores": cores,
    }
    for name, values in pooled.items():
        result[f"{name}_calls"] = len(values)
        result[f"{name}_p50_ms"] = percentile(values, 50)
        result[f"{name}_p99_ms"] = percentile(values, 99)
    result["overhead_p50_ms"] = result["proxy_p50_ms"] - result["direct_p50_ms"]
    result["overhead_p99_ms"] = result["proxy_p99_ms"] - result["direct_p99_ms"]
    result["overhead_p50_ms_median_of_rounds"] = statistics.median(
        r["overhead_p50_ms"] for r in per_round
    )
    result["overhead_p99_ms_median_of_rounds"] = statistics.median(
        r["overhead_p99_ms"] for r in per_round
    )
    calls_proxied = max(1, len(pooled["proxy"]))
    result["proxy_cpu_us_per_call"] = proxy_cpu["proxy"] / calls_proxied * 1e6
    result["proxy_cpu_s_while_direct"] = proxy_cpu["direct"]
    for name in pooled:
        n = max(1, len(pooled[name]))
        result[f"stub_cpu_us_per_call_{name}"] = stub_cpu[name] / n * 1e6
        result[f"client_cpu_us_per_call_{name}"] = client_cpu[name] / n * 1e6
    result["load_average_range"] = [
        min(min(r["load_before"][0], r["load_after"][0]) for r in per_round),
        max(max(r["load_before"][0], r["load_after"][0]) for r in per_round),
    ]
    result["per_round"] = per_round
    return result

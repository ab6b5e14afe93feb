"""Rollouts and the capture proxy: exactness, proxy overhead, concurrency, client CPU.

    python benchmarks/rollouts.py                      # the issue's sizes (several minutes)
    python benchmarks/rollouts.py --quick              # smaller counts, said so in the JSON

1. Exactness: conversations through the capture proxy (streamed and not, tool calls) to an
   in-process stand-in that records what it sampled; every recorded and assembled token id
   and log-probability is compared with it. Mismatches must be 0.
2. Proxy overhead: ``--sessions`` concurrent sessions make calls to the stand-in (its own
   process) directly, then through ``openenv capture`` (its own process); per-call latency
   p50/p99 and the difference.
3. Concurrency: ``--prompts`` × ``--group`` episodes of ``--turns`` model calls on an
   environment whose steps take 50 ms (``benchmarks/rollouts_app.py``, its own process), with
   ``build_rollout_func`` (64 sessions), against the same episodes one prompt at a time
   (measured on ``--baseline-prompts`` prompts and scaled, as the full run takes too long).
4. Client CPU: this process's CPU time during (3), per model call and per step, next to
   ``EnvPool``'s per step from ``benchmarks/client_cost.json``.

The table prints; JSON goes to ``benchmarks/results/rollouts.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from openenv_runtime.capture import CaptureProxy, assemble
from openenv_runtime.rollouts import build_rollout_func
from openenv_runtime.testing import free_port, running_server
from openenv_runtime.testing.stub_llm import StubLLM, StubReply

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def exact_policy(messages: list[dict[str, Any]]) -> StubReply:
    turn = sum(m["role"] == "assistant" for m in messages)
    if turn % 3 == 1:
        return StubReply("", [{"name": "look", "arguments": {"at": turn, "why": "ünïcode"}}])
    return StubReply(f"reply {turn} to {len(messages)} messages ✓")


async def _conversation(
    client: httpx.AsyncClient, proxy: str, turns: int, index: int
) -> tuple[list[dict[str, Any]], str]:
    session = (await client.post(f"{proxy}/sessions")).json()
    headers = {"Authorization": f"Bearer {session['api_key']}"}
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"conversation {index}"}]
    for turn in range(turns):
        body = {"model": "m", "messages": messages, "stream": (turn + index) % 2 == 0}
        url = f"{session['base_url']}/chat/completions"
        if body["stream"]:
            text, calls = "", []
            async with client.stream("POST", url, json=body, headers=headers) as answer:
                async for line in answer.aiter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        for choice in json.loads(line[6:]).get("choices") or []:
                            text += choice["delta"].get("content") or ""
                            calls += choice["delta"].get("tool_calls") or []
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                message["tool_calls"] = [
                    {k: c[k] for k in ("id", "type", "function")} for c in calls
                ]
        else:
            answer = (await client.post(url, json=body, headers=headers)).json()
            message = answer["choices"][0]["message"]
        messages.append(message)
        if message.get("tool_calls"):
            messages.append(
                {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "ok"}
            )
        else:
            messages.append({"role": "user", "content": f"next {turn}"})
    return messages, session["session_id"]


def exactness(total_turns: int, turns: int) -> dict[str, Any]:
    stub = StubLLM(exact_policy, record=True)
    proxy = CaptureProxy("http://placeholder")
    conversations = total_turns // turns
    mismatched = checked = samples = 0
    with stub.serve() as upstream, running_server(proxy.app) as proxy_url:
        proxy.upstream = upstream

        async def run() -> list[tuple[list[dict[str, Any]], str]]:
            limits = httpx.Limits(max_connections=64, keepalive_expiry=2)
            async with httpx.AsyncClient(timeout=60, limits=limits) as client:
                gate = asyncio.Semaphore(32)

                async def one(i: int) -> tuple[list[dict[str, Any]], str]:
                    async with gate:
                        return await _conversation(client, proxy_url, turns, i)

                return await asyncio.gather(*(one(i) for i in range(conversations)))

        started = time.perf_counter()
        played = asyncio.run(run())
        wall = time.perf_counter() - started
        assert stub.sampled is not None
        for messages, sid in played:
            entries = proxy.trace_entries(sid)
            for entry in entries:
                ids, logps = stub.sampled[tuple(entry.prompt_token_ids or ())]
                got = list(
                    zip(entry.completion_token_ids or [], entry.per_token_logps or [], strict=False)
                )
                want = list(zip(ids, logps, strict=False))
                mismatched += sum(a != b for a, b in zip(got, want, strict=False)) + abs(
                    len(got) - len(want)
                )
                checked += len(want)
            assembled = assemble(entries)
            samples += len(assembled)
            whole = stub.tokenizer.apply_chat_template(messages[:-1], add_generation_prompt=False)
            for sample in assembled:
                sequence = sample.tokens
                mismatched += sum(a != b for a, b in zip(sequence, whole, strict=False)) + max(
                    0, len(sequence) - len(whole)
                )
    return {
        "turns": conversations * turns,
        "conversations": conversations,
        "sampled_tokens_checked": checked,
        "mismatched_tokens": mismatched,
        "samples_per_conversation": samples / max(1, conversations),
        "wall_s": wall,
    }


def _spawn(args: list[str], health: str, env: dict[str, str] | None = None) -> Any:
    process = subprocess.Popen(
        args,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(health, timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"{args} did not start")


def _percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def overhead(
    sessions: int, calls: int, llm: str, proxy: str, proxy_pid: int, pace: float
) -> dict[str, Any]:
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 200}], "max_tokens": 32}

    async def measure(through_proxy: bool) -> list[float]:
        latencies: list[float] = []
        limits = httpx.Limits(max_connections=None, keepalive_expiry=2)
        async with httpx.AsyncClient(timeout=60, limits=limits) as c:

            async def one_session() -> None:
                if through_proxy:
                    s = (await c.post(f"{proxy}/sessions")).json()
                    url, headers = (
                        f"{s['base_url']}/chat/completions",
                        {"Authorization": f"Bearer {s['api_key']}"},
                    )
                else:
                    url, headers = f"{llm}/v1/chat/completions", {}
                for _ in range(calls):
                    await asyncio.sleep(pace)  # think time: keeps the model server unsaturated
                    started = time.perf_counter()
                    answer = await c.post(url, json=body, headers=headers)
                    latencies.append((time.perf_counter() - started) * 1000)
                    answer.raise_for_status()

            await asyncio.gather(*(one_session() for _ in range(sessions)))
        return latencies

    asyncio.run(measure(False))  # warm-up
    direct = asyncio.run(measure(False))
    cpu = _cpu_seconds(proxy_pid)
    proxied = asyncio.run(measure(True))
    cpu = _cpu_seconds(proxy_pid) - cpu
    row: dict[str, Any] = {"sessions": sessions, "calls_per_session": calls, "pace_s": pace}
    for name, values in (("direct", direct), ("proxy", proxied)):
        row[f"{name}_p50_ms"] = _percentile(values, 50)
        row[f"{name}_p99_ms"] = _percentile(values, 99)
    row["overhead_p50_ms"] = row["proxy_p50_ms"] - row["direct_p50_ms"]
    row["overhead_p99_ms"] = row["proxy_p99_ms"] - row["direct_p99_ms"]
    row["proxy_cpu_us_per_call"] = cpu / len(proxied) * 1e6
    return row


def concurrency(args: argparse.Namespace, llm: str, env_url: str) -> dict[str, Any]:
    prompts = [f"prompt {i}" for i in range(args.prompts)]
    rollout = build_rollout_func(
        env_url,
        llm=llm,
        model="m",
        group_size=args.group,
        max_turns=args.turns,
        concurrency=args.sessions,
        max_tokens=24,
    )
    rollout(prompts[:1], None)  # open the pool
    cpu0, wall0 = time.process_time(), time.perf_counter()
    out = rollout(prompts, None)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    episodes = rollout.last_episodes
    calls = sum(e.turns for e in episodes)
    steps = sum(e.steps for e in episodes)
    rollout.close()
    sequential = build_rollout_func(
        env_url, llm=llm, model="m", max_turns=args.turns, concurrency=1, max_tokens=24
    )
    sequential(prompts[:1], None)
    wall1 = time.perf_counter()
    for prompt in prompts[: args.baseline_prompts]:
        for _ in range(args.group):  # one episode at a time, as a one-prompt loop runs them
            sequential([prompt], None)
    per_prompt = (time.perf_counter() - wall1) / args.baseline_prompts
    sequential.close()
    baseline = per_prompt * args.prompts
    failed = sum(out["rollout_failed"])
    return {
        "episodes": len(episodes),
        "failed_episodes": failed,
        "model_calls": calls,
        "steps": steps,
        "concurrent_wall_s": wall,
        "one_at_a_time_wall_s_scaled": baseline,
        "baseline_prompts_measured": args.baseline_prompts,
        "speedup": baseline / wall,
        "client_cpu_us_per_model_call": cpu / max(1, calls) * 1e6,
        "client_cpu_us_per_step": cpu / max(1, steps) * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exact-turns", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--calls", type=int, default=20, help="calls per session (overhead)")
    parser.add_argument(
        "--pace", type=float, default=0.25, help="seconds between a session's calls (overhead)"
    )
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--baseline-prompts", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="smaller counts")
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    if args.quick:
        args.exact_turns, args.calls, args.prompts = 2_000, 10, 16
    result: dict[str, Any] = {
        "settings": vars(args),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    result["exactness"] = exactness(args.exact_turns, turns=8)
    llm_port, proxy_port, env_port = free_port(), free_port(), free_port()
    llm, proxy, env_url = (f"http://127.0.0.1:{p}" for p in (llm_port, proxy_port, env_port))
    processes = [
        _spawn(
            [sys.executable, "-m", "openenv_runtime.testing.stub_llm", "--port", str(llm_port)],
            llm + "/health",
        ),
        _spawn(
            [
                sys.executable,
                "-m",
                "openenv_cli",
                "capture",
                "--upstream",
                llm + "/v1",
                "--port",
                str(proxy_port),
            ],
            proxy + "/health",
        ),
        _spawn(
            [
                sys.executable,
                "-m",
                "openenv_runtime.serve",
                "benchmarks.rollouts_app:app",
                "--port",
                str(env_port),
            ],
            env_url + "/health",
        ),
    ]
    try:
        proxy_pid = processes[1].pid
        result["proxy_overhead"] = overhead(
            args.sessions, args.calls, llm, proxy, proxy_pid, args.pace
        )
        result["concurrency"] = concurrency(args, llm, env_url)
    finally:
        for process in processes:
            process.terminate()
            process.wait(15)
    cost = ROOT / "benchmarks" / "client_cost.json"
    if cost.exists():
        result["envpool_cpu_us_per_step"] = json.loads(cost.read_text())["cpu_us_per_step"].get(
            "EnvPool"
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "rollouts.json").write_text(json.dumps(result, indent=2))
    e, o, c = result["exactness"], result["proxy_overhead"], result["concurrency"]
    rows = [
        (
            "exactness: turns / sampled tokens checked",
            f"{e['turns']} / {e['sampled_tokens_checked']}",
        ),
        ("exactness: mismatched tokens", str(e["mismatched_tokens"])),
        (
            "proxy p50 direct / proxy / overhead (ms)",
            f"{o['direct_p50_ms']:.2f} / {o['proxy_p50_ms']:.2f} / {o['overhead_p50_ms']:.2f}",
        ),
        (
            "proxy p99 direct / proxy / overhead (ms)",
            f"{o['direct_p99_ms']:.2f} / {o['proxy_p99_ms']:.2f} / {o['overhead_p99_ms']:.2f}",
        ),
        ("proxy CPU per call (us)", f"{o['proxy_cpu_us_per_call']:.0f}"),
        ("episodes (failed)", f"{c['episodes']} ({c['failed_episodes']})"),
        ("concurrent wall (s)", f"{c['concurrent_wall_s']:.1f}"),
        ("one prompt at a time, scaled (s)", f"{c['one_at_a_time_wall_s_scaled']:.1f}"),
        ("speed-up", f"{c['speedup']:.1f}x"),
        (
            "client CPU per model call / per step (us)",
            f"{c['client_cpu_us_per_model_call']:.0f} / {c['client_cpu_us_per_step']:.0f}",
        ),
        ("EnvPool CPU per step (us, client_cost.json)", str(result.get("envpool_cpu_us_per_step"))),
    ]
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print(f"JSON: {RESULTS / 'rollouts.json'}")


if __name__ == "__main__":
    main()

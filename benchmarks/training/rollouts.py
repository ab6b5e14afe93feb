"""Rollouts and the capture proxy: exactness, proxy overhead, concurrency, the reference.

    python benchmarks/training/rollouts.py                          # every part, the issue's sizes
    python benchmarks/training/rollouts.py --parts overhead         # one part alone (comma-separated)
    python benchmarks/training/rollouts.py --quick                  # smaller counts, said so in the JSON

Parts (``--parts``, default all):

``exact``: conversations through the capture proxy (streamed and not, tool calls) to an
   in-process stand-in that records what it sampled; every recorded and assembled token id
   and log-probability is compared with it. Mismatches must be 0.
``overhead``: calls to the stand-in (its own process) directly and through ``openenv
   capture`` (its own process), in alternating rounds, with pinned cores: see
   ``benchmarks/training/rollouts_overhead.py``.
``concurrency``: ``--prompts`` × ``--group`` episodes of ``--turns`` model calls on an
   environment whose steps take 50 ms (``benchmarks/training/rollouts_app.py``, its own process), with
   ``build_rollout_func`` (``--sessions`` sessions), then the same episodes one at a time
   (one session), measured (``--baseline-prompts`` prompts; all by default), in the same run.
   This process's CPU per model call and per step is reported next to ``EnvPool``'s per step
   from ``benchmarks/client/client_cost.json``.
``reference``: the reference openenv 0.10.0's ``build_harness_rollout_func`` (its own
   virtualenv, ``benchmarks/training/rollouts_reference.py``) on ``--ref-prompts`` × ``--group`` ×
   ``--turns`` episodes of the same servers, next to ours on the same grid.

The stand-in model answers every turn with a ``say`` tool call (``rollouts_app.say_policy``).
The table prints; JSON goes to ``benchmarks/results/rollouts.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from rollouts_overhead import CLIENT_CORE, PROXY_CORE, exited, overhead, pin

from openenv_runtime.capture import CaptureProxy
from openenv_runtime.capture.server import protocol_for
from openenv_runtime.llm.samples import assemble
from openenv_runtime.providers.base import wait_until_healthy
from openenv_runtime.rollouts import build_rollout_func
from openenv_runtime.testing import free_port, running_server
from openenv_runtime.testing.stub_llm import StubLLM, StubReply

ROOT = Path(__file__).resolve().parents[2]
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
    conversations = total_turns // turns
    proxy = CaptureProxy("http://placeholder", max_sessions=conversations)  # all read at the end
    mismatched = checked = samples = 0
    # served as `openenv capture` serves it: the forwarded calls in the proxy's own protocol
    with (
        stub.serve() as upstream,
        running_server(proxy.app, http=protocol_for(proxy)) as proxy_url,
    ):
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


def _spawn(args: list[str], base_url: str, source: Path | None = None) -> Any:
    """Start a server and wait for ``base_url/health`` (``source``: the checkout whose
    runtime/ and CLI go first on its path, not those installed in the venv)."""
    root = source or ROOT
    path = f"{root / 'runtime'}{os.pathsep}{root}"
    process = subprocess.Popen(
        args,
        cwd=root,
        env={**os.environ, "PYTHONPATH": path},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_healthy(base_url, 60, " ".join(args[:3]), alive=lambda: exited(process))
    except (RuntimeError, TimeoutError):
        process.kill()
        raise
    return process


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def play(
    llm: str, env_url: str, prompts: list[str], args: argparse.Namespace, concurrency: int
) -> dict[str, Any]:
    """Our builder on ``prompts`` × ``--group`` episodes with ``concurrency`` sessions."""
    rollout = build_rollout_func(
        env_url,
        llm=llm,
        model="m",
        group_size=args.group,
        max_turns=args.turns,
        concurrency=concurrency,
        max_tokens=args.max_tokens,
    )
    rollout(prompts[:1], None)  # open the pool
    load0, cpu0, wall0 = _load(), time.process_time(), time.perf_counter()
    out = rollout(prompts, None)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    episodes = rollout.last_episodes
    rollout.close()
    calls = sum(e.turns for e in episodes)
    steps = sum(e.steps for e in episodes)
    return {
        "prompts": len(prompts),
        "episodes": len(episodes),
        "sessions": concurrency,
        "failed_episodes": sum(out["rollout_failed"]),
        "model_calls": calls,
        "steps": steps,
        "completion_tokens": sum(len(c) for c in out["completion_ids"]),
        "wall_s": wall,
        "client_cpu_us_per_model_call": cpu / max(1, calls) * 1e6,
        "client_cpu_us_per_step": cpu / max(1, steps) * 1e6,
        "load_before": load0,
        "load_after": _load(),
    }


def concurrency(args: argparse.Namespace, llm: str, env_url: str) -> dict[str, Any]:
    """The concurrent run and the one-at-a-time run, both measured in this invocation."""
    prompts = [f"prompt {i}" for i in range(args.prompts)]
    concurrent = play(llm, env_url, prompts, args, args.sessions)
    measured = min(args.baseline_prompts or args.prompts, args.prompts)
    sequential = play(llm, env_url, prompts[:measured], args, 1)
    per_episode = sequential["wall_s"] / sequential["episodes"]
    baseline = per_episode * concurrent["episodes"]
    return {
        "concurrent": concurrent,
        "one_at_a_time": sequential,
        "one_at_a_time_prompts_measured": measured,
        "one_at_a_time_wall_s_for_all": baseline,
        "one_at_a_time_scaled": measured < args.prompts,
        "speedup": baseline / concurrent["wall_s"],
    }


def reference(args: argparse.Namespace, llm: str, env_url: str) -> dict[str, Any]:
    """The reference builder and ours on the same ``--ref-prompts`` grid."""
    result: dict[str, Any] = {"prompts": args.ref_prompts, "group": args.group, "turns": args.turns}
    python = Path(args.ref_python).expanduser()
    if not python.exists():
        result["error"] = (
            f"no reference virtualenv at {python}: build it with python -m tests.support.reference"
        )
    else:
        load0 = _load()
        command = [
            str(python),
            str(ROOT / "benchmarks" / "training" / "rollouts_reference.py"),
            *("--env", env_url, "--llm", llm, "--prompts", str(args.ref_prompts)),
            *("--group", str(args.group), "--turns", str(args.turns)),
            *("--max-tokens", str(args.max_tokens)),
        ]
        done = subprocess.run(
            command,
            cwd=ROOT / "benchmarks" / "training",
            capture_output=True,
            text=True,
            check=False,
            env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
        )
        if done.returncode != 0:
            result["error"] = done.stderr.strip().splitlines()[-1] if done.stderr else "failed"
        else:
            result["reference"] = {**json.loads(done.stdout), "load_before": load0}
            result["reference"]["load_after"] = _load()
    prompts = [f"prompt {i}" for i in range(args.ref_prompts)]
    result["ours_concurrent"] = play(llm, env_url, prompts, args, args.sessions)
    result["ours_one_at_a_time"] = play(llm, env_url, prompts, args, 1)
    return result


PARTS = ("exact", "overhead", "concurrency", "reference")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--parts", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS)
    )
    parser.add_argument("--exact-turns", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--calls", type=int, default=20, help="calls per session (overhead)")
    parser.add_argument(
        "--pace", type=float, default=0.25, help="seconds between a session's calls (overhead)"
    )
    parser.add_argument("--rounds", type=int, default=6, help="direct/proxy rounds (overhead)")
    parser.add_argument(
        "--no-pin",
        dest="pin",
        action="store_false",
        help="overhead: leave every process on every core (default: pinned, see above)",
    )
    parser.add_argument(
        "--proxy-src",
        type=Path,
        help="a second proxy from another checkout (its runtime/ and CLI; overhead: before and after)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="overhead: a raw byte forwarder in the same rounds (raw_forwarder.py; the floor)",
    )
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument(
        "--baseline-prompts", type=int, default=0, help="prompts run one at a time (0: all)"
    )
    parser.add_argument("--ref-prompts", type=int, default=8)
    parser.add_argument(
        "--ref-python",
        default="~/.cache/openenv-tests/openenv-0.10.0/bin/python",
        help="the reference virtualenv's python (tests/support/reference.py builds it)",
    )
    parser.add_argument("--quick", action="store_true", help="smaller counts")
    parser.add_argument("--note", default="")
    parser.add_argument("--out", type=Path, default=RESULTS / "rollouts.json")
    args = parser.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if unknown := set(parts) - set(PARTS):
        parser.error(f"unknown parts {sorted(unknown)}; choose from {', '.join(PARTS)}")
    if args.quick:
        args.exact_turns, args.calls, args.rounds, args.prompts = 2_000, 10, 2, 16
        args.baseline_prompts = 2
    result: dict[str, Any] = {
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpu_count": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
    }
    if "exact" in parts:
        result["exactness"] = exactness(args.exact_turns, turns=8)
    if set(parts) - {"exact"}:
        result.update(_with_servers(args, parts))
    result["load_average_at_end"] = os.getloadavg()
    cost = ROOT / "benchmarks" / "client" / "client_cost.json"
    if cost.exists():
        result["envpool_cpu_us_per_step"] = json.loads(cost.read_text())["cpu_us_per_step"].get(
            "EnvPool"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    _print(result)
    print(f"JSON: {args.out}")


def _with_servers(args: argparse.Namespace, parts: list[str]) -> dict[str, Any]:
    llm_port, env_port = free_port(), free_port()
    llm, env_url = f"http://127.0.0.1:{llm_port}", f"http://127.0.0.1:{env_port}"
    stub_args = ["--port", str(llm_port), "--policy", "benchmarks.training.rollouts_app:say_policy"]
    processes = [
        _spawn([sys.executable, "-m", "openenv_runtime.testing.stub_llm", *stub_args], llm)
    ]
    out: dict[str, Any] = {}
    try:
        if "overhead" in parts:
            out["proxy_overhead"] = _overhead(args, llm, processes)
        if {"concurrency", "reference"} & set(parts):
            serve = [
                "-m",
                "openenv_runtime.serve",
                "benchmarks.training.rollouts_app:app",
                "--port",
                str(env_port),
            ]
            processes.append(_spawn([sys.executable, *serve], env_url))
        if "concurrency" in parts:
            out["concurrency"] = concurrency(args, llm, env_url)
        if "reference" in parts:
            out["reference_side_by_side"] = reference(args, llm, env_url)
    finally:
        for process in processes:
            process.terminate()
            process.wait(15)
    return out


def _overhead(args: argparse.Namespace, llm: str, processes: list[Any]) -> dict[str, Any]:
    """Start the proxy (and ``--proxy-src``'s), pin the cores, run the rotation."""
    sources = {"proxy": None, **({"proxy_src": args.proxy_src} if args.proxy_src else {})}
    proxies: dict[str, tuple[str, int]] = {}
    for name, source in sources.items():
        port = free_port()
        capture = ["capture", "--upstream", llm + "/v1", "--port", str(port)]
        url = f"http://127.0.0.1:{port}"
        processes.append(_spawn([sys.executable, "-m", "openenv_cli", *capture], url, source))
        proxies[name] = (url, processes[-1].pid)
    if args.floor:
        port = free_port()
        forwarder = [
            sys.executable,
            str(Path(__file__).with_name("raw_forwarder.py")),
            "--port",
            str(port),
        ]
        forwarder += ["--upstream-port", llm.rsplit(":", 1)[1]]
        url = f"http://127.0.0.1:{port}"
        processes.append(_spawn(forwarder, url))
        proxies["floor"] = (url, processes[-1].pid)
    stub_pid = processes[0].pid
    everything = os.sched_getaffinity(0)
    cores: dict[str, Any] = {"stub_llm": None, "load_generator": None}
    if args.pin:
        cores = {"stub_llm": pin(stub_pid, CLIENT_CORE), "load_generator": pin(0, CLIENT_CORE)}
    for name, (_, pid) in proxies.items():
        cores[name] = pin(pid, PROXY_CORE) if args.pin else None
    try:
        return overhead(
            sessions=args.sessions,
            calls=args.calls,
            pace=args.pace,
            rounds=args.rounds,
            llm=llm,
            proxies=proxies,
            stub_pid=stub_pid,
            cores=cores,
            floors=frozenset({"floor"} & set(proxies)),
        )
    finally:
        os.sched_setaffinity(0, everything)
        os.sched_setaffinity(stub_pid, everything)


def _print(result: dict[str, Any]) -> None:
    rows: list[tuple[str, str]] = [
        (
            "load average at start / end",
            f"{result['load_average_at_start'][0]:.2f} / {result['load_average_at_end'][0]:.2f}",
        )
    ]
    if e := result.get("exactness"):
        rows += [
            (
                "exactness: turns / sampled tokens checked",
                f"{e['turns']} / {e['sampled_tokens_checked']}",
            ),
            ("exactness: mismatched tokens", str(e["mismatched_tokens"])),
        ]
    if o := result.get("proxy_overhead"):
        rows.append(("proxy: cores", json.dumps(o["cores"])))
        rows.append(
            ("direct p50 / p99 (ms)", f"{o['direct_p50_ms']:.2f} / {o['direct_p99_ms']:.2f}")
        )
        for name in o["proxies"]:
            rows += [
                (
                    f"{name} p50 / p99 (ms)",
                    f"{o[f'{name}_p50_ms']:.2f} / {o[f'{name}_p99_ms']:.2f}",
                ),
                (
                    f"{name} overhead p50 / p99, pooled (ms)",
                    f"{o[f'{name}_overhead_p50_ms']:.2f} / {o[f'{name}_overhead_p99_ms']:.2f}",
                ),
                (
                    f"{name} overhead p50 / p99, median of rounds (ms)",
                    f"{o[f'{name}_overhead_p50_ms_median_of_rounds']:.2f} / {o[f'{name}_overhead_p99_ms_median_of_rounds']:.2f}",
                ),
                (
                    f"{name} CPU per call, of which system (us)",
                    f"{o[f'{name}_cpu_us_per_call']:.0f}, {o[f'{name}_system_cpu_us_per_call']:.0f}",
                ),
            ]
        rows.append(
            ("load average during the rounds", "{:.2f}-{:.2f}".format(*o["load_average_range"]))
        )
    if c := result.get("concurrency"):
        a, b = c["concurrent"], c["one_at_a_time"]
        rows += [
            ("episodes (failed)", f"{a['episodes']} ({a['failed_episodes']})"),
            (
                "concurrent wall (s)",
                f"{a['wall_s']:.1f} (load {a['load_before']}-{a['load_after']})",
            ),
            (
                f"one at a time, {c['one_at_a_time_prompts_measured']} prompts measured (s)",
                f"{b['wall_s']:.1f} (load {b['load_before']}-{b['load_after']})",
            ),
            (
                "one at a time, all prompts" + (" (scaled)" if c["one_at_a_time_scaled"] else ""),
                f"{c['one_at_a_time_wall_s_for_all']:.1f}",
            ),
            ("speed-up", f"{c['speedup']:.1f}x"),
            (
                "client CPU per model call / per step (us)",
                f"{a['client_cpu_us_per_model_call']:.0f} / {a['client_cpu_us_per_step']:.0f}",
            ),
            (
                "EnvPool CPU per step (us, client_cost.json)",
                str(result.get("envpool_cpu_us_per_step")),
            ),
        ]
    if r := result.get("reference_side_by_side"):
        grid = f"{r['prompts']}x{r['group']}x{r['turns']}"
        ref = r.get("reference")
        rows.append(
            (
                f"reference builder {grid} (s)",
                f"{ref['wall_s']:.1f}" if ref else f"cannot run: {r['error']}",
            )
        )
        rows.append((f"ours, concurrent {grid} (s)", f"{r['ours_concurrent']['wall_s']:.1f}"))
        rows.append((f"ours, one at a time {grid} (s)", f"{r['ours_one_at_a_time']['wall_s']:.1f}"))
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()

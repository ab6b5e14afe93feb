"""``RolloutService`` against the synchronous ``rollout_func`` on a heavy-tailed simulator.

    python benchmarks/training/rollout_service.py                 # the issue's sizes (a few minutes)
    python benchmarks/training/rollout_service.py --quick         # smaller counts, said so in the JSON

The simulator (``benchmarks/training/rollout_service_app.py``, each server its own process): episode
lengths lognormal with median 3 turns and sigma 1 (capped at 32), model latency lognormal with
median 50 ms and sigma 1.5, the model server serving at most 64 calls at once (the rest
queue). Both sides use the same two servers, groups of ``--group`` episodes, ``--groups``
groups per trainer step and a simulated trainer step of ``--trainer-step`` seconds between
policy versions:

``sync``: per step, ``build_rollout_func`` plays the step's groups (TRL's prompt repeats, every
   episode at once on ``--sync-sessions`` sessions), then the trainer step runs; nothing is
   generated while it trains.
``async``: ``RolloutService`` (``--async-sessions`` sessions, ``--max-staleness``) plays in
   the background; per step ``get_batch(groups)``, the trainer step, then
   ``weight_sync(v + 1, abort=True)`` (pause cutting the model calls in flight, which are sent
   again after; no weights to push here; new version; resume). ``--drain`` waits for them
   instead. Runs until ``--turns`` model turns were delivered.

Samples/s counts delivered samples over wall time, trainer steps included. A staleness
violation is a delivered sample whose oldest turn is more than ``--max-staleness`` versions
behind the version current at delivery. A token mismatch is a model-sampled token whose
log-probability is not the stand-in's for that exact context (``token_logprob`` of the prompt
and completion tokens before it): a token shifted, dropped or misattributed shows up there.
The table prints; JSON goes to ``benchmarks/training/rollout_service.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from openenv_runtime.rollouts import RolloutService, build_rollout_func
from openenv_runtime.testing import free_port
from openenv_runtime.testing.stub_llm import token_logprob

ROOT = Path(__file__).resolve().parents[2]
MAX_TURNS = 32


@contextmanager
def servers() -> Iterator[tuple[str, str]]:
    """The simulated model server and environment server, each in its own process."""
    llm_port, env_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'runtime'}{os.pathsep}{ROOT}"}
    commands = [
        [
            sys.executable,
            "-m",
            "openenv_runtime.testing.stub_llm",
            "--port",
            str(llm_port),
            "--policy",
            "benchmarks.training.rollout_service_app:latency_policy",
        ],
        [
            sys.executable,
            "-m",
            "uvicorn",
            "benchmarks.training.rollout_service_app:app",
            "--port",
            str(env_port),
            "--log-level",
            "warning",
            "--ws-per-message-deflate",
            "false",
        ],
    ]
    processes = [
        subprocess.Popen(c, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for c in commands
    ]
    llm, env_url = f"http://127.0.0.1:{llm_port}", f"http://127.0.0.1:{env_port}"
    try:
        for health in (f"{llm}/health", f"{env_url}/health"):
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(health, timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{health} did not answer")
                time.sleep(0.1)
        yield llm, env_url
    finally:
        for process in processes:
            process.terminate()
            process.wait(10)


def mismatches(
    prompt_ids: list[int], completion_ids: list[int], logprobs: list[float], mask: list[int]
) -> tuple[int, int]:
    """(model tokens checked, mismatched) for one sample, against the stand-in's log-probabilities."""
    checked = bad = 0
    position = 0
    for i, (token, logprob, sampled) in enumerate(zip(completion_ids, logprobs, mask, strict=True)):
        if not sampled:
            position = 0
            continue
        context = prompt_ids + completion_ids[:i]
        checked += 1
        bad += logprob != token_logprob(context, position, token, 0)
        position += 1
    return checked, bad


def _turns(mask: list[int]) -> int:
    return sum(1 for i, m in enumerate(mask) if m and (i == 0 or not mask[i - 1]))


def _prompts(count: int) -> list[str]:
    return [f"task {i}" for i in range(count)]


def run_sync(llm: str, env_url: str, args: argparse.Namespace) -> dict[str, Any]:
    rollout = build_rollout_func(
        env_url, llm=llm, model="m", max_turns=MAX_TURNS, concurrency=args.sync_sessions
    )
    samples = turns = checked = bad = failed = 0
    generating = 0.0
    started = time.perf_counter()
    try:
        for step in range(args.sync_steps):
            prompts = [p for p in _prompts(args.groups) for _ in range(args.group)]
            prompts = [f"{p} step {step}" for p in prompts]
            t0 = time.perf_counter()
            out = rollout(prompts, None)
            generating += time.perf_counter() - t0
            for i in range(len(prompts)):
                c, b = mismatches(
                    out["prompt_ids"][i],
                    out["completion_ids"][i],
                    out["logprobs"][i],
                    out["env_mask"][i],
                )
                checked, bad = checked + c, bad + b
                turns += _turns(out["env_mask"][i])
            samples += len(prompts)
            failed += sum(out["rollout_failed"])
            time.sleep(args.trainer_step)  # the trainer step: nothing is generated meanwhile
    finally:
        rollout.close()
    wall = time.perf_counter() - started
    return {
        "steps": args.sync_steps,
        "samples": samples,
        "turns": turns,
        "failed": failed,
        "wall_s": round(wall, 2),
        "generation_s": round(generating, 2),
        "samples_per_s": round(samples / wall, 2),
        "tokens_checked": checked,
        "token_mismatches": bad,
    }


def run_async(llm: str, env_url: str, args: argparse.Namespace) -> dict[str, Any]:
    samples = turns = checked = bad = failed = violations = steps = 0
    waiting = pausing = 0.0
    oldest = 0
    version = 0
    started = time.perf_counter()
    with RolloutService(
        env_url,
        prompts=_prompts(1000),
        llm=llm,
        model="m",
        group_size=args.group,
        max_turns=MAX_TURNS,
        max_staleness=args.max_staleness,
        concurrency=args.async_sessions,
        buffer_groups=args.groups,
    ) as svc:
        while turns < args.turns:
            t0 = time.perf_counter()
            batch = svc.get_batch(args.groups, timeout=600)
            waiting += time.perf_counter() - t0
            for sample in (s for group in batch for s in group):
                versions = sample["policy_versions"]
                lag = version - min(versions) if versions else 0
                oldest = max(oldest, lag)
                violations += lag > args.max_staleness
                c, b = mismatches(
                    sample["prompt_ids"],
                    sample["completion_ids"],
                    sample["logprobs"],
                    sample["env_mask"],
                )
                checked, bad = checked + c, bad + b
                turns += len(versions)
                samples += 1
                failed += sample["rollout_failed"]
            time.sleep(args.trainer_step)  # the trainer step: episodes go on meanwhile
            t0 = time.perf_counter()
            with svc.weight_sync(version + 1, abort=args.abort):
                pass  # a trainer pushes its weights here
            pausing += time.perf_counter() - t0
            version += 1
            steps += 1
        stats = svc.stats
    wall = time.perf_counter() - started
    return {
        "steps": steps,
        "samples": samples,
        "turns": turns,
        "failed": failed,
        "wall_s": round(wall, 2),
        "waiting_for_batches_s": round(waiting, 2),
        "pausing_s": round(pausing, 2),
        "calls_aborted": stats["calls_aborted"],
        "samples_per_s": round(samples / wall, 2),
        "staleness_violations": violations,
        "max_lag_delivered": oldest,
        "episodes_regenerated": stats["episodes_regenerated"],
        "turns_discarded": stats["turns_discarded"],
        "tokens_checked": checked,
        "token_mismatches": bad,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--groups", type=int, default=8, help="groups per trainer step")
    parser.add_argument("--trainer-step", type=float, default=2.0)
    parser.add_argument("--max-staleness", type=int, default=4)
    parser.add_argument("--sync-steps", type=int, default=10)
    parser.add_argument("--sync-sessions", type=int, default=64)
    parser.add_argument("--async-sessions", type=int, default=96)
    parser.add_argument("--turns", type=int, default=10_000, help="model turns to deliver (async)")
    parser.add_argument(
        "--drain",
        dest="abort",
        action="store_false",
        help="pause waits for the model calls in flight (default: aborts and re-sends them)",
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "training" / "rollout_service.json"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sync_steps, args.turns = 3, 1000
    load = [round(x, 2) for x in os.getloadavg()]
    with servers() as (llm, env_url):
        sync = run_sync(llm, env_url, args)
        asynchronous = run_async(llm, env_url, args)
    result = {
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": {
            "cpus": os.cpu_count(),
            "load_before": load,
            "load_after": [round(x, 2) for x in os.getloadavg()],
        },
        "sync": sync,
        "async": asynchronous,
        "speedup": round(asynchronous["samples_per_s"] / sync["samples_per_s"], 2),
    }
    rows = [
        ("samples/s", sync["samples_per_s"], asynchronous["samples_per_s"]),
        ("samples", sync["samples"], asynchronous["samples"]),
        ("model turns", sync["turns"], asynchronous["turns"]),
        ("wall s", sync["wall_s"], asynchronous["wall_s"]),
        ("staleness violations", "-", asynchronous["staleness_violations"]),
        ("episodes regenerated", "-", asynchronous["episodes_regenerated"]),
        ("token mismatches", sync["token_mismatches"], asynchronous["token_mismatches"]),
    ]
    print(f"| {'':22} | {'rollout_func':>12} | {'RolloutService':>14} |")
    print(f"|{'-' * 24}|{'-' * 14}:|{'-' * 16}:|")
    for name, a, b in rows:
        print(f"| {name:22} | {a!s:>12} | {b!s:>14} |")
    print(f"speed-up {result['speedup']}x; load {load} -> {result['machine']['load_after']}")
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"JSON: {args.out}")


if __name__ == "__main__":
    main()

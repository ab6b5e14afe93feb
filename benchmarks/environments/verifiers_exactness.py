"""verifiers targets through a server vs verifiers' own scoring: differences, speed.

    python benchmarks/environments/verifiers_exactness.py            # 1,050 episodes
    python benchmarks/environments/verifiers_exactness.py --quick    # a tenth of that

verifiers 0.4 lives in a virtualenv of its own (``python -m tests.support.verifiers_venv``
builds it); each target is served from it by ``python -m openenv_runtime.serve`` (one
worker), the client runs here, and verifiers' own ``Task.score`` scores the same tasks and
messages in that virtualenv (``tests/fixtures/verifiers_envs/vf_score.py``).

1. ``vf_arith`` (single-turn, 300 tasks): the correct answer, the answer inside more text and
   a wrong one: 900 episodes.
2. ``vf_lookup`` (multi-turn, a tool, ``max_turns=3``): 150 episodes, each a plan drawn from a
   seeded generator: look the fact up and answer with it, look another key up and answer with
   that, call the tool with "I give up" (a stop predicate), or call it until ``max_turns``.

Every reward, named reward and metric is compared. Prints a table and writes
``benchmarks/environments/verifiers_exactness.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from openenv_runtime import EnvClient  # noqa: E402
from openenv_runtime.adapters.verifiers import (  # noqa: E402
    VerifiersAction,
    VerifiersObservation,
    VerifiersState,
    VerifiersToolCall,
)
from tests.support.servers import stop_process  # noqa: E402
from tests.support.verifiers_venv import (  # noqa: E402
    assistant_message,
    serve,
    verifiers_python,
    verifiers_scores,
)


class Client(EnvClient[VerifiersAction, VerifiersObservation, VerifiersState]):
    pass


def outcome(result: Any) -> dict[str, Any]:
    observation = result.observation
    return {"reward": result.reward, "rewards": observation.rewards, "metrics": observation.metrics}


def arith(url: str, tasks: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    episodes, seen = [], []
    with Client(base_url=url).sync() as env:
        for index in range(tasks):
            for kind in range(3):
                first = env.reset(task_index=index).observation
                a, b = map(int, re.findall(r"\d+", first.messages[1]["content"])[:2])
                reply = [str(a + b), f"It is {a + b}.", str(a + b + 1)][kind]
                result = env.step(VerifiersAction(content=reply))
                message = assistant_message(reply, [])
                episodes.append({"task_index": index, "messages": [*first.messages, message]})
                seen.append(outcome(result))
    return episodes, seen


def lookup(
    url: str, count: int, seed: int = 11
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(seed)
    episodes, seen = [], []
    with Client(base_url=url).sync() as env:
        for number in range(count):
            index = rng.randrange(5)
            start = env.reset(task_index=index).observation
            plan = rng.choice(["answer", "other", "give_up", "loop"])
            key = start.metadata["name"]
            if plan == "other":
                key = rng.choice(["largest planet", "capital of France", "no such key"])
            messages = list(start.messages)
            turn = 0
            while True:
                turn += 1
                call = VerifiersToolCall(
                    id=f"e{number}t{turn}", name="facts_lookup", arguments={"key": key}
                )
                if plan in ("answer", "other") and turn == 2:
                    action = VerifiersAction(content=messages[-1]["content"])
                else:
                    text = "I give up" if plan == "give_up" else ""
                    action = VerifiersAction(content=text, tool_calls=[call])
                result = env.step(action)
                messages += [assistant_message(action.content, action.tool_calls)]
                messages += result.observation.messages
                if result.done:
                    break
            stop = result.observation.stop_condition
            episodes.append({"task_index": index, "messages": messages, "stop_condition": stop})
            seen.append(outcome(result))
    return episodes, seen


def differences(seen: list[dict[str, Any]], expected: list[dict[str, Any]]) -> int:
    return sum(1 for a, b in zip(seen, expected, strict=True) if a != b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the episodes")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    python = verifiers_python()
    rows = []
    for taskset, options, play, amount in (
        ("vf_arith", {"num_tasks": 300 // scale}, arith, 300 // scale),
        ("vf_lookup", {"max_turns": 3}, lookup, 150 // scale),
    ):
        query = "&".join(f"{k}={v}" for k, v in options.items())
        process, url = serve(python, f"verifiers:{taskset}?{query}")
        try:
            started = time.perf_counter()
            episodes, seen = play(url, amount)
            elapsed = time.perf_counter() - started
        finally:
            stop_process(process)
        scored = {k: v for k, v in options.items() if k != "max_turns"}
        expected = verifiers_scores(python, taskset, scored, episodes)
        rewards = sorted({round(s["reward"], 6) for s in seen})
        rows.append(
            {
                "taskset": taskset,
                "episodes": len(episodes),
                "steps": sum(
                    sum(m["role"] == "assistant" for m in e["messages"]) for e in episodes
                ),
                "differences": differences(seen, expected),
                "distinct_rewards": rewards,
                "seconds": round(elapsed, 2),
            }
        )
    print(f"{'taskset':<10} {'episodes':>8} {'steps':>6} {'diffs':>6} {'seconds':>8}  rewards seen")
    for row in rows:
        print(
            f"{row['taskset']:<10} {row['episodes']:>8} {row['steps']:>6} {row['differences']:>6} "
            f"{row['seconds']:>8}  {row['distinct_rewards']}"
        )
    out = Path(__file__).with_suffix(".json")
    out.write_text(json.dumps({"quick": args.quick, "results": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()

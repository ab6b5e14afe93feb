"""reasoning-gym and TextArena through a server vs the libraries' own loops: differences, speed.

    python benchmarks/environments/adapters_exactness.py            # 1,200 reasoning-gym + 1,000 TextArena episodes
    python benchmarks/environments/adapters_exactness.py --quick    # a tenth of that

Each target is served by its own ``python -m openenv_runtime.serve`` process (one worker);
the client and the libraries' own loops run in this process.

1. **reasoning-gym exactness.** Four datasets (``leg_counting``, ``basic_arithmetic``,
   ``chain_sum``, ``spell_backward``), entries picked by ``reset(task_index=i)``, answered with
   the correct answer, a partly correct one (the answer inside more text) and a wrong one:
   each reward against ``dataset.score_answer(answer, dataset[i])`` called here.
2. **TextArena exactness.** ``GuessTheNumber-v0`` (one player; moves drawn from a generator
   seeded per episode, an invalid move among them) and ``TicTacToe-v0`` (the built-in random
   opponent; the agent picks at random among the listed moves, seeded per episode), each
   episode with ``reset(seed=s)`` played again by ``textarena.make`` + ``env.reset(seed=s)``
   and the same moves: every observation text the agent saw and the final rewards compared.
3. **reasoning-gym throughput.** 1,000 single-turn episodes (reset, answer) of
   ``leg_counting``, 16 sessions at once: seconds, episodes/s.

Prints a table and writes ``benchmarks/environments/adapters_exactness.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import reasoning_gym  # noqa: E402
import textarena  # noqa: E402

from openenv_runtime.adapters.textarena import RandomMoves, listed_moves  # noqa: E402
from openenv_runtime.client.generic import GenericEnvClient  # noqa: E402
from tests.support.servers import spawn_server, stop_process  # noqa: E402

RG_DATASETS = ["leg_counting", "basic_arithmetic", "chain_sum", "spell_backward"]
RG_SEED = 7
CONCURRENCY = 16


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def served(target: str) -> Iterator[str]:
    port = free_port()
    process = spawn_server(
        "benchmarks.environments.adapters_app:app",
        port,
        env={"ADAPTERS_BENCH_TARGET": target, "MAX_CONCURRENT_ENVS": "64"},
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(process)


async def in_sessions(url: str, jobs: list[Any], play: Callable[..., Any]) -> list[Any]:
    """``play(env, job)`` for every job, over ``CONCURRENCY`` sessions; results in job order."""
    results: list[Any] = [None] * len(jobs)
    queue = list(enumerate(jobs))

    async def worker() -> None:
        async with GenericEnvClient(base_url=url) as env:
            while queue:
                index, job = queue.pop()
                results[index] = await play(env, job)

    await asyncio.gather(*(worker() for _ in range(min(CONCURRENCY, len(jobs)))))
    return results


# -- reasoning-gym --------------------------------------------------------------------------


def rg_answers(entry: dict[str, Any], index: int) -> list[str]:
    return [entry["answer"], f"{entry['answer']} {'x' * (1 + index % 7)}", "no idea"]


async def rg_exactness(per_dataset: int) -> dict[str, Any]:
    rows = []
    for name in RG_DATASETS:
        size = -(-per_dataset // 3)
        dataset = reasoning_gym.create_dataset(name, size=size, seed=RG_SEED)
        jobs = [(i, a) for i in range(size) for a in rg_answers(dataset[i], i)]

        async def play(env: GenericEnvClient, job: tuple[int, str]) -> float:
            await env.reset(task_index=job[0])
            result = await env.step({"answer": job[1]})
            return float(result.reward or 0.0)

        with served(f"reasoning_gym:{name}?size={size}&seed={RG_SEED}") as url:
            got = await in_sessions(url, jobs, play)
        expected = [dataset.score_answer(answer, dataset[i]) for i, answer in jobs]
        rows.append(
            {
                "dataset": name,
                "episodes": len(jobs),
                "differences": sum(g != e for g, e in zip(got, expected, strict=True)),
                "partial": sum(0 < e < 1 for e in expected),
                "correct": sum(e == 1 for e in expected),
            }
        )
    return {"datasets": rows, "episodes": sum(r["episodes"] for r in rows)}


async def rg_throughput(episodes: int) -> dict[str, Any]:
    dataset = reasoning_gym.create_dataset("leg_counting", size=episodes, seed=RG_SEED)
    answers = [dataset[i]["answer"] for i in range(episodes)]

    async def play(env: GenericEnvClient, index: int) -> float:
        await env.reset(task_index=index)
        return float((await env.step({"answer": answers[index]})).reward or 0.0)

    with served(f"reasoning_gym:leg_counting?size={episodes}&seed={RG_SEED}") as url:
        started = time.perf_counter()
        rewards = await in_sessions(url, list(range(episodes)), play)
        seconds = time.perf_counter() - started
    return {
        "episodes": episodes,
        "sessions": CONCURRENCY,
        "seconds": round(seconds, 3),
        "episodes_per_s": round(episodes / seconds, 1),
        "all_correct": all(r == 1.0 for r in rewards),
    }


# -- TextArena ------------------------------------------------------------------------------


def guesser(seed: int) -> Callable[[str], str]:
    rng = random.Random(seed)
    moves = [f"[{n}]" for n in rng.sample(range(1, 21), 20)]
    moves.insert(rng.randrange(3), "a guess without brackets?")
    queue = iter(moves)
    return lambda _text: next(queue)


def picker(seed: int) -> Callable[[str], str]:
    rng = random.Random(10_000 + seed)
    return lambda text: rng.choice(listed_moves(text) or ["[0]"])


GAMES: dict[str, tuple[int, Callable[[int], Callable[[str], str]]]] = {
    "GuessTheNumber-v0": (1, guesser),
    "TicTacToe-v0": (2, picker),
}


def library_episode(game: str, seed: int) -> tuple[list[str], dict[int, float]]:
    players, make_agent = GAMES[game]
    agent, opponent = make_agent(seed), RandomMoves(seed)
    env = textarena.make(game)
    env.reset(num_players=players, seed=seed)
    seen, done = [], False
    while not done:
        player, text = env.get_observation()
        if player == 0:
            seen.append(text)
        done, _info = env.step(action=agent(text) if player == 0 else opponent(text))
    rewards, _info = env.close()
    return seen, {int(k): float(v) for k, v in rewards.items()}


async def ta_exactness(episodes: int) -> dict[str, Any]:
    rows = []
    for game in GAMES:
        seeds = list(range(episodes // len(GAMES)))
        make_agent = GAMES[game][1]

        async def play(
            env: GenericEnvClient, seed: int, make_agent: Any = make_agent
        ) -> tuple[list[str], dict[int, float]]:
            agent, seen = make_agent(seed), []
            result = await env.reset(seed=seed)
            while not result.done:
                seen.append(result.observation["text"])
                result = await env.step({"action": agent(result.observation["text"])})
            return seen, {int(k): float(v) for k, v in result.observation["rewards"].items()}

        with served(f"textarena:{game}") as url:
            got = await in_sessions(url, seeds, play)
        expected = [library_episode(game, seed) for seed in seeds]
        rows.append(
            {
                "game": game,
                "episodes": len(seeds),
                "turns": sum(len(seen) for seen, _ in expected),
                "text_differences": sum(g[0] != e[0] for g, e in zip(got, expected, strict=True)),
                "reward_differences": sum(g[1] != e[1] for g, e in zip(got, expected, strict=True)),
            }
        )
    return {"games": rows, "episodes": sum(r["episodes"] for r in rows)}


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the episodes")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    load_before = load_average()
    rg = await rg_exactness(300 // scale)
    ta = await ta_exactness(1000 // scale)
    speed = await rg_throughput(1000 // scale)
    report = {
        "machine": {
            "cpus": os.cpu_count(),
            "load_before": load_before,
            "load_after": load_average(),
        },
        "versions": {
            "reasoning_gym": reasoning_gym.__version__,
            "textarena": textarena.__version__,
        },
        "reasoning_gym_exactness": rg,
        "textarena_exactness": ta,
        "reasoning_gym_throughput": speed,
    }
    print("| family | what | episodes | differences |\n|---|---|---|---|")
    for row in rg["datasets"]:
        print(
            f"| reasoning-gym | {row['dataset']} ({row['correct']} correct, {row['partial']} partial) "
            f"| {row['episodes']} | {row['differences']} |"
        )
    for row in ta["games"]:
        print(
            f"| TextArena | {row['game']} ({row['turns']} agent turns; texts, rewards) "
            f"| {row['episodes']} | {row['text_differences']}, {row['reward_differences']} |"
        )
    print(
        f"\nreasoning-gym throughput: {speed['episodes']} single-turn episodes over "
        f"{speed['sessions']} sessions in {speed['seconds']} s ({speed['episodes_per_s']}/s)"
    )
    print(f"load average before {load_before}, after {report['machine']['load_after']}")
    out = REPO / "benchmarks" / "environments" / "adapters_exactness.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    asyncio.run(main())

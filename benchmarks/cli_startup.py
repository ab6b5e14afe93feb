"""How long `openenv --help`, `openenv <verb> --help` and `openenv --version` take to start.

Each command runs as a fresh process ``--runs`` times; the table shows the fastest run (the
least disturbed by other work on the machine) and the median, and the JSON keeps every run.
The goal is 0.15 s for every help.

    python benchmarks/cli_startup.py                      # this checkout
    python benchmarks/cli_startup.py --tree /path/to/other/checkout --json before.json

``--tree`` puts another checkout first on PYTHONPATH, to compare two revisions with the same
interpreter and dependencies.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

GOAL = 0.15
COMMANDS: list[list[str]] = [
    ["--help"],
    ["--version"],
    *([verb, "--help"] for verb in ("init", "validate", "serve", "build", "push", "bench")),
]
ENTRY = "from openenv_cli.main import main; main()"


def measure(args: list[str], runs: int, env: dict[str, str], cwd: Path) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", ENTRY, *args],
            env=env,
            cwd=cwd,  # `python -c` puts the working folder first on sys.path
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="runs per command (default 9)")
    parser.add_argument("--tree", type=Path, help="measure this checkout instead")
    parser.add_argument("--json", type=Path, help="also write the results here")
    options = parser.parse_args()

    env = dict(os.environ, COLUMNS="100")
    tree = (options.tree or Path(__file__).resolve().parent.parent).resolve()
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / "runtime")])
    measure(["--help"], 1, env, tree)  # warm the file cache
    python_only = min(_time([sys.executable, "-c", "pass"], env) for _ in range(options.runs))

    results: list[dict[str, Any]] = []
    for args in COMMANDS:
        times = measure(args, options.runs, env, tree)
        results.append(
            {
                "command": "openenv " + " ".join(args),
                "fastest_s": round(min(times), 4),
                "median_s": round(statistics.median(times), 4),
                "runs_s": [round(t, 4) for t in times],
                "meets_goal": min(times) <= GOAL,
            }
        )

    width = max(len(r["command"]) for r in results)
    print(f"{'command':<{width}}  fastest   median   goal {GOAL:.2f} s")
    for r in results:
        mark = "yes" if r["meets_goal"] else "NO"
        print(f"{r['command']:<{width}}  {r['fastest_s']:.3f} s  {r['median_s']:.3f} s  {mark}")
    print(f"(python -c pass alone: {python_only:.3f} s; load average {os.getloadavg()[0]:.2f})")

    document = {
        "goal_s": GOAL,
        "runs": options.runs,
        "tree": str(tree),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_1m": os.getloadavg()[0],
        "python_startup_s": round(python_only, 4),
        "results": results,
    }
    if options.json is not None:
        options.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(document))


def _time(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()

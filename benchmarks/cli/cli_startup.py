"""How long `openenv --help`, `openenv <verb> --help` and `openenv --version` take to start.

Each command runs as a fresh process ``--runs`` times; the table shows the fastest run (the
least disturbed by other work on the machine) and the median, and the JSON keeps every run.
The goal is 0.15 s for every help.

    python benchmarks/cli/cli_startup.py                                # this checkout
    python benchmarks/cli/cli_startup.py --baseline /path/to/main       # before / after, interleaved
    python benchmarks/cli/cli_startup.py --json results/cli_startup.json
    python benchmarks/cli/cli_startup.py --only "init startup" --only "openenv --help" --runs 21

With ``--baseline`` the other checkout is measured with the same interpreter and
dependencies (it goes first on PYTHONPATH), run for run in rotation with this one, so that
load from other work on a shared machine falls on both alike.

Each command runs once uncounted first, and every run sees what an installed CLI has: its
modules' bytecode cached (in a folder of this run's, ``PYTHONPYCACHEPREFIX``, whatever
``PYTHONDONTWRITEBYTECODE`` says, so neither checkout is written to) and the compiled
project templates of ``openenv init`` cached (``XDG_CACHE_HOME``, also this run's own).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GOAL = 0.15
HERE = Path(__file__).resolve().parents[2]
COMMANDS: list[list[str]] = [
    ["--help"],
    ["--version"],
    *([verb, "--help"] for verb in ("init", "validate", "serve", "build", "push", "bench")),
    ["init", "startup_probe", "--output-dir", "{tmp}"],  # a real project, into a new folder
]
# Medians the first hour should meet (issue: --help 0.12 s, init 0.18 s).
MEDIAN_GOALS = {"openenv --help": 0.12, "openenv init startup_probe --output-dir {tmp}": 0.18}
ENTRY = "from openenv_cli.main import main; main()"


SCRATCH = Path(tempfile.mkdtemp(prefix="openenv-startup-caches-"))


def _env(tree: Path) -> dict[str, str]:
    env = dict(
        os.environ,
        COLUMNS="100",
        PYTHONPATH=os.pathsep.join([str(tree), str(tree / "runtime")]),
        # bytecode and compiled templates cached, as for an installed CLI, outside the trees
        PYTHONPYCACHEPREFIX=str(SCRATCH / "pycache"),  # mirrors each source's full path
        XDG_CACHE_HOME=str(SCRATCH / "cache"),
    )
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def once(args: list[str], tree: Path) -> float:
    with tempfile.TemporaryDirectory(prefix="openenv-startup-") as tmp:
        given = [arg.replace("{tmp}", str(Path(tmp) / "out")) for arg in args]
        return _timed(given, tree)


def _timed(args: list[str], tree: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", ENTRY, *args],
        env=_env(tree),
        cwd=tree,  # `python -c` puts the working folder first on sys.path
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - start


def _summary(times: list[float]) -> dict[str, Any]:
    return {
        "fastest_s": round(min(times), 4),
        "median_s": round(statistics.median(times), 4),
        "runs_s": [round(t, 4) for t in times],
        "meets_goal": min(times) <= GOAL,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="runs per command (default 9)")
    parser.add_argument("--tree", type=Path, default=HERE, help="the checkout to measure")
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--only",
        action="append",
        metavar="TEXT",
        help="measure only the commands containing TEXT (repeatable), e.g. --only init",
    )
    options = parser.parse_args()

    trees = {"this": options.tree.resolve()}
    if options.baseline is not None:
        trees["baseline"] = options.baseline.resolve()
    for tree in trees.values():
        once(["--help"], tree)  # warm the file cache
    python_only = min(_time_pass() for _ in range(options.runs))
    load_before = os.getloadavg()[0]

    results: list[dict[str, Any]] = []
    chosen = [
        args
        for args in COMMANDS
        if not options.only or any(text in "openenv " + " ".join(args) for text in options.only)
    ]
    for args in chosen:
        times: dict[str, list[float]] = {name: [] for name in trees}
        for tree in trees.values():
            once(args, tree)  # uncounted: fills the caches this command uses
        for _ in range(options.runs):
            for name, tree in trees.items():  # in rotation
                times[name].append(once(args, tree))
        row: dict[str, Any] = {"command": "openenv " + " ".join(args)}
        row.update({name: _summary(runs) for name, runs in times.items()})
        results.append(row)

    width = max(len(r["command"]) for r in results)
    header = f"{'command':<{width}}  fastest   median  ≤{GOAL:.2f}s  median goal"
    if "baseline" in trees:
        header += "   baseline fastest   median   ratio"
    print(header)
    for r in results:
        this = r["this"]
        line = (
            f"{r['command']:<{width}}  {this['fastest_s']:.3f} s  {this['median_s']:.3f} s  "
            f"{'yes' if this['meets_goal'] else 'NO ':>5}"
        )
        goal = MEDIAN_GOALS.get(r["command"])
        line += (
            f"  {'≤' + format(goal, '.2f') + ' s ' + ('yes' if this['median_s'] <= goal else 'NO'):>11}"
            if goal is not None
            else " " * 13
        )
        if "baseline" in r:
            base = r["baseline"]
            ratio = this["fastest_s"] / base["fastest_s"]
            line += f"   {base['fastest_s']:>12.3f} s  {base['median_s']:.3f} s  {ratio:5.2f}×"
        print(line)
    load_after = os.getloadavg()[0]
    print(
        f"(python -c pass alone: {python_only:.3f} s; "
        f"load average {load_before:.2f} → {load_after:.2f}; {os.cpu_count()} CPUs)"
    )

    document = {
        "goal_s": GOAL,
        "runs": options.runs,
        "trees": {name: str(tree) for name, tree in trees.items()},
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_1m": [load_before, load_after],
        "python_startup_s": round(python_only, 4),
        "caches": "bytecode and compiled templates warm (one uncounted run per command)",
        "results": results,
    }
    if options.json is not None:
        options.json.parent.mkdir(parents=True, exist_ok=True)
        options.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(document))
    shutil.rmtree(SCRATCH, ignore_errors=True)


def _time_pass() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()

"""What one ``execute_code`` call costs now that agent code runs in a confined worker.

Rows (each ``--runs`` times; the table shows the fastest and the median, the JSON every run):

* ``in-process``: smolagents' interpreter called directly in this process (what code mode
  did before it had a worker; no boundary), for scale;
* ``warm spare``: ``run_code`` when the spare worker has finished starting (the usual case
  for an agent that thinks between calls);
* ``back to back``: ``run_code`` calls with no pause (the spare may still be importing);
* ``cold``: no spare at all (the first call of a process).

Each call runs ``result = add(a=1, b=2)``: one tool call over the pipe.

    python benchmarks/server/code_mode.py --runs 10 --json benchmarks/server/code_mode.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openenv_runtime.mcp import code_mode

CODE = "result = add(a=1, b=2)"
TOOLS: dict[str, Callable[..., Any]] = {"add": lambda a, b: a + b}


def _in_process() -> None:
    from smolagents import local_python_executor as interpreter

    state: dict[str, Any] = {}
    interpreter.evaluate_python_code(
        CODE, static_tools={**interpreter.BASE_PYTHON_TOOLS, **TOOLS}, state=state
    )
    assert state["result"] == 3


def _run() -> None:
    assert code_mode.run_code(CODE, TOOLS) == {"result": 3}


def _wait_for_spare() -> None:
    spare = code_mode._spare
    if spare is not None:  # its ready message arrives once the interpreter is imported
        import select

        select.select([spare.stdout], [], [], code_mode.START_TIMEOUT_S)


def _timed(call: Callable[[], None], before: Callable[[], None], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        before()
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    _run()  # one first call: imports on both sides
    rows = {
        "in-process": _timed(_in_process, lambda: None, args.runs),
        "warm spare": _timed(_run, _wait_for_spare, args.runs),
        "back to back": _timed(_run, lambda: None, args.runs),
        "cold": _timed(_run, code_mode._stop_spare, args.runs),
    }
    code_mode._stop_spare()
    print(f"{'call':<14}{'fastest ms':>12}{'median ms':>12}")
    for name, times in rows.items():
        print(f"{name:<14}{min(times) * 1000:>12.1f}{statistics.median(times) * 1000:>12.1f}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                    "load_1min": os.getloadavg()[0],
                    "runs_s": rows,
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()

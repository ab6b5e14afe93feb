"""Time from opening a session on a ``harbor:`` target to the first command's output.

    python benchmarks/environments/harbor_first_command.py                 # about a minute
    python benchmarks/environments/harbor_first_command.py --trials 5

A small Harbor task folder (its Dockerfile ``FROM`` ``--base-image``, which must be on the
engine: ``python -m tests.support.base_image`` makes the default) is served in this process
(``create_family_app`` + a real uvicorn server on 127.0.0.1). Each trial opens a WebSocket
session, resets (the session's container), runs ``echo ready`` and reads its output; the time
is from before the connection to after that output (the reset's own round trip is reported
too). Two ways:

* **cold**: ``warm=0``, every reset starts a container;
* **warm**: ``warm=1``, the reset takes a started container from the pool (the trial waits
  for the pool to refill before it starts, so each trial meets a ready container).

Between trials the session is closed (its container removed). Prints a table and writes
``benchmarks/environments/harbor_first_command.json`` (committed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import docker  # noqa: E402

from openenv_cli.bench.report import markdown_table  # noqa: E402
from openenv_runtime import EnvClient  # noqa: E402
from openenv_runtime.adapters.harbor import (  # noqa: E402
    TASK_LABEL,
    HarborAction,
    HarborObservation,
    HarborState,
)
from openenv_runtime.adapters.target import create_family_app  # noqa: E402
from openenv_runtime.testing import running_server  # noqa: E402
from tests.support.harbor_task import make_task  # noqa: E402

OUT = ROOT / "benchmarks" / "environments" / "harbor_first_command.json"


class HarborClient(EnvClient[HarborAction, HarborObservation, HarborState]):
    pass


def running(engine: Any, task: str) -> int:
    found = engine.containers.list(filters={"label": f"{TASK_LABEL}={task}"}, ignore_removed=True)
    return len([c for c in found if c.status == "running"])


def trials(task: Path, warm: int, count: int, engine: Any) -> tuple[list[float], list[float]]:
    times, resets = [], []
    app = create_family_app(f"harbor:{task}?warm={warm}")
    with running_server(app) as url:
        for _ in range(count):
            deadline = time.monotonic() + 60
            while running(engine, task.name) < warm and time.monotonic() < deadline:
                time.sleep(0.05)  # the pool refills in the background
            started = time.perf_counter()
            with HarborClient(base_url=url).sync() as env:
                before = time.perf_counter()
                env.reset()
                resets.append(time.perf_counter() - before)
                result = env.step(HarborAction(command="echo ready"))
                took = time.perf_counter() - started
                assert result.observation.stdout == "ready\n", result.observation
            times.append(took)
    return times, resets


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "median_s": statistics.median(ordered),
        "p90_s": ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))],
        "min_s": ordered[0],
        "max_s": ordered[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--base-image", default="openenv-test/python:3.11-slim")
    args = parser.parse_args()
    engine = docker.from_env()
    engine.images.get(args.base_image)  # raises when it is not on the engine
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        task = make_task(Path(folder) / f"bench-hello-{os.getpid()}", base_image=args.base_image)
        create_family_app(f"harbor:{task}?warm=0")  # build the image once, outside the timing
        try:
            for mode, warm in (("cold", 0), ("warm", 1)):
                times, resets = trials(task, warm, args.trials, engine)
                results[mode] = {
                    "warm": warm,
                    "trials": len(times),
                    **summary(times),
                    "reset_median_s": statistics.median(resets),
                    "times_s": times,
                    "resets_s": resets,
                }
        finally:  # the image built for the task
            for image in engine.images.list(filters={"label": f"{TASK_LABEL}={task.name}"}):
                engine.images.remove(image.id, force=True)
    run = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "docker": engine.version().get("Version"),
        "base_image": args.base_image,
        "measured": "WebSocket connect + reset + step('echo ready') until its output",
        "results": results,
    }
    OUT.write_text(json.dumps(run, indent=2) + "\n")
    rows = [
        [
            mode,
            str(r["trials"]),
            *(
                f"{r[k] * 1000:.0f} ms"
                for k in ("median_s", "p90_s", "min_s", "max_s", "reset_median_s")
            ),
        ]
        for mode, r in results.items()
    ]
    headers = ["pool", "trials", "median", "p90", "min", "max", "reset alone, median"]
    print(markdown_table(headers, rows))
    print(f"\nwrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

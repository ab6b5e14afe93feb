"""Does the first training run learn? ``examples/learn/learn.py`` once per seed, one after another.

    nice -n 10 python benchmarks/training/learning.py                  # seeds 0 1 2, 60 steps each
    python benchmarks/training/learning.py --seeds 3 4 --steps 40 --no-latest

Each run trains the example's tiny model with TRL's GRPO against its served environment and
writes a reward per step. This script gathers, per seed, the mean reward of the first and the
last ten steps and the wall time (of training, and of the whole process, imports included),
then writes ``benchmarks/training/learning_latest.md`` / ``.json`` and, for docs/learn.md, each run's
``metrics.jsonl`` as ``docs/assets/learning/seed-N.jsonl`` and one plot of every run's curve
(``docs/assets/learning/reward.png``). Needs the ``train`` extra. The runs go one at a time:
two cores shared with other work would make parallel runs measure each other.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "learn" / "learn.py"
ASSETS = REPO / "docs" / "assets" / "learning"
LATEST = REPO / "benchmarks" / "training" / "learning_latest"
GOAL_GAIN = 0.3  # last-ten mean minus first-ten mean, issue #32
GOAL_SECONDS = 15 * 60


def run(seed: int, steps: int, out: Path) -> dict[str, Any]:
    """One run of the example; its summary with the process's wall time and records added."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "runtime"), str(REPO)]),
        "TRL_EXPERIMENTAL_SILENCE": "1",
    }
    command = [sys.executable, str(EXAMPLE), "--seed", str(seed), "--steps", str(steps)]
    started = time.monotonic()
    load = os.getloadavg()[0]
    subprocess.run([*command, "--out", str(out)], check=True, env=env, cwd=REPO)
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    summary["process_seconds"] = round(time.monotonic() - started, 1)
    summary["load_before"] = round(load, 2)
    summary["load_after"] = round(os.getloadavg()[0], 2)
    return summary


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def plot(curves: dict[int, list[dict[str, Any]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for seed, rows in curves.items():
        ax.plot([r["step"] for r in rows], [r["reward"] for r in rows], label=f"seed {seed}")
    ax.set(
        xlabel="GRPO step (16 episodes)",
        ylabel="mean reward",
        ylim=(0, 1.02),
        title="examples/learn: reward per step, three seeds",
    )
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# A first run that learns: measured",
        "",
        f"`python benchmarks/training/learning.py`, {report['date']}, commit `{report['commit']}`; "
        f"{report['cpus']} cores shared with other work (load average before and after each run "
        f"below), torch {report['versions']['torch']}, transformers "
        f"{report['versions']['transformers']}, TRL {report['versions']['trl']}. Each run: "
        f"{report['steps']} GRPO steps of 16 episodes (2 prompts x 8), one at a time.",
        "",
        "| seed | first 10 steps | last 10 steps | gain | training | whole process | load |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines.extend(
        f"| {r['seed']} | {r['first_10_mean']:.3f} | {r['last_10_mean']:.3f} | "
        f"**{r['gain']:+.3f}** | {r['wall_seconds']:.1f} s | {r['process_seconds']:.1f} s | "
        f"{r['load_before']} → {r['load_after']} |"
        for r in report["runs"]
    )
    lines += [
        "",
        f"Goal (issue #32): a gain of at least {GOAL_GAIN} within {GOAL_SECONDS // 60} minutes, "
        f"**{'met by every run' if report['goal_met'] else 'not met by every run'}**.",
        "",
        "The first and last ten steps are the means of the per-step mean reward (TRL's `reward`); "
        "the curves and per-step metrics are in `docs/assets/learning/`.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--no-latest", action="store_true", help="print only; write nothing")
    args = parser.parse_args()
    runs, curves = [], {}
    with tempfile.TemporaryDirectory(prefix="openenv-learning-") as scratch:
        for seed in args.seeds:
            out = Path(scratch) / f"seed-{seed}"
            runs.append(run(seed, args.steps, out))
            curves[seed] = records(out / "metrics.jsonl")
            if not args.no_latest:
                ASSETS.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(out / "metrics.jsonl", ASSETS / f"seed-{seed}.jsonl")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
    ).stdout.strip()
    report = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "versions": {name: version(name) for name in ("torch", "transformers", "trl")},
        "steps": args.steps,
        "goal": {"gain": GOAL_GAIN, "seconds": GOAL_SECONDS},
        "goal_met": all(
            r["gain"] >= GOAL_GAIN and r["process_seconds"] <= GOAL_SECONDS for r in runs
        ),
        "runs": runs,
    }
    text = markdown(report)
    print(text)
    if not args.no_latest:
        LATEST.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n", "utf-8")
        LATEST.with_suffix(".md").write_text(text, encoding="utf-8")
        plot(curves, ASSETS / "reward.png")


if __name__ == "__main__":
    main()

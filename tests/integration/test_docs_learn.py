"""docs/learn.md: the example run (with a few steps) and the page's code, and the files the run
writes. How much the run learns is measured by benchmarks/training/learning.py, never asserted here.

Needs the ``train`` extra (torch, transformers, trl, datasets, matplotlib): skipped without it,
failed in CI.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.servers import REPO

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

DOC = REPO / "docs" / "learn.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
EXAMPLE = "examples/learn/learn.py"
STEPS = 3
SKIPPED = {
    "pip install torch==2.13.0": "installs packages; the train extra holds the same set",
}


def blocks() -> list[tuple[str, str]]:
    return BLOCK.findall(DOC.read_text(encoding="utf-8"))


def runs() -> list[list[str]]:
    """The page's commands that run the example, as argument lists."""
    return [
        shlex.split(line)
        for language, code in blocks()
        if language == "bash"
        for line in code.splitlines()
        if line.startswith(f"python {EXAMPLE}")
    ]


def test_every_block_is_accounted_for() -> None:
    for language, code in blocks():
        first = code.splitlines()[0]
        skipped = any(first.startswith(prefix) for prefix in SKIPPED)
        ran = language == "python" or (language == "bash" and first.startswith(f"python {EXAMPLE}"))
        assert language == "text" or skipped or ran, first  # text: output shown, not run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page's commands, each with a few steps, then its Python blocks, in one folder."""
    for module in ("torch", "transformers", "trl", "datasets", "matplotlib"):
        try:
            __import__(module)
        except ImportError:
            if os.environ.get("CI"):
                raise
            pytest.skip(f'needs {module}: pip install -e ".[train]" (torch==2.13.0 first)')
    where = tmp_path_factory.mktemp("learn")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "runtime"), str(REPO)]),
        "MPLBACKEND": "Agg",
    }
    assert runs(), f"no `python {EXAMPLE}` command in {DOC}"
    for command in runs():
        script = str(REPO / command[1])
        done = subprocess.run(
            [sys.executable, script, *command[2:], "--steps", str(STEPS)],
            cwd=where,
            capture_output=True,
            text=True,
            env=env,
            timeout=480,
        )
        assert done.returncode == 0, done.stderr[-3000:]
    for language, code in blocks():
        if language != "python":
            continue
        script = where / "block.py"
        script.write_text(code, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=where,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"{STEPS} steps: mean reward" in done.stdout
    return where / "learn-runs" / "seed-0"


def test_metrics_are_one_well_formed_line_per_step(run_dir: Path) -> None:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    for row in rows:
        assert 0.0 <= row["reward"] <= 1.0
        assert row["reward_std"] >= 0.0 and row["seconds"] > 0.0
        assert {"loss", "grad_norm", "entropy"} <= set(row)
        assert row["replies"] and all(isinstance(reply, str) for reply in row["replies"])
    assert [r["seconds"] for r in rows] == sorted(r["seconds"] for r in rows)


def test_the_reward_varies_within_groups(run_dir: Path) -> None:
    """GRPO learns only from groups whose replies score differently: some step had such a
    group, and its gradient was not zero."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert any(r["frac_reward_zero_std"] < 1.0 for r in rows)
    assert any(r["grad_norm"] > 0.0 for r in rows)


def test_the_curve_and_summary_are_written(run_dir: Path) -> None:
    png = (run_dir / "reward.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width > 100 and height > 100
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["seed"] == 0 and summary["steps"] == STEPS
    assert 0.0 <= summary["first_10_mean"] <= 1.0 and 0.0 <= summary["last_10_mean"] <= 1.0
    assert summary["gain"] == pytest.approx(summary["last_10_mean"] - summary["first_10_mean"])
    assert summary["wall_seconds"] > 0.0

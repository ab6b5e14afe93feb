"""`openenv import FAMILY:NAME` writes a project that `openenv validate` passes without Docker,
for each family (heavy: each imports its library several times, in several processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_family_targets import openenv
from tests.support.optional import require
from tests.support.servers import REPO

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("target", "module"),
    [
        ("gymnasium:CartPole-v1", "gymnasium"),
        ("reasoning_gym:leg_counting?size=10&seed=1", "reasoning_gym"),
        ("textarena:GuessTheNumber-v0", "textarena"),
    ],
)
def test_an_imported_project_validates_without_docker(
    target: str, module: str, tmp_path: Path
) -> None:
    require(module)
    made = openenv("import", target, "--out", "project", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    done = openenv("validate", "project", "--json", cwd=tmp_path)
    report = json.loads(done.stdout)
    failed = [check for check in report["checks"] if check["status"] == "fail"]
    assert done.returncode == 0 and report["ok"], failed
    statuses = {check["name"]: check["status"] for check in report["checks"]}
    assert statuses["contract"] == "pass"  # the lock import wrote matches what is served
    assert statuses["smoke.episode"] == "pass"


def test_an_imported_project_s_own_tests_pass(tmp_path: Path) -> None:
    require("gymnasium")
    made = openenv("import", "gymnasium:CartPole-v1", "--out", "pole", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    path = os.pathsep.join(
        [str(tmp_path), str(REPO / "runtime"), str(REPO), os.environ.get("PYTHONPATH", "")]
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path / "pole",
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout

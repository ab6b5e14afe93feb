"""`openenv deploy slurm --apply` against stand-in sbatch/squeue/scancel (what they print is
set per test): the job id is told at once, hopeless jobs fail fast, and whatever ends the wait
(an error, Ctrl-C) cancels the job it started."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from openenv_cli.deploy import slurm
from openenv_cli.errors import OpenEnvError


@pytest.fixture()
def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """sbatch prints job 4242; squeue prints the file `status`; scancel logs its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {
        "sbatch": "echo '4242;cluster'",
        "squeue": f"cat {tmp_path / 'status'}",
        "scancel": f'echo "$@" >> {tmp_path / "cancelled"}',
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "out").mkdir()
    return tmp_path


def test_a_job_that_can_never_run_fails_fast_and_is_cancelled(fake_slurm: Path) -> None:
    (fake_slurm / "status").write_text("PENDING|PartitionConfig\n")
    heard: list[str] = []
    with pytest.raises(OpenEnvError, match=r"never start.*PartitionConfig") as info:
        slurm.apply(fake_slurm / "out", 2, timeout=60, progress=heard.append)
    assert "4242" in str(info.value)
    assert heard[0].startswith("Submitted job 4242")  # the id, before any wait
    assert (fake_slurm / "cancelled").read_text().split() == ["4242"]


def test_progress_names_the_state_and_reason(
    fake_slurm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (fake_slurm / "status").write_text("PENDING|Resources\n")
    heard: list[str] = []
    asked = iter(range(2))
    real_status = slurm.job_status

    def job_status(job_id: str) -> tuple[str, str]:
        if next(asked, None) is None:
            raise KeyboardInterrupt  # Ctrl-C while waiting
        return real_status(job_id)

    monkeypatch.setattr(slurm, "job_status", job_status)
    with pytest.raises(KeyboardInterrupt):
        slurm.apply(fake_slurm / "out", 2, timeout=60, progress=heard.append)
    assert any("Job 4242: PENDING (Resources)" in line for line in heard), heard
    assert heard[-1] == "Interrupted: cancelled job 4242"
    assert (fake_slurm / "cancelled").read_text().split() == ["4242"]

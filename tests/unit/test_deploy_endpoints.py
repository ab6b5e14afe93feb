"""The replicas a deploy records in its folder, for `openenv top --deploy` (and anyone else)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from openenv_cli.deploy import plan_deploy, run_deploy
from openenv_cli.deploy.endpoints import ENDPOINTS, read_endpoints, write_endpoints
from openenv_cli.errors import OpenEnvError, UsageError


def test_what_is_written_is_read_back(tmp_path: Path) -> None:
    write_endpoints(tmp_path, ["10.0.0.5:8000", "node-2:8001"])
    assert [str(b) for b in read_endpoints(tmp_path)] == ["10.0.0.5:8000", "node-2:8001"]


def test_an_envoy_deploy_records_its_backends(tmp_path: Path) -> None:
    out = tmp_path / "front"
    plan = plan_deploy("envoy", tmp_path, out=out, backends=["10.0.0.5:8000", "10.0.0.6:8000"])
    result = run_deploy(plan, apply=False, force=False, timeout=1)
    assert result.endpoints == ["10.0.0.5:8000", "10.0.0.6:8000"]
    assert (out / ENDPOINTS).read_text() == "10.0.0.5:8000\n10.0.0.6:8000\n"
    assert [str(b) for b in read_endpoints(out)] == result.endpoints


def test_a_slurm_jobs_own_file_counts_the_newest_first(tmp_path: Path) -> None:
    for job, port, when in (("11", 9000, 1_000), ("12", 9100, 2_000)):
        run = tmp_path / f"openenv-run-{job}"
        run.mkdir()
        (run / ENDPOINTS).write_text(f"node-1:{port}\n# a comment\nnode-2:{port}\n")
        os.utime(run, (when, when))
    assert [str(b) for b in read_endpoints(tmp_path)] == ["node-1:9100", "node-2:9100"]
    write_endpoints(tmp_path, ["front:8000"])  # the folder's own record wins
    assert [str(b) for b in read_endpoints(tmp_path)] == ["front:8000"]


def test_a_folder_without_endpoints_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="records no replica endpoints") as caught:
        read_endpoints(tmp_path)
    assert "kubectl port-forward" in (caught.value.hint or "")


def test_a_bad_line_is_refused(tmp_path: Path) -> None:
    (tmp_path / ENDPOINTS).write_text("10.0.0.5:8000\n$(reboot):1\n")
    with pytest.raises(UsageError, match="not a host name"):
        read_endpoints(tmp_path)


def test_a_linked_endpoints_file_is_neither_read_nor_written(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("10.9.9.9:1\n")
    out = tmp_path / "deploy"
    out.mkdir()
    (out / ENDPOINTS).symlink_to(elsewhere)
    with pytest.raises(OpenEnvError, match="link"):
        read_endpoints(out)
    with pytest.raises(OpenEnvError, match="link"):
        write_endpoints(out, ["10.0.0.5:8000"])
    assert elsewhere.read_text() == "10.9.9.9:1\n"

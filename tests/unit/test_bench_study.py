"""The study's tables and report, built from fake runs; the reasons missing infrastructure
is skipped for; the --study list."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from openenv_cli.bench import study, study_deploy, study_report
from openenv_cli.bench.study import InfraOutcome, StudyResult
from tests.support.optional import require


def point(batch: int, success: float, p99_ms: float, wait: float = 1.0) -> dict[str, Any]:
    return {
        "batch": batch, "wait": wait, "reps": 1, "attempted": batch,
        "ok": round(batch * success), "success_rate": success, "requests_per_s": batch / 2,
        "connect_p50": 5.0, "connect_p99": 9.0, "reset_p50": 3.0, "reset_p99": 6.0,
        "step_p50": 1001.0, "step_p99": 1010.0, "total_p50": 1020.0, "total_p99": p99_ms,
    }  # fmt: skip


def fake_result() -> StudyResult:
    local = InfraOutcome(
        "local", "measured", handle="pid 1", cores=2,
        points=[point(32, 1.0, 1050), point(128, 0.99, 1200), point(512, 0.5, 9000)],
    )  # fmt: skip
    docker = InfraOutcome(
        "docker", "measured", handle="container abc", cores=2,
        points=[point(32, 1.0, 1100), point(128, 0.9, 3000), point(512, 1.0, 2000)],
    )  # fmt: skip
    swarm = InfraOutcome("swarm", "skipped", reason="this Docker engine is not part of a swarm")
    slurm = InfraOutcome("slurm", "failed", reason="`openenv deploy slurm` failed: boom")
    return StudyResult(
        started_at="2026-01-01T00:00:00+00:00",
        project="demo_env",
        settings={"infras": ["local", "docker", "swarm", "slurm"], "requests_grid": [32, 128, 512],
                  "wait_grid": [1.0], "reps": 1, "timeout": 30.0, "replicas": 2},
        machine={"cpus": 2, "load_average": [1.0, 1.0, 1.0]},
        infras=[local, docker, swarm, slurm],
    )  # fmt: skip


def test_max_batch_is_an_unbroken_run_of_passing_batches() -> None:
    local, docker = fake_result().infras[:2]
    assert study_report.max_batch(local, 1.0) == 128
    assert study_report.max_batch(docker, 1.0) == 32  # 512 passing after 128 failed is luck
    assert study_report.max_batch(local, 5.0) is None


def test_tables_hold_success_p99_capacity_and_breakdown() -> None:
    result = fake_result()
    headers, rows = study_report.success_table(result, 1.0)
    assert headers == ["batch", "local: success / p99", "docker: success / p99"]
    assert rows[1] == ["128", "99.0% / 1.20 s", "90.0% / 3.00 s"]
    headers, rows = study_report.capacity_table(result, 1.0)
    assert rows[0] == ["local", "128", "2", "64.0", "1.20 s", "64"]
    assert rows[1][:4] == ["docker", "32", "2", "16.0"]
    _, rows = study_report.latency_table(result, 1.0)
    assert rows[0] == ["local", "32", "5.0 ms", "3.0 ms", "1001.0 ms", "1.05 s"]
    assert len(rows) == 6


def test_published_comparison_per_core() -> None:
    _, rows = study_report.published_table(fake_result(), 1.0)
    local = rows[0]
    assert local[3] == "local-uvicorn (8 workers)" and local[5] == "256.0"
    assert local[6] == f"{64 / 256:.2f}×"
    assert {p.infra: p.per_core for p in study_report.PUBLISHED}[
        "slurm-multi (two nodes + Envoy)"
    ] == pytest.approx(170.7, abs=0.05)


def test_a_max_batch_bounded_by_the_grid_is_marked() -> None:
    result = fake_result()
    result.infras[0].points = [point(32, 1.0, 1000), point(128, 1.0, 1100)]
    _, rows = study_report.capacity_table(result, 1.0)
    assert rows[0][1] == "≥ 128"


def test_report_files(tmp_path: Path) -> None:
    require("matplotlib", "bench")  # the plot
    paths = study_report.write_study(fake_result(), tmp_path, plots=True)
    text = paths["markdown"].read_text()
    assert "| swarm | skipped |" in text and "not part of a swarm" in text
    assert "| slurm | failed |" in text
    assert "16,384" in text and "170.7" in text  # the published figures beside ours
    document = json.loads(paths["json"].read_text())
    assert document["max_batch"] == {"local": {"1.0": 128}, "docker": {"1.0": 32}}
    assert [i["status"] for i in document["infras"]] == [
        "measured",
        "measured",
        "skipped",
        "failed",
    ]
    assert paths["png"] is not None and paths["png"].read_bytes()[:4] == b"\x89PNG"


def test_parse_infras() -> None:
    assert study.parse_infras("local, docker,local") == ["local", "docker"]
    for bad in ("", "local,k8s"):
        with pytest.raises(ValueError, match="local, docker, swarm, slurm"):
            study.parse_infras(bad)


def test_skip_reasons_for_missing_infrastructure(monkeypatch: pytest.MonkeyPatch) -> None:
    assert study_deploy.unavailable_reason("local") is None
    monkeypatch.setattr(study_deploy.shutil, "which", lambda name: None)
    assert study_deploy.unavailable_reason("slurm") == "no Slurm here (`sinfo` is not on PATH)"

    monkeypatch.setattr(study_deploy.shutil, "which", lambda name: "/usr/bin/sinfo")

    def broken(*args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, 1, "", "slurm_load_partitions: Unable to contact")

    monkeypatch.setattr(study_deploy.subprocess, "run", broken)
    assert "Unable to contact" in (study_deploy.unavailable_reason("slurm") or "")

    import docker

    class NoEngine:
        def info(self) -> dict[str, Any]:
            raise docker.errors.DockerException("Error while fetching server API version")

    class NoSwarm:
        def info(self) -> dict[str, Any]:
            return {"Swarm": {"LocalNodeState": "inactive"}}

    monkeypatch.setattr(docker, "from_env", lambda **_: NoEngine())
    assert (study_deploy.unavailable_reason("docker") or "").startswith("no Docker engine answers")
    monkeypatch.setattr(docker, "from_env", lambda **_: NoSwarm())
    assert study_deploy.unavailable_reason("docker") is None
    assert "not part of a swarm" in (study_deploy.unavailable_reason("swarm") or "")


def test_skipped_infrastructure_is_reported_not_deployed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(study, "unavailable_reason", lambda infra: f"no {infra} here")

    def never(*args: Any) -> Any:
        raise AssertionError("deployed")

    monkeypatch.setattr(study, "deploy", never)
    result = study.run_study(study.StudySettings(tmp_path, ["docker", "slurm"]))
    assert [(o.name, o.status, o.reason) for o in result.infras] == [
        ("docker", "skipped", "no docker here"),
        ("slurm", "skipped", "no slurm here"),
    ]


def test_a_failed_deploy_is_reported_and_the_study_goes_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(study, "unavailable_reason", lambda infra: None)
    monkeypatch.setattr(study, "build_image", lambda settings: "demo:0.1.0")
    calls: list[str] = []

    def failing(infra: str, *args: Any) -> Any:
        calls.append(infra)
        raise RuntimeError(f"`openenv deploy {infra}` failed: no room")

    monkeypatch.setattr(study, "deploy", failing)
    result = study.run_study(study.StudySettings(tmp_path, ["swarm", "slurm"]))
    assert calls == ["swarm", "slurm"]
    assert [(o.status, o.reason) for o in result.infras] == [
        ("failed", "`openenv deploy swarm` failed: no room"),
        ("failed", "`openenv deploy slurm` failed: no room"),
    ]


def test_failures_are_named_in_the_report() -> None:
    result = fake_result()
    result.infras[0].points[2]["errors"] = {"connect: HTTP 503": 200, "step: timeout": 56}
    text = study_report.markdown(result)
    assert "512: connect: HTTP 503 ×200, step: timeout ×56" in text

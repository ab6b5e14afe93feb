"""`openenv deploy` as users call it: help with an example per target, errors, JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openenv_cli.main import main
from openenv_cli.scaffold import render_project, write_project


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_help_has_an_example_per_target(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["deploy", "--help"], capsys)
    assert code == 0
    for example in (
        "openenv deploy kubernetes",
        "openenv deploy swarm",
        "openenv deploy slurm",
        "openenv deploy envoy --backend",
    ):
        assert example in out


def test_apply_is_refused_for_kubernetes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_project(render_project("cmd_env"), tmp_path / "cmd_env")
    monkeypatch.chdir(tmp_path / "cmd_env")
    code, _, err = _run(["deploy", "kubernetes", "--apply"], capsys)
    assert code == 2 and "kubectl apply -k" in err
    assert not (tmp_path / "cmd_env" / "deploy").exists()


def test_json_lists_the_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = _run(
        ["deploy", "envoy", "--backend", "127.0.0.1:8001", "--out", "front", "--json"], capsys
    )
    assert code == 0
    result = json.loads(out)
    assert result["files"] == [
        "endpoints.json",
        "envoy.yaml",
        "monitoring/alerts.yml",
        "monitoring/grafana-dashboard.json",
        "monitoring/prometheus.yml",
    ]
    assert result["written"] is True
    assert (tmp_path / "front" / "envoy.yaml").is_file()
    # The servers, machine-readable, for EnvPool.from_deploy
    endpoints = json.loads((tmp_path / "front" / "endpoints.json").read_text())
    assert endpoints["replicas"] == ["http://127.0.0.1:8001"] and endpoints["front"] is None


def test_missing_project_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(["deploy", "slurm"], capsys)
    assert code == 1 and "openenv.yaml" in err


def test_slurm_apply_with_a_required_token_needs_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_project(render_project("tok_env"), tmp_path / "tok_env")
    monkeypatch.chdir(tmp_path / "tok_env")
    monkeypatch.delenv("OPENENV_API_KEY", raising=False)
    code, _, err = _run(["deploy", "slurm", "--apply", "--token"], capsys)
    assert code == 2 and "OPENENV_API_KEY is not set" in err
    assert not (tmp_path / "tok_env" / "deploy").exists()  # nothing submitted, nothing written

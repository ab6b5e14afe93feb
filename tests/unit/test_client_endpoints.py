"""endpoints.json (openenv_runtime.client.endpoints) and EnvPool.from_deploy: the pool over
what `openenv deploy` wrote, the replicas when listed, else the front."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openenv_cli.deploy import plan_deploy, run_deploy
from openenv_runtime import GenericEnvClient
from openenv_runtime.client.endpoints import (
    ENDPOINTS_FILE,
    Endpoints,
    EndpointsError,
    read_endpoints,
)
from openenv_runtime.client.pool import EnvPool


def write(folder: Path, **data: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ENDPOINTS_FILE).write_text(json.dumps({"version": 1, "target": "slurm", **data}))
    return folder


def test_the_file_round_trips(tmp_path: Path) -> None:
    written = Endpoints("slurm", front="http://10.0.0.4:8080", replicas=["http://10.0.0.4:8000"])
    (tmp_path / ENDPOINTS_FILE).write_text(written.to_json())
    assert read_endpoints(tmp_path) == written


def test_from_deploy_prefers_the_replicas_then_the_front(tmp_path: Path) -> None:
    both = write(
        tmp_path / "a",
        front="http://10.0.0.4:8080",
        replicas=["http://10.0.0.4:8000", "ws://10.0.0.5:8000"],
    )
    pool = EnvPool.from_deploy(both, GenericEnvClient, size=4, timeout=3.0)
    assert pool.urls == ["http://10.0.0.4:8000", "ws://10.0.0.5:8000"]
    assert pool.size == 4 and pool.timeout == 3.0
    assert EnvPool.from_deploy(both, GenericEnvClient, size=1, via="front").urls == [
        "http://10.0.0.4:8080"
    ]
    front_only = write(tmp_path / "b", front="https://envs.example.com")
    assert EnvPool.from_deploy(front_only, GenericEnvClient, size=1).urls == [
        "https://envs.example.com"
    ]
    with pytest.raises(EndpointsError, match="No replicas listed"):
        EnvPool.from_deploy(front_only, GenericEnvClient, size=1, via="replicas")
    with pytest.raises(EndpointsError, match="--apply"):
        EnvPool.from_deploy(write(tmp_path / "c", front=None), GenericEnvClient, size=1)


def test_from_deploy_reads_what_deploy_wrote(tmp_path: Path) -> None:
    out = tmp_path / "front"
    plan = plan_deploy("envoy", tmp_path, backends=["10.0.0.5:8001", "[::1]:8002"], out=out)
    result = run_deploy(plan, apply=False, force=False, timeout=1)
    assert ENDPOINTS_FILE in result.files
    pool = EnvPool.from_deploy(out, GenericEnvClient, size=2)
    assert pool.urls == ["http://10.0.0.5:8001", "http://[::1]:8002"]


def test_a_missing_file_says_how_to_write_it(tmp_path: Path) -> None:
    with pytest.raises(EndpointsError, match=r"endpoints\.json does not exist: `openenv deploy"):
        EnvPool.from_deploy(tmp_path, GenericEnvClient, size=1)

"""Every Envoy render tells replicas a balancer is in front and retries only what is safe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from openenv_cli.deploy import plan_deploy
from openenv_cli.scaffold import render_project, write_project

KEYS = ("WORKERS", "MAX_CONCURRENT_ENVS", "SESSION_TIMEOUT", "OPENENV_API_KEY", "PORT")


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_project(render_project("demo_env"), tmp_path / "demo_env")
    return tmp_path / "demo_env"


def envoy_config(target: str, project: Path) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"backends": ["127.0.0.1:8001"]} if target == "envoy" else {}
    files = plan_deploy(target, project, **kwargs).files
    config: dict[str, Any] = yaml.safe_load(
        files["envoy/envoy.yaml"]
        if target != "envoy"
        else next(text for name, text in files.items() if name.endswith("envoy.yaml"))
    )
    return config


@pytest.mark.parametrize("target", ["envoy", "kubernetes", "swarm", "slurm"])
def test_replicas_learn_a_balancer_is_in_front_and_503_is_retried_elsewhere(
    target: str, project: Path
) -> None:
    config = envoy_config(target, project)
    chain = config["static_resources"]["listeners"][0]["filter_chains"][0]
    route_config = chain["filters"][0]["typed_config"]["route_config"]
    assert route_config["request_headers_to_add"] == [
        {
            "header": {"key": "x-openenv-balancer", "value": "1"},
            "append_action": "OVERWRITE_IF_EXISTS_OR_ADD",
        }
    ]
    policy = route_config["virtual_hosts"][0]["routes"][0]["route"]["retry_policy"]
    retry_on = set(policy["retry_on"].split(","))
    # A full or draining replica's 503 comes before any session opened: safe to retry.
    assert "retriable-status-codes" in retry_on and policy["retriable_status_codes"] == [503]
    # Never a blanket 5xx retry: a POST /step that failed part way is not idempotent.
    assert not retry_on & {"5xx", "gateway-error", "reset", "retriable-4xx"}
    hosts = policy["retry_host_predicate"][0]["name"]
    assert hosts == "envoy.retry_host_predicates.previous_hosts"
    # A replica answering 503 is busy, not broken: never ejected for it.
    cluster = config["static_resources"]["clusters"][0]
    assert cluster["outlier_detection"]["enforcing_consecutive_5xx"] == 0
    # Sessions that end count as local-origin errors: a burst of closes must not eject a replica.
    assert cluster["outlier_detection"]["enforcing_consecutive_local_origin_failure"] == 0
    # A burst refused by a full replica is retried whole (Envoy's default: 3 retries at once).
    for threshold in cluster["circuit_breakers"]["thresholds"]:
        assert threshold["max_retries"] == threshold["max_connections"]

"""`openenv deploy`'s monitoring/ against the real things: Prometheus (Debian's package) runs
the rendered prometheus.yml, scrapes a server that requires a key through the key file,
loads the alert rules and answers every dashboard query; a real Envoy serves its counters on
the stats listener (and nothing else of its admin page), under the names the dashboard and
the alerts use."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from openenv_cli.deploy import monitoring, plan_deploy, run_deploy
from openenv_cli.deploy.render import ENVOY_STATS_PATH, ENVOY_STATS_PORT
from openenv_cli.scaffold import render_project, write_project
from openenv_runtime.testing import free_port
from tests.support.deploy_tools import CLI_ENV, envoy_process, episode, server_process
from tests.support.optional import unavailable
from tests.support.servers import wait_until

APP = "tests.fixtures.echo_app:app"
KEY = "monitoring-test-key-0123456789"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in CLI_ENV:
        monkeypatch.delenv(key, raising=False)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""
    except OSError:  # not listening (yet)
        return 0, ""


def api(prometheus: str, path: str, **params: str) -> Any:
    status, body = get(f"{prometheus}/api/v1/{path}?{urllib.parse.urlencode(params)}")
    return json.loads(body) if status == 200 else None


@contextmanager
def prometheus_process(config: Path, port: int) -> Iterator[str]:
    binary = shutil.which("prometheus")
    if binary is None:
        unavailable("needs Prometheus: apt-get install -y prometheus")
    assert binary is not None
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={config.parent / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(config.parent / "prometheus.log").open("wb"),
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()  # by its own handle
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def test_prometheus_scrapes_with_the_key_file_and_runs_the_rules_and_queries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    monkeypatch.setenv("OPENENV_API_KEY", KEY)
    out = tmp_path / "front"
    plan = plan_deploy("envoy", tmp_path, backends=[f"127.0.0.1:{port}"], token=True, out=out)
    run_deploy(plan, apply=False, force=False, timeout=1)
    folder = out / "monitoring"
    config = folder / "prometheus.yml"
    (folder / monitoring.TOKEN_FILE).write_text(KEY + "\n")
    (folder / monitoring.TOKEN_FILE).chmod(0o600)
    fast = yaml.safe_load(config.read_text())  # the same file, scraped every second
    fast["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config.write_text(yaml.safe_dump(fast))
    job = monitoring.server_job(plan.settings)
    model = json.loads((folder / "grafana-dashboard.json").read_text())

    with server_process(APP, port, OPENENV_API_KEY=KEY):
        for _ in range(3):
            episode(f"http://127.0.0.1:{port}", token=KEY)
        with prometheus_process(config, free_port()) as prometheus:

            def scraped() -> bool:
                answer = api(prometheus, "query", query=f'sum(openenv_steps_total{{job="{job}"}})')
                result = (answer or {}).get("data", {}).get("result", [])
                return bool(result) and float(result[0]["value"][1]) == 3

            assert wait_until(scraped, timeout=60, interval=1), (
                folder / "prometheus.log"
            ).read_text()[-2000:]
            targets = api(prometheus, "targets")["data"]["activeTargets"]
            assert [(t["labels"]["job"], t["health"]) for t in targets] == [(job, "up")]

            rules = api(prometheus, "rules")["data"]["groups"][0]["rules"]
            assert {r["name"] for r in rules} >= {"OpenEnvReplicaDown", "OpenEnvStuckCalls"}
            assert wait_until(
                lambda: all(
                    r["health"] == "ok"
                    for r in api(prometheus, "rules")["data"]["groups"][0]["rules"]
                ),
                timeout=30,
                interval=1,
            )
            firing = {r["name"] for r in rules if r["state"] == "firing"}
            assert "OpenEnvReplicaDown" not in firing

            for expression in monitoring.dashboard_expressions(model):
                answer = api(prometheus, "query", query=expression.replace(monitoring.RATE, "1m"))
                assert answer is not None and answer["status"] == "success", expression


def test_envoy_serves_the_counters_the_dashboard_and_alerts_name(tmp_path: Path) -> None:
    project = tmp_path / "front_env"
    write_project(render_project("front_env"), project)
    plan = plan_deploy("kubernetes", project, out=tmp_path / "k8s")
    files = plan.files
    server, front_port, admin, stats = free_port(), free_port(), free_port(), free_port()
    # The rendered front, on this machine: the replica at 127.0.0.1, every port a free one.
    config = yaml.safe_load(files["envoy/envoy.yaml"])
    config["admin"]["address"]["socket_address"]["port_value"] = admin
    front_listener, stats_listener = config["static_resources"]["listeners"]
    front_listener["address"]["socket_address"]["port_value"] = front_port
    stats_listener["address"]["socket_address"]["port_value"] = stats
    replicas, admin_cluster = config["static_resources"]["clusters"]
    replica = replicas["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
    replica["address"]["socket_address"] = {"address": "127.0.0.1", "port_value": server}
    admin_cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"][
        "socket_address"
    ]["port_value"] = admin
    path = tmp_path / "envoy.yaml"
    path.write_text(yaml.safe_dump(config))
    assert stats_listener["address"]["socket_address"]["port_value"] != ENVOY_STATS_PORT

    front = f"http://127.0.0.1:{front_port}"
    with server_process(APP, server), envoy_process(path, front):
        for _ in range(2):
            episode(front)
        status, text = get(f"http://127.0.0.1:{stats}{ENVOY_STATS_PATH}")
        assert status == 200
        # Nothing else of the admin page answers there.
        for other in ("/server_info", "/config_dump", "/clusters", "/quitquitquit"):
            assert get(f"http://127.0.0.1:{stats}{other}")[0] == 404, other
        request = urllib.request.Request(
            f"http://127.0.0.1:{stats}{ENVOY_STATS_PATH}", method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 404
    # The names as Prometheus stores them (prometheus_client's parser would add _total to
    # Envoy's counters), and the label names: the queries group and select by them too.
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    exported = {re.split(r"[{ ]", line, maxsplit=1)[0] for line in lines}
    exported |= {label for line in lines for label in re.findall(r"([a-z_]+)=\"", line)}
    model = monitoring.dashboard(plan.settings, envoy=True)
    groups = monitoring.alert_groups(plan.settings, envoy=True)
    queries = monitoring.dashboard_expressions(model) + [
        rule["expr"] for group in groups for rule in group["rules"]
    ]
    used = {name for q in queries for name in re.findall(r"\benvoy_[a-z0-9_]+", q)}
    assert used and used <= exported, sorted(used - exported)

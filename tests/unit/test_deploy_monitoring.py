"""openenv_cli.deploy.monitoring: what `openenv deploy` writes to watch the fleet.

promtool (Debian's `prometheus` package) checks the scrape configuration and the alert rules,
and parses every dashboard expression; Grafana's own schema (grafana-foundation-sdk) reads
the dashboard; every openenv_* name in a query is one the server exports.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from openenv_cli.deploy import monitoring, plan_deploy
from openenv_cli.deploy.render import ENVOY_STATS_PATH, ENVOY_STATS_PORT, write_files
from openenv_cli.scaffold import render_project, write_project
from openenv_runtime.server.metrics import WS_OK, Tally, families, series
from tests.support.optional import require, unavailable

KEYS = ("WORKERS", "MAX_CONCURRENT_ENVS", "SESSION_TIMEOUT", "OPENENV_API_KEY", "PORT")
SECRET = "never-in-a-file-0123456789"


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("OPENENV_DEPLOY_FRONTS", raising=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_project(render_project("demo_env"), tmp_path / "demo_env")
    return tmp_path / "demo_env"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        unavailable("needs promtool: apt-get install -y prometheus")
    assert found is not None
    return found


def check(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        [promtool(), "check", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def written(target: str, project: Path, out: Path, **options: Any) -> Path:
    if target == "envoy":  # no project: the servers someone else started
        project, options = out.parent, {**options, "backends": ["10.0.0.5:8000", "[::1]:8001"]}
    plan = plan_deploy(target, project, out=out, **options)
    write_files(plan.files, out, force=True)
    return out


def exported_names() -> set[str]:
    """Every sample name the server's /metrics can answer (the real exposition, parsed)."""
    runner = SimpleNamespace(stuck_threads=0)
    manager = SimpleNamespace(
        sessions={}, detached=0, capacity=1, warm=[], abandoned=0, runner=runner
    )
    tally = Tally()
    tally.step(WS_OK, 0.001)
    tally.reset("ws", True, 0.01)
    tally.opened["ws",] += 1  # the counters that show only once they count something
    tally.closed["ws", "client"] += 1
    tally.warm["hit",] += 1
    tally.checkpoints["taken",] += 1

    class Everything(Collector):
        def collect(self) -> Any:
            return families(series(tally, manager))

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Everything())
    text = generate_latest(registry).decode()
    return {
        sample.name for family in text_string_to_metric_families(text) for sample in family.samples
    }


def expressions(out: Path) -> list[str]:
    model = json.loads((out / "monitoring/grafana-dashboard.json").read_text())
    rules = yaml.safe_load((out / "monitoring/alerts.yml").read_text())
    return monitoring.dashboard_expressions(model) + [
        rule["expr"] for group in rules["groups"] for rule in group["rules"]
    ]


@pytest.mark.parametrize("target", ["swarm", "slurm", "envoy"])
def test_promtool_accepts_the_scrape_config_and_the_rules(
    target: str, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENENV_API_KEY", SECRET)
    out = written(target, project, tmp_path / f"out-{target}", token=True)
    folder = out / "monitoring"
    config = yaml.safe_load((folder / "prometheus.yml").read_text())
    server = config["scrape_configs"][0]
    # The key is read from a file the operator writes, never inline.
    assert server["authorization"] == {"type": "Bearer", "credentials_file": "openenv-api-key"}
    for path in out.rglob("*"):
        assert not path.is_file() or SECRET not in path.read_text(), path
    (folder / monitoring.TOKEN_FILE).write_text("test-token\n")
    assert "SUCCESS" in check("config", "prometheus.yml", cwd=folder)
    assert "SUCCESS" in check("rules", "alerts.yml", cwd=folder)


def test_kubernetes_scrape_annotations_service_monitor_and_rules(
    project: Path, tmp_path: Path
) -> None:
    out = written("kubernetes", project, tmp_path / "k8s", token=False)
    deployment = yaml.safe_load((out / "deployment.yaml").read_text())
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "8000",
        "prometheus.io/path": "/metrics",
    }
    envoy_deployment, envoy_service = yaml.safe_load_all(
        (out / "envoy-deployment.yaml").read_text()
    )
    envoy_pod = envoy_deployment["spec"]["template"]
    assert envoy_pod["metadata"]["annotations"]["prometheus.io/port"] == str(ENVOY_STATS_PORT)
    assert envoy_pod["metadata"]["annotations"]["prometheus.io/path"] == ENVOY_STATS_PATH
    assert {"name": "stats", "containerPort": ENVOY_STATS_PORT} in envoy_pod["spec"]["containers"][
        0
    ]["ports"]
    assert {"name": "stats", "port": ENVOY_STATS_PORT, "targetPort": "stats"} in envoy_service[
        "spec"
    ]["ports"]

    monitors = list(yaml.safe_load_all((out / "monitoring/servicemonitor.yaml").read_text()))
    services = [*yaml.safe_load_all((out / "service.yaml").read_text()), envoy_service]
    for monitor in monitors:
        assert monitor["kind"] == "ServiceMonitor"
        wanted = monitor["spec"]["selector"]["matchLabels"]
        chosen = [
            s["metadata"]["name"]
            for s in services
            if wanted.items() <= s["metadata"]["labels"].items()
        ]
        # One Service each (the headless one would scrape every replica twice); its job
        # label (the Service's name) is the one the rules and the dashboard select.
        assert chosen == [monitor["metadata"]["name"]]
        port = monitor["spec"]["endpoints"][0]["port"]
        owner = next(s for s in services if s["metadata"]["name"] == chosen[0])
        assert port in [p["name"] for p in owner["spec"]["ports"]]
        assert "authorization" not in monitor["spec"]["endpoints"][0]
    assert [m["metadata"]["name"] for m in monitors] == ["demo-env", "demo-env-envoy"]
    # Not in the Kustomization: it needs the operator's CRDs.
    assert "monitoring" not in (out / "kustomization.yaml").read_text()
    rule = yaml.safe_load((out / "monitoring/prometheusrule.yaml").read_text())
    plain = yaml.safe_load((out / "monitoring/alerts.yml").read_text())
    assert rule["kind"] == "PrometheusRule" and rule["spec"]["groups"] == plain["groups"]
    alerts = {r["alert"] for r in plain["groups"][0]["rules"]}
    assert {
        "OpenEnvReplicaDown",
        "OpenEnvSessionsRefused",
        "OpenEnvStuckCalls",
        "OpenEnvStepLatencyHigh",
        "OpenEnvFrontNoHealthyReplica",
    } <= alerts
    assert "SUCCESS" in check("rules", "alerts.yml", cwd=out / "monitoring")


def test_kubernetes_with_a_token_reads_it_from_the_secret(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENENV_API_KEY", SECRET)
    out = written("kubernetes", project, tmp_path / "k8s", token=True)
    server = next(yaml.safe_load_all((out / "monitoring/servicemonitor.yaml").read_text()))
    assert server["spec"]["endpoints"][0]["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": "demo-env-token", "key": "OPENENV_API_KEY"},
    }
    deployment = yaml.safe_load((out / "deployment.yaml").read_text())
    # An annotation-based scrape cannot send the key: it is told not to try.
    assert deployment["spec"]["template"]["metadata"]["annotations"]["prometheus.io/scrape"] == (
        "false"
    )
    for path in out.rglob("*"):
        assert not path.is_file() or SECRET not in path.read_text(), path


def test_envoy_serves_only_its_prometheus_stats_beside_the_front(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = yaml.safe_load(plan_deploy("kubernetes", project).files["envoy/envoy.yaml"])
    assert config["admin"]["address"]["socket_address"]["address"] == "127.0.0.1"
    front, stats = config["static_resources"]["listeners"]
    assert front["name"] == "front" and stats["name"] == "stats"
    assert stats["address"]["socket_address"]["port_value"] == ENVOY_STATS_PORT
    hcm = stats["filter_chains"][0]["filters"][0]["typed_config"]
    (route,) = hcm["route_config"]["virtual_hosts"][0]["routes"]
    assert route["match"]["path"] == ENVOY_STATS_PATH  # exact: nothing else of the admin page
    assert route["match"]["headers"] == [{"name": ":method", "string_match": {"exact": "GET"}}]
    admin = config["static_resources"]["clusters"][-1]
    assert admin["name"] == route["route"]["cluster"] == "admin"
    # Several fronts in one container cannot share the stats port: then Envoy is not scraped.
    monkeypatch.setenv("OPENENV_DEPLOY_FRONTS", "2")
    files = plan_deploy("swarm", project).files
    assert len(yaml.safe_load(files["envoy/envoy.yaml"])["static_resources"]["listeners"]) == 1
    jobs = yaml.safe_load(files["monitoring/prometheus.yml"])["scrape_configs"]
    assert [job["job_name"] for job in jobs] == ["demo-env"]


def test_slurm_jobs_list_their_servers_for_prometheus(project: Path, tmp_path: Path) -> None:
    files = plan_deploy("slurm", project, out=tmp_path / "out").files
    config = yaml.safe_load(files["monitoring/prometheus.yml"])
    assert config["scrape_configs"][0]["file_sd_configs"] == [{"files": ["targets-*.json"]}]
    script = files["openenv.sbatch"]
    assert 'TARGETS="$DEPLOY_DIR/monitoring/targets-${SLURM_JOB_ID}.json"' in script
    assert "trap 'rm -f \"$TARGETS\"' EXIT" in script
    # The shell that writes the file, run on a sample endpoints.txt: Prometheus's file_sd format.
    start = script.index("TARGETS=")
    snippet = script[start : script.index('mv "$TARGETS.tmp" "$TARGETS"') + 28]
    run = tmp_path / "run"
    run.mkdir()
    (run / "endpoints.txt").write_text("10.0.0.4:8000\n10.0.0.5:8001\n")
    done = subprocess.run(
        ["bash", "-c", snippet.replace("trap ", ": ")],
        env={"DEPLOY_DIR": str(tmp_path / "d"), "RUN_DIR": str(run), "SLURM_JOB_ID": "42"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    listed = json.loads((tmp_path / "d/monitoring/targets-42.json").read_text())
    assert listed == [
        {"labels": {"slurm_job_id": "42"}, "targets": ["10.0.0.4:8000", "10.0.0.5:8001"]}
    ]


def test_every_openenv_metric_in_the_queries_is_exported(project: Path, tmp_path: Path) -> None:
    out = written("kubernetes", project, tmp_path / "k8s")
    names = exported_names()
    assert "openenv_steps_total" in names and "openenv_step_duration_seconds_bucket" in names
    used = {m for e in expressions(out) for m in re.findall(r"\bopenenv_[a-z0-9_]+", e)}
    assert used, "the dashboard and the rules query the server's metrics"
    assert used <= names, f"not exported by the server: {sorted(used - names)}"


def test_promtool_parses_every_dashboard_query(project: Path, tmp_path: Path) -> None:
    out = written("kubernetes", project, tmp_path / "k8s")
    model = json.loads((out / "monitoring/grafana-dashboard.json").read_text())
    # Each query as a recording rule, with Grafana's window variable set to a duration.
    rules = [
        {"record": f"dashboard:query{i}", "expr": e.replace(monitoring.RATE, "5m")}
        for i, e in enumerate(monitoring.dashboard_expressions(model))
    ]
    (tmp_path / "queries.yml").write_text(
        yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]})
    )
    assert f"SUCCESS: {len(rules)} rules found" in check("rules", "queries.yml", cwd=tmp_path)


def test_grafana_schema_reads_every_field_of_the_dashboard(project: Path) -> None:
    require("grafana_foundation_sdk")
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models import prometheus
    from grafana_foundation_sdk.models.dashboard import Dashboard

    register_default_plugins()
    text = plan_deploy("kubernetes", project).files["monitoring/grafana-dashboard.json"]
    model = json.loads(text)
    decoded = Dashboard.from_json(model)
    assert decoded.panels and all(
        isinstance(t, prometheus.Dataquery)
        for p in decoded.panels
        for t in getattr(p, "targets", None) or []
    )
    # The SDK keeps only the schema's fields (and adds defaults): a field it drops or changes
    # is one Grafana's schema does not have.
    again = json.loads(json.dumps(decoded, cls=JSONEncoder))
    assert _lost(model, again) == []


def _lost(ours: Any, theirs: Any, path: str = "") -> list[str]:
    if isinstance(ours, dict):
        if not isinstance(theirs, dict):
            return [path]
        return [
            lost
            for key, value in ours.items()
            for lost in (
                [f"{path}/{key}"]
                if key not in theirs
                else _lost(value, theirs[key], f"{path}/{key}")
            )
        ]
    if isinstance(ours, list):
        if not isinstance(theirs, list) or len(ours) != len(theirs):
            return [path]
        return [
            lost
            for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
            for lost in _lost(a, b, f"{path}[{i}]")
        ]
    return [] if ours == theirs else [f"{path}: {ours!r} became {theirs!r}"]

"""What a team needs to watch a deployment, in ``monitoring/`` of the deploy folder: where
Prometheus scrapes the replicas (and the Envoy front), the alert rules, and a Grafana
dashboard of the server's metrics (``openenv_runtime.server.metrics``).

Everything is built here as data and dumped as YAML or JSON, so a value can never break the
file's syntax. The access token is never written: with a token, Prometheus reads it from a
file the operator creates (``credentials_file``) or, on Kubernetes, from the Secret the
replicas already use.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml

from openenv_cli.deploy.backends import Backend
from openenv_cli.deploy.render import ENVOY_STATS_PATH, ENVOY_STATS_PORT
from openenv_cli.deploy.settings import DeploySettings

FOLDER = "monitoring"
METRICS_PATH = "/metrics"
TOKEN_FILE = "openenv-api-key"
"""The file beside ``prometheus.yml`` holding the access token, which the operator writes
(``openenv deploy`` never does); Prometheus resolves the relative path from its config file."""
SCRAPE_INTERVAL = "15s"
STEP_P99_SECONDS = 2.5  # a bucket bound of the step histogram: a slow-step alert above it
REFUSED_RATIO = 0.05  # of new sessions refused (capacity, client cap), over 10 minutes
FULL_RATIO = 0.9  # of the capacity in use, over 10 minutes
ENVOY_CLUSTER = "replicas"  # the upstream cluster's name in envoy.yaml
ENVOY_LISTENER = "front"  # the front listener's stat prefix in envoy.yaml


def server_job(settings: DeploySettings) -> str:
    """The ``job`` label of the replicas' series (the Kubernetes Service's name, too)."""
    return settings.name


def envoy_job(settings: DeploySettings) -> str:
    """The ``job`` label of the Envoy fronts' series."""
    return f"{settings.name}-envoy"


# -- alert rules ------------------------------------------------------------------------------
def alert_groups(settings: DeploySettings, *, envoy: bool) -> list[dict[str, Any]]:
    """Prometheus alert rules: a replica down, sessions refused, stuck calls, slow steps,
    capacity nearly used, and (``envoy``) a front down or with no healthy replica."""
    job = f'job="{server_job(settings)}"'
    rules: list[dict[str, Any]] = [
        _alert(
            "OpenEnvReplicaDown",
            f"up{{{job}}} == 0",
            "2m",
            "critical",
            "Replica {{ $labels.instance }} does not answer /metrics.",
            "Prometheus could not scrape it for 2 minutes: the process is gone, hung, or "
            "refuses the scrape (a wrong or missing access token gives 401).",
        ),
        _alert(
            "OpenEnvNoReplicaUp",
            f"absent(up{{{job}}} == 1)",
            "2m",
            "critical",
            f"No replica of {settings.name} answers.",
            "Every scrape of the replicas failed, or Prometheus finds none to scrape.",
        ),
        _alert(
            "OpenEnvSessionsRefused",
            f'sum(rate(openenv_sessions_refused_total{{{job},reason!="draining"}}[5m])) / '
            f"(sum(rate(openenv_sessions_opened_total{{{job}}}[5m])) + "
            f"sum(rate(openenv_sessions_refused_total{{{job}}}[5m]))) > {REFUSED_RATIO}",
            "10m",
            "warning",
            f"More than {REFUSED_RATIO:.0%} of new sessions are refused.",
            "The replicas are full (reason capacity) or clients open more sessions than their "
            "cap (client_cap): add replicas or sessions per replica. Refusals while draining "
            "(a rollout) are left out.",
        ),
        _alert(
            "OpenEnvStuckCalls",
            f"max by (instance) (openenv_stuck_threads{{{job}}}) > 0",
            "5m",
            "warning",
            "Replica {{ $labels.instance }} has environment calls stuck past the step timeout.",
            "Their threads still run (openenv_stuck_threads); their sessions were ended "
            "(openenv_steps_abandoned_total). An environment that never returns holds them "
            "until the replica restarts.",
        ),
        _alert(
            "OpenEnvStepLatencyHigh",
            "histogram_quantile(0.99, sum by (le) "
            f"(rate(openenv_step_duration_seconds_bucket{{{job}}}[5m]))) > {STEP_P99_SECONDS}",
            "10m",
            "warning",
            f"p99 step time above {STEP_P99_SECONDS} s.",
            "Server time of a step (validation, the environment's step, the reply). Edit the "
            "threshold to suit the environment.",
        ),
        _alert(
            "OpenEnvCapacityNearlyFull",
            f"sum(openenv_sessions_active{{{job}}}) / sum(openenv_sessions_capacity{{{job}}}) "
            f"> {FULL_RATIO}",
            "10m",
            "warning",
            f"More than {FULL_RATIO:.0%} of the session slots are in use.",
            "New sessions will soon be refused: add replicas.",
        ),
    ]
    if envoy:
        front = f'job="{envoy_job(settings)}"'
        rules += [
            _alert(
                "OpenEnvFrontDown",
                f"up{{{front}}} == 0",
                "2m",
                "critical",
                "Envoy front {{ $labels.instance }} does not answer.",
                "Its stats listener did not answer the scrape for 2 minutes.",
            ),
            _alert(
                "OpenEnvFrontNoHealthyReplica",
                f'max(envoy_cluster_membership_healthy{{{front},envoy_cluster_name="{ENVOY_CLUSTER}"}})'
                " == 0",
                "1m",
                "critical",
                "Envoy sees no healthy replica.",
                "Every replica fails Envoy's /health check: new sessions get 503.",
            ),
        ]
    return [{"name": f"openenv-{settings.name}", "rules": rules}]


def _alert(
    name: str, expr: str, wait: str, severity: str, summary: str, description: str
) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": wait,
        "labels": {"severity": severity},
        "annotations": {"summary": summary, "description": description},
    }


# -- Grafana dashboard ------------------------------------------------------------------------
RATE = "$__rate_interval"  # Grafana's own choice of window (at least four scrapes)
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def dashboard(settings: DeploySettings, *, envoy: bool) -> dict[str, Any]:
    """A Grafana dashboard (JSON model) of the replicas' metrics, and Envoy's with ``envoy``."""
    job = f'job="{server_job(settings)}"'

    def rate(metric: str, by: str = "", labels: str = "") -> str:
        grouping = f" by ({by})" if by else ""
        return f"sum{grouping} (rate({metric}{{{job}{labels}}}[{RATE}]))"

    def p(quantile: float, metric: str) -> str:
        return f"histogram_quantile({quantile}, {rate(metric + '_bucket', 'le')})"

    panels: list[tuple[str, str, list[tuple[str, str]]]] = [
        ("Replicas up", "short", [(f"up{{{job}}}", "{{instance}}")]),
        (
            "Steps per second",
            "ops",
            [(rate("openenv_steps_total", "outcome"), "{{outcome}}")],
        ),
        (
            "Step time",
            "s",
            [
                (p(0.5, "openenv_step_duration_seconds"), "p50"),
                (p(0.99, "openenv_step_duration_seconds"), "p99"),
            ],
        ),
        (
            "Sessions",
            "short",
            [
                (f"sum by (transport) (openenv_sessions_active{{{job}}})", "{{transport}}"),
                (f"sum(openenv_sessions_capacity{{{job}}})", "capacity"),
                (f"sum(openenv_sessions_detached{{{job}}})", "detached"),
            ],
        ),
        (
            "Sessions refused per second",
            "ops",
            [(rate("openenv_sessions_refused_total", "reason"), "{{reason}}")],
        ),
        (
            "Sessions opened and closed per second",
            "ops",
            [
                (rate("openenv_sessions_opened_total", "transport"), "opened {{transport}}"),
                (rate("openenv_sessions_closed_total", "reason"), "closed {{reason}}"),
                (rate("openenv_sessions_resumed_total"), "resumed"),
            ],
        ),
        (
            "Stuck calls",
            "short",
            [
                (f"sum by (instance) (openenv_stuck_threads{{{job}}})", "stuck {{instance}}"),
                (
                    f"sum(increase(openenv_steps_abandoned_total{{{job}}}[{RATE}]))",
                    "sessions abandoned",
                ),
            ],
        ),
        (
            "Resets",
            "s",
            [
                (p(0.5, "openenv_reset_duration_seconds"), "p50"),
                (p(0.99, "openenv_reset_duration_seconds"), "p99"),
            ],
        ),
        (
            "Warm pool",
            "ops",
            [
                (rate("openenv_warm_pool_total", "result"), "{{result}}"),
                (f"sum(openenv_warm_instances{{{job}}})", "waiting"),
            ],
        ),
    ]
    if envoy:
        front = f'job="{envoy_job(settings)}"'
        cluster = f'{front},envoy_cluster_name="{ENVOY_CLUSTER}"'
        panels += [
            (
                "Envoy: open front connections",
                "short",
                [
                    (
                        f"sum(envoy_http_downstream_cx_active{{{front},"
                        f'envoy_http_conn_manager_prefix="{ENVOY_LISTENER}"}})',
                        "connections",
                    )
                ],
            ),
            (
                "Envoy: replicas",
                "short",
                [
                    (f"min(envoy_cluster_membership_healthy{{{cluster}}})", "healthy"),
                    (f"max(envoy_cluster_membership_total{{{cluster}}})", "known"),
                ],
            ),
            (
                "Envoy: replica responses per second",
                "ops",
                [
                    (
                        "sum by (envoy_response_code_class) "
                        f"(rate(envoy_cluster_upstream_rq_xx{{{cluster}}}[{RATE}]))",
                        "{{envoy_response_code_class}}xx",
                    ),
                    (
                        f"sum(rate(envoy_cluster_upstream_rq_retry{{{cluster}}}[{RATE}]))",
                        "retries",
                    ),
                ],
            ),
        ]
    return {
        "description": _generated(settings),  # first: the file's second line says so
        "uid": f"openenv-{settings.name}"[:40],
        "title": f"openenv: {settings.name}",
        "tags": ["openenv"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "schemaVersion": 38,
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                }
            ]
        },
        "panels": [
            _panel(index, title, unit, queries)
            for index, (title, unit, queries) in enumerate(panels)
        ],
    }


def _panel(index: int, title: str, unit: str, queries: Sequence[tuple[str, str]]) -> dict[str, Any]:
    width, height = 12, 8
    return {
        "id": index + 1,
        "type": "timeseries",
        "title": title,
        "datasource": DATASOURCE,
        "gridPos": {"h": height, "w": width, "x": (index % 2) * width, "y": (index // 2) * height},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {
                "refId": chr(ord("A") + n),
                "datasource": DATASOURCE,
                "expr": expr,
                "legendFormat": legend,
            }
            for n, (expr, legend) in enumerate(queries)
        ],
    }


def dashboard_expressions(model: dict[str, Any]) -> list[str]:
    """Every PromQL expression of a dashboard model (for checks)."""
    return [str(t["expr"]) for panel in model.get("panels", []) for t in panel.get("targets", [])]


# -- scrape configuration ---------------------------------------------------------------------
def prometheus_config(
    settings: DeploySettings, servers: dict[str, Any], fronts: dict[str, Any] | None
) -> dict[str, Any]:
    """``prometheus.yml``: the replicas' job from ``servers`` (a service discovery block),
    Envoy's from ``fronts`` (None: not scraped), and the alert rules beside it."""
    server: dict[str, Any] = {
        "job_name": server_job(settings),
        "metrics_path": METRICS_PATH,
        **servers,
    }
    if settings.token:
        server["authorization"] = {"type": "Bearer", "credentials_file": TOKEN_FILE}
    jobs = [server]
    if fronts is not None:
        jobs.append({"job_name": envoy_job(settings), "metrics_path": ENVOY_STATS_PATH, **fronts})
    return {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "rule_files": ["alerts.yml"],
        "scrape_configs": jobs,
    }


def service_monitors(settings: DeploySettings) -> list[dict[str, Any]]:
    """Prometheus Operator ``ServiceMonitor`` objects for the replicas and the Envoy fronts."""
    endpoint: dict[str, Any] = {"port": "http", "path": METRICS_PATH, "interval": SCRAPE_INTERVAL}
    if settings.token:
        # The Secret the replicas read their token from: never the token itself.
        endpoint["authorization"] = {
            "type": "Bearer",
            "credentials": {"name": f"{settings.name}-token", "key": "OPENENV_API_KEY"},
        }
    front = {"port": "stats", "path": ENVOY_STATS_PATH, "interval": SCRAPE_INTERVAL}
    return [
        _service_monitor(settings, server_job(settings), "server", endpoint),
        _service_monitor(settings, envoy_job(settings), "envoy", front),
    ]


def _service_monitor(
    settings: DeploySettings, name: str, component: str, endpoint: dict[str, Any]
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "labels": {
            "app.kubernetes.io/name": settings.name,
            "app.kubernetes.io/component": component,
        },
    }
    if settings.namespace:
        metadata["namespace"] = settings.namespace
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": metadata,
        "spec": {
            "selector": {
                "matchLabels": {
                    "app.kubernetes.io/name": settings.name,
                    "app.kubernetes.io/component": component,
                }
            },
            "endpoints": [endpoint],
        },
    }


def prometheus_rule(settings: DeploySettings, groups: list[dict[str, Any]]) -> dict[str, Any]:
    """The alert rules as a Prometheus Operator ``PrometheusRule``."""
    metadata: dict[str, Any] = {
        "name": f"{settings.name}-alerts",
        "labels": {"app.kubernetes.io/name": settings.name},
    }
    if settings.namespace:
        metadata["namespace"] = settings.namespace
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": metadata,
        "spec": {"groups": groups},
    }


# -- the files --------------------------------------------------------------------------------
def render(
    settings: DeploySettings,
    *,
    stack: str = "",
    backends: Sequence[Backend] = (),
    envoy: bool,
) -> dict[str, str]:
    """``monitoring/``'s files for ``settings.target``; ``envoy``: the fronts serve their stats
    on :data:`ENVOY_STATS_PORT`."""
    groups = alert_groups(settings, envoy=envoy)
    files = {
        f"{FOLDER}/alerts.yml": _yaml(
            settings,
            ["Prometheus alert rules. Check: promtool check rules alerts.yml"],
            {"groups": groups},
        ),
        f"{FOLDER}/grafana-dashboard.json": json.dumps(dashboard(settings, envoy=envoy), indent=2)
        + "\n",
    }
    target = settings.target
    if target == "kubernetes":
        files[f"{FOLDER}/servicemonitor.yaml"] = _yaml(
            settings,
            [
                "For the Prometheus Operator (not in kustomization.yaml: it needs the operator's",
                "CRDs): kubectl apply -f monitoring/servicemonitor.yaml -f monitoring/prometheusrule.yaml",
                "Without the operator, the pods' prometheus.io/* annotations tell an annotation-based",
                "scrape job where to look.",
            ],
            *service_monitors(settings),
        )
        files[f"{FOLDER}/prometheusrule.yaml"] = _yaml(
            settings,
            ["The rules of alerts.yml for the Prometheus Operator."],
            prometheus_rule(settings, groups),
        )
        return files
    token_note = (
        [
            f"The replicas need the access token: write it to {FOLDER}/{TOKEN_FILE} (mode 0600,",
            "never committed); openenv deploy never writes it.",
        ]
        if settings.token
        else []
    )
    if target == "swarm":
        servers = {
            "dns_sd_configs": [
                {"names": [f"tasks.{stack}_server"], "type": "A", "port": settings.port}
            ]
        }
        fronts = (
            {
                "dns_sd_configs": [
                    {"names": [f"tasks.{stack}_envoy"], "type": "A", "port": ENVOY_STATS_PORT}
                ]
            }
            if envoy
            else None
        )
        where = [
            "Run Prometheus on the stack's network (attachable), e.g.",
            f'  docker run -d --network {stack}_replicas -v "$PWD/{FOLDER}:/etc/prometheus:ro" prom/prometheus',
        ]
    elif target == "slurm":
        servers = {"file_sd_configs": [{"files": ["targets-*.json"]}]}
        fronts = None
        where = [
            "Each job lists its servers in targets-JOB_ID.json here (removed when the job ends).",
            "Envoy's stats are not scraped: its admin page listens on the first node's loopback.",
        ]
    else:  # envoy: the servers someone else started
        servers = {"static_configs": [{"targets": [b.netloc for b in backends]}]}
        fronts = None
        where = ["The servers behind Envoy, as given with --backend."]
    files[f"{FOLDER}/prometheus.yml"] = _yaml(
        settings,
        [
            "Prometheus scrape configuration. Check: promtool check config prometheus.yml",
            *where,
            *token_note,
        ],
        prometheus_config(settings, servers, fronts),
    )
    return files


def _generated(settings: DeploySettings) -> str:
    return f"Generated by `openenv deploy {settings.target}` for {settings.name}; edit it freely and commit it."


def _yaml(settings: DeploySettings, notes: list[str], *documents: dict[str, Any]) -> str:
    head = "".join(f"# {line}\n" for line in [_generated(settings), *notes])
    body = "---\n".join(
        yaml.safe_dump(document, sort_keys=False, width=1000, allow_unicode=True)
        for document in documents
    )
    return head + body

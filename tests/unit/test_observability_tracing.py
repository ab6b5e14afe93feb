"""observability/tracing.py: off unless the standard variables say so, and then free."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from openenv_runtime.observability import tracing
from tests.support.optional import require

OTEL_MODULES = 'sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")'

SERVE_AND_STEP = f"""
import json, sys
import fastapi  # recent FastAPI imports the OpenTelemetry API itself (its native telemetry)
before = {OTEL_MODULES}
from websockets.sync.client import connect
from openenv_runtime.testing import running_server
from tests.fixtures.counter import Lifecycle, make_app

with running_server(make_app(Lifecycle())) as url:
    with connect(url.replace("http", "ws") + "/ws") as ws:
        for frame in ('{{"type":"reset"}}', '{{"type":"step","data":{{"delta":1}}}}'):
            ws.send(frame)
            assert json.loads(ws.recv(timeout=30))["type"] == "observation"
print(json.dumps([before, {OTEL_MODULES}]))
"""

CONNECT_AND_STEP = f"""
import json, socket, sys
from openenv_runtime import Action, EnvClient, Observation, State
from tests.support.servers import server_process

class CounterAction(Action):
    delta: int

class CounterClient(EnvClient[CounterAction, Observation, State]):
    pass

with socket.socket() as probe:  # (openenv_runtime.testing's free_port loads the server)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
with server_process("tests.fixtures.counter:app", port):  # another process
    with CounterClient(base_url=f"http://127.0.0.1:{{port}}").sync() as env:
        env.reset()
        env.step(CounterAction(delta=1))
print(json.dumps({OTEL_MODULES}))
"""


def without_otel_variables() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}


def run(script: str) -> object:
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env=without_otel_variables(),
        timeout=120,
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_off_a_server_imports_no_opentelemetry_of_its_own() -> None:
    before, after = run(SERVE_AND_STEP)  # type: ignore[misc]
    assert after == before  # no more than FastAPI's own import of the API
    assert not any(name.startswith("opentelemetry.sdk") for name in after)


def test_off_a_client_imports_no_opentelemetry() -> None:
    assert run(CONNECT_AND_STEP) == []


@pytest.mark.parametrize(
    ("variables", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
    ],
)
def test_the_standard_variables_turn_it_on(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], on: bool
) -> None:
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert tracing.enabled() is on
    if not on:
        assert tracing.tracer() is None


CONSOLE = """
from opentelemetry import trace
from openenv_runtime.observability import tracing
with tracing.tracer("fallback-name").start_as_current_span("probe"):
    pass
trace.get_tracer_provider().shutdown()
"""


@pytest.mark.parametrize(("service", "expected"), [(None, "fallback-name"), ("mine", "mine")])
def test_on_the_sdk_is_set_up_from_the_variables(service: str | None, expected: str) -> None:
    require("opentelemetry.sdk")  # the child process sets it up
    env = without_otel_variables() | {"OTEL_TRACES_EXPORTER": "console"}
    if service is not None:
        env["OTEL_SERVICE_NAME"] = service
    done = subprocess.run(
        [sys.executable, "-c", CONSOLE], capture_output=True, text=True, check=True, env=env
    )
    span = json.loads(done.stdout)
    assert span["name"] == "probe"
    assert span["resource"]["attributes"]["service.name"] == expected


def test_an_exporter_it_does_not_know_is_refused_with_what_to_do() -> None:
    require("opentelemetry.sdk")  # the child process sets it up
    env = without_otel_variables() | {"OTEL_TRACES_EXPORTER": "zipkin"}
    probe = "from openenv_runtime.observability import tracing; tracing.tracer()"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert done.returncode != 0 and "use otlp, console or none" in done.stderr


def test_a_frame_carries_the_current_span_only() -> None:
    frame = '{"type":"step","data":{}}'
    assert tracing.with_traceparent(frame) == frame  # no span current
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    from opentelemetry import context

    token = context.attach(tracing.context_from({"traceparent": parent}))
    try:
        carried = json.loads(tracing.with_traceparent(frame))
    finally:
        context.detach(token)
    assert carried == {"type": "step", "data": {}, "traceparent": parent}

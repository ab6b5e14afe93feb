"""Spans (OpenTelemetry, observability/tracing.py) carry no credential: no session id (an HTTP
session's is its only credential), no resume token, no capture-proxy key."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from websockets.sync.client import connect

from openenv_runtime.capture import CaptureProxy
from openenv_runtime.testing import running_server
from openenv_runtime.testing.stub_llm import StubLLM, StubReply
from tests.fixtures.counter import Lifecycle, make_app
from tests.support.servers import wait_until
from tests.support.spans import named, spans_fixture  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(120)


def values(exporter: InMemorySpanExporter) -> list[str]:
    """Every attribute value and span name, as text."""
    finished = exporter.get_finished_spans()
    return [s.name for s in finished] + [
        str(v) for s in finished for v in (s.attributes or {}).values()
    ]


def test_a_resumable_websocket_session_names_neither_its_id_nor_its_token(
    spans: InMemorySpanExporter,
) -> None:
    key = "k" * 22
    with running_server(make_app(Lifecycle())) as url:
        ws_url = url.replace("http", "ws") + "/ws"
        with connect(ws_url, additional_headers={"X-OpenEnv-Session": key}) as ws:
            assert ws.response is not None
            token = ws.response.headers["X-OpenEnv-Resume-Token"]
            for frame in ({"type": "reset", "seq": 1}, {"type": "step", "data": {}, "seq": 2}):
                ws.send(json.dumps(frame))
                ws.recv(timeout=30)
        assert wait_until(lambda: len(named(spans, "openenv.session")) == 1)
    assert {"openenv.session", "openenv.reset", "openenv.step"} <= set(values(spans))
    assert not [v for v in values(spans) if key in v or token in v]


def test_an_http_session_never_names_its_id(spans: InMemorySpanExporter) -> None:
    with running_server(make_app(Lifecycle())) as url:
        sid = httpx.post(f"{url}/reset", json={}).json()["session_id"]
        httpx.post(f"{url}/step", json={"session_id": sid, "action": {}})
        httpx.post(f"{url}/close", json={"session_id": sid})
        assert wait_until(lambda: len(named(spans, "openenv.session")) == 1)
    assert len(named(spans, "openenv.step")) == 1
    assert not [v for v in values(spans) if sid in v]


def test_the_capture_proxy_names_neither_the_session_nor_its_key(
    spans: InMemorySpanExporter,
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    with StubLLM(lambda messages: StubReply("hi")).serve() as upstream:
        proxy = CaptureProxy(upstream + "/v1")
        with running_server(proxy.app) as url:
            session: dict[str, Any] = httpx.post(f"{url}/sessions").json()
            own = {"Authorization": f"Bearer {session['api_key']}"}
            httpx.post(f"{session['base_url']}/chat/completions", json=body, headers=own)
    assert named(spans, "openenv.capture.chat_completion")
    found = values(spans)
    assert not [v for v in found if session["api_key"] in v or session["session_id"] in v]

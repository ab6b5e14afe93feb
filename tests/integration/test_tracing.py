"""OpenTelemetry spans of a real server and a trainer's episode (observability/tracing.py).

The server runs in a thread of this process, so its spans and the trainer's reach the same
in-memory exporter; the trace context still crosses a real WebSocket (handshake and frames).
"""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from google.protobuf.json_format import MessageToJson
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from websockets.sync.client import connect

from openenv_runtime.capture import CaptureProxy
from openenv_runtime.llm.client import LLMResponse
from openenv_runtime.rollouts import RolloutService
from openenv_runtime.rollouts.episode import Episode, ModelPolicy, Player
from openenv_runtime.testing import free_port, running_server
from openenv_runtime.testing.stub_llm import StubLLM, StubReply
from tests.fixtures.counter import CounterAction, CounterClient, Lifecycle, make_app
from tests.fixtures.guess import counting_policy
from tests.fixtures.guess import make_app as guess_app
from tests.support.servers import server_process, wait_until
from tests.support.spans import named, spans_fixture  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(120)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


def ask(ws: Any, frame: dict[str, Any]) -> dict[str, Any]:
    ws.send(json.dumps(frame))
    reply: dict[str, Any] = json.loads(ws.recv(timeout=30))
    return reply


def test_a_session_span_holds_its_resets_and_steps(spans: InMemorySpanExporter) -> None:
    with running_server(make_app(Lifecycle())) as url:
        headers = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
        with connect(url.replace("http", "ws") + "/ws", additional_headers=headers) as ws:
            assert ask(ws, {"type": "reset", "data": {"limit": 2}})["type"] == "observation"
            for _ in range(40):  # past the warm-up after which a plain step would run inline
                assert ask(ws, {"type": "step", "data": {"delta": 1}})["type"] == "observation"
                ask(ws, {"type": "reset", "data": {"limit": 2}})
            ask(ws, {"type": "step", "data": {"delta": 1}})
            done = ask(ws, {"type": "step", "data": {"delta": 1}})
            assert done["data"]["done"] is True
            refused = ask(ws, {"type": "step", "data": {"delta": "many"}})
            assert refused["data"]["code"] == "VALIDATION_ERROR"
        assert wait_until(lambda: len(named(spans, "openenv.session")) == 1)
    [session] = named(spans, "openenv.session")
    assert session.context is not None and session.parent is not None
    assert format(session.context.trace_id, "032x") == TRACE_ID
    assert format(session.parent.span_id, "016x") == PARENT_ID  # the client's span
    assert session.attributes is not None
    assert session.attributes["openenv.session"].startswith("#")  # a label, not the id
    assert session.attributes["openenv.session.steps"] == 43
    resets, steps = named(spans, "openenv.reset"), named(spans, "openenv.step")
    assert (len(resets), len(steps)) == (41, 43)  # every one traced: none answered inline
    for child in resets + steps:
        assert child.parent is not None and child.parent.span_id == session.context.span_id
        assert child.attributes is not None
        assert child.attributes["openenv.session"] == session.attributes["openenv.session"]
        assert child.attributes["openenv.duration_ms"] >= 0
    *_, last, invalid = steps
    assert last.attributes is not None and invalid.attributes is not None
    assert last.attributes["openenv.step.index"] == 2
    assert last.attributes["openenv.done"] is True
    assert last.attributes["openenv.reward"] == 1.0
    assert last.attributes["openenv.outcome"] == "done"
    assert invalid.attributes["openenv.outcome"] == "error"
    assert invalid.attributes["openenv.error.code"] == "VALIDATION_ERROR"
    assert not invalid.status.is_ok


class OneStepModel:
    """A model that always answers with the same action."""

    async def complete_with_tools(self, *_: Any, **__: Any) -> LLMResponse:
        return LLMResponse(content='{"delta": 2}')


def test_an_episode_span_holds_its_calls_and_the_servers_steps(
    spans: InMemorySpanExporter,
) -> None:
    player = Player(
        policy=ModelPolicy(
            llm=OneStepModel(),  # type: ignore[arg-type]
            to_action=lambda reply: CounterAction.model_validate_json(reply.content),
        ),
        to_message=lambda obs: str(obs.total),
        max_turns=3,
    )

    async def play() -> Episode:
        episode = Episode(index=7, group=3, member=1, seed=5, prompt="count")
        with trace.get_tracer("test").start_as_current_span("trainer"):
            async with CounterClient(base_url=url) as client:  # handshake inside "trainer"
                await player.play(episode, client)
        return episode

    with running_server(make_app(Lifecycle())) as url:
        episode = asyncio.run(play())
        assert episode.steps == 3
        assert wait_until(lambda: len(named(spans, "openenv.session")) == 1)
    [trainer] = named(spans, "trainer")
    [played] = named(spans, "openenv.episode")
    [session] = named(spans, "openenv.session")
    assert trainer.context is not None and played.context is not None
    trace_id = trainer.context.trace_id
    assert played.attributes is not None
    assert played.attributes["openenv.episode.index"] == 7
    assert played.attributes["openenv.episode.group"] == 3
    assert played.attributes["openenv.episode.steps"] == 3
    # the session's span: a child of the span current when the client connected
    assert session.parent is not None and session.parent.span_id == trainer.context.span_id
    client_steps = named(spans, "openenv.env.step")
    calls = named(spans, "openenv.model_call")
    assert (len(client_steps), len(calls)) == (3, 3)
    for child in [*client_steps, *calls, *named(spans, "openenv.env.reset")]:
        assert child.parent is not None and child.parent.span_id == played.context.span_id
    # each server step a child of the trainer's step span, in the same trace
    server_steps = named(spans, "openenv.step")
    assert [s.parent.span_id for s in server_steps if s.parent] == [
        s.context.span_id for s in client_steps if s.context
    ]
    assert all(s.context is not None and s.context.trace_id == trace_id for s in server_steps)
    assert all(
        s.links and s.links[0].context.span_id == session.context.span_id  # type: ignore[union-attr]
        for s in server_steps
    )


class Receiver(ThreadingHTTPServer):
    """What an OTLP/HTTP collector receives: POST /v1/traces, protobuf (a stand-in collector)."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, dict[str, Any], str]] = []  # name, attributes, service
        super().__init__(("127.0.0.1", 0), _Receive)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Receive(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            service = next(
                a.value.string_value
                for a in resource.resource.attributes
                if a.key == "service.name"
            )
            for scope in resource.scope_spans:
                for span in scope.spans:
                    values = {a.key: json.loads(MessageToJson(a.value)) for a in span.attributes}
                    self.server.spans.append((span.name, values, service))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


def test_a_server_process_exports_its_spans_over_otlp() -> None:
    receiver = Receiver()
    thread = threading.Thread(target=receiver.serve_forever, daemon=True)
    thread.start()
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_SERVICE_NAME": "counter-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    try:
        port = free_port()
        with server_process("tests.fixtures.counter:app", port, **env):
            with connect(f"ws://127.0.0.1:{port}/ws") as ws:
                ask(ws, {"type": "reset"})
                ask(ws, {"type": "step", "data": {"delta": 1}})
            assert wait_until(lambda: "openenv.session" in {s[0] for s in receiver.spans})
    finally:
        receiver.shutdown()
        receiver.server_close()
    names = [name for name, _, _ in receiver.spans if name.startswith("openenv.")]
    assert sorted(names) == ["openenv.reset", "openenv.session", "openenv.step"]
    assert {service for _, _, service in receiver.spans} == {"counter-under-test"}
    [step] = [values for name, values, _ in receiver.spans if name == "openenv.step"]
    assert step["openenv.step.index"] == {"intValue": "1"}


def test_frames_carry_traceparent_only_to_a_server_that_reads_it(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that does not trace (or another implementation, which may refuse a frame with
    a key it does not know) gets plain frames; the handshake still carries the header."""
    monkeypatch.delenv("OTEL_TRACES_EXPORTER")
    untraced = make_app(Lifecycle())
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    traced = make_app(Lifecycle())

    async def frames(url: str) -> str:
        with trace.get_tracer("test").start_as_current_span("trainer"):
            async with CounterClient(base_url=url) as client:
                await client.step(CounterAction(delta=1))
                return client.step_frame(CounterAction(delta=1))

    with running_server(untraced) as plain_url, running_server(traced) as traced_url:
        assert "traceparent" not in asyncio.run(frames(plain_url))
        assert '"traceparent":"00-' in asyncio.run(frames(traced_url))


def test_the_capture_proxy_traces_each_chat_completion(spans: InMemorySpanExporter) -> None:
    stub = StubLLM(lambda messages: StubReply("hi"))
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    with stub.serve() as upstream:
        proxy = CaptureProxy(upstream + "/v1")
        sent: list[str | None] = []
        client = proxy.model_server
        forward = client.send

        def send(method: str, target: str, data: bytes, headers: dict[str, str], *rest: Any) -> Any:
            sent.append(headers.get("traceparent"))
            return forward(method, target, data, headers, *rest)

        client.send = send  # type: ignore[method-assign]
        with running_server(proxy.app) as url:
            session = httpx.post(f"{url}/sessions").json()
            headers = {
                "Authorization": f"Bearer {session['api_key']}",
                "traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01",
            }
            answer = httpx.post(f"{url}/v1/chat/completions", json=body, headers=headers)
            assert answer.status_code == 200
    [call] = named(spans, "openenv.capture.chat_completion")
    assert call.parent is not None and format(call.parent.span_id, "016x") == PARENT_ID
    assert call.attributes is not None
    assert call.attributes["http.response.status_code"] == 200
    assert call.attributes["openenv.capture.stream"] is False
    for value in call.attributes.values():
        assert session["api_key"] not in str(value) and session["session_id"] not in str(value)
    assert call.context is not None  # the model server is asked inside the call's span
    assert sent == [f"00-{TRACE_ID}-{format(call.context.span_id, '016x')}-01"]


def test_an_http_session_span_holds_its_resets_and_steps(spans: InMemorySpanExporter) -> None:
    with running_server(make_app(Lifecycle())) as url:
        sent = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
        opened = httpx.post(f"{url}/reset", json={"limit": 2}, headers=sent).json()
        sid = opened["session_id"]
        first = httpx.post(f"{url}/step", json={"session_id": sid, "action": {"delta": 1}})
        assert first.status_code == 200  # the raw POST /step (http_step.py)
        second = httpx.post(f"{url}/step", json={"session_id": sid, "action": {"delta": 1}})
        assert second.status_code == 200 and second.json()["done"] is True
        assert httpx.post(f"{url}/close", json={"session_id": sid}).status_code == 200
        assert wait_until(lambda: len(named(spans, "openenv.session")) == 1)
    [session] = named(spans, "openenv.session")
    assert session.parent is not None and format(session.parent.span_id, "016x") == PARENT_ID
    assert session.attributes is not None and session.context is not None
    assert session.attributes["openenv.session.transport"] == "http"
    assert session.attributes["openenv.session.steps"] == 2
    [reset] = named(spans, "openenv.reset")
    assert reset.parent is not None and format(reset.parent.span_id, "016x") == PARENT_ID
    assert reset.links[0].context.span_id == session.context.span_id
    steps = named(spans, "openenv.step")
    assert [s.attributes["openenv.step.index"] for s in steps if s.attributes] == [1, 2]
    assert [s.attributes["openenv.done"] for s in steps if s.attributes] == [False, True]
    for step in steps:
        assert step.parent is not None and step.parent.span_id == session.context.span_id


def test_rollout_service_episodes_name_their_policy_version(
    spans: InMemorySpanExporter,
) -> None:
    async def main(env_url: str, llm_url: str) -> list[list[dict[str, Any]]]:
        async with RolloutService(
            env_url,
            prompts=["x"],
            llm=llm_url,
            model="m",
            group_size=2,
            concurrency=2,
            policy_version=3,
        ) as svc:
            return await svc.aget_batch(1, timeout=60)

    with running_server(guess_app()) as env_url, StubLLM(counting_policy).serve() as llm_url:
        [group] = asyncio.run(main(env_url, llm_url))
    assert len(group) == 2
    episodes = {s.context.span_id: s for s in named(spans, "openenv.episode") if s.context}
    for played in episodes.values():  # those cut when the service closed included
        assert played.attributes is not None
        turns = played.attributes["openenv.episode.turns"]
        assert played.attributes.get("openenv.policy_versions", ()) == (3,) * int(turns)  # type: ignore[call-overload]
    assert sum("openenv.policy_versions" in (p.attributes or {}) for p in episodes.values()) >= 2
    calls = named(spans, "openenv.model_call")
    assert calls and all(
        c.attributes and c.attributes["openenv.policy_version"] == 3 for c in calls
    )
    assert all(c.parent is not None and c.parent.span_id in episodes for c in calls)
    # the server's steps of each episode are in that episode's trace
    traces = {s.context.trace_id for s in episodes.values() if s.context}
    server_steps = named(spans, "openenv.step")
    assert server_steps and {s.context.trace_id for s in server_steps if s.context} <= traces

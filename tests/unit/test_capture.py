"""CaptureProxy and assemble: recorded token ids are the server's, samples never misalign."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from openenv_runtime.capture import CaptureProxy
from openenv_runtime.llm.samples import TraceEntry, assemble
from openenv_runtime.llm.tokens import MissingTokenIdsError
from openenv_runtime.testing.stub_llm import StubLLM, StubReply
from tests.support.capture import WAYS, Serve, serving


@pytest.fixture(params=WAYS)
def serve(request: pytest.FixtureRequest) -> Serve:
    return serving(request.param)


openai = pytest.importorskip("openai", reason="needs openenv-runtime[llm]")


def policy(messages: list[dict[str, Any]]) -> StubReply:
    turn = sum(m["role"] == "assistant" for m in messages)
    if turn % 2 == 0:
        return StubReply(f"step {turn}", [{"name": "look", "arguments": {"n": turn}}])
    return StubReply(f"answer ✓ {turn}")


@pytest.fixture
def servers(serve: Serve) -> Iterator[tuple[StubLLM, CaptureProxy, str]]:
    stub = StubLLM(policy)
    with stub.serve() as upstream:
        proxy = CaptureProxy(upstream + "/v1")
        with serve(proxy) as url:
            yield stub, proxy, url


def _conversation(session: dict[str, str], turns: int, stream: bool) -> list[dict[str, Any]]:
    client = openai.OpenAI(base_url=session["base_url"], api_key=session["api_key"])
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for turn in range(turns):
        if stream:
            parts = list(
                client.chat.completions.create(model="m", messages=messages, stream=True)  # type: ignore[call-overload]
            )
            content = "".join(p.choices[0].delta.content or "" for p in parts if p.choices)
            calls = [
                c.model_dump()
                for p in parts
                if p.choices
                for c in p.choices[0].delta.tool_calls or []
            ]
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if calls:
                message["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": c["function"]} for c in calls
                ]
        else:
            reply = client.chat.completions.create(model="m", messages=messages)  # type: ignore[call-overload]
            message = reply.choices[0].message.model_dump(exclude_none=True)
        messages.append(message)
        if message.get("tool_calls"):
            call_id = message["tool_calls"][0]["id"]
            messages.append({"role": "tool", "tool_call_id": call_id, "content": f"seen {turn}"})
        else:
            messages.append({"role": "user", "content": f"more {turn}"})
    return messages


@pytest.mark.parametrize("stream", [False, True])
def test_multi_turn_capture_assembles_exactly(
    servers: tuple[StubLLM, CaptureProxy, str], stream: bool
) -> None:
    stub, _, url = servers
    session = httpx.post(f"{url}/sessions").json()
    assert session["base_url"].startswith(url) and session["api_key"]
    messages = _conversation(session, 4, stream)
    own = {"Authorization": f"Bearer {session['api_key']}"}
    entries = httpx.get(f"{url}/sessions/{session['session_id']}/trace_entries", headers=own)
    entries = entries.json()
    assert len(entries) == 4
    assert all(e["stream"] is stream and e["error"] is None for e in entries)
    # Every recorded token is what the stand-in sampled (its requests were token-asking).
    assert all(r["return_token_ids"] and r["logprobs"] for r in stub.requests)
    (sample,) = assemble(entries)
    tok = stub.tokenizer
    whole = tok.apply_chat_template(messages[:-1], add_generation_prompt=False)
    assert sample.tokens == whole[: len(sample.tokens)]
    model_tokens = [t for t, m in zip(sample.completion_ids, sample.env_mask, strict=True) if m]
    assert model_tokens == [t for e in entries for t in e["completion_token_ids"]]
    assert [lp for lp, m in zip(sample.logprobs, sample.env_mask, strict=True) if m] == [
        lp for e in entries for lp in e["per_token_logps"]
    ]
    assert all(lp == 0.0 for lp, m in zip(sample.logprobs, sample.env_mask, strict=True) if not m)


def test_wrong_deleted_or_foreign_keys_are_refused(
    servers: tuple[StubLLM, CaptureProxy, str],
) -> None:
    stub, proxy, url = servers
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    a = httpx.post(f"{url}/sessions").json()
    b = httpx.post(f"{url}/sessions").json()
    wrong = httpx.post(
        f"{url}/v1/chat/completions", json=body, headers={"Authorization": "Bearer nope"}
    )
    assert wrong.status_code == 401
    assert httpx.post(f"{url}/v1/chat/completions", json=body).status_code == 401
    # b's key on a's URL
    foreign = httpx.post(
        f"{a['base_url']}/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {b['api_key']}"},
    )
    assert foreign.status_code == 401
    ok = httpx.post(
        f"{url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {a['api_key']}"}
    )
    assert ok.status_code == 200
    own = {"Authorization": f"Bearer {a['api_key']}"}
    assert httpx.delete(f"{url}/sessions/{a['session_id']}", headers=own).status_code == 204
    gone = httpx.post(
        f"{a['base_url']}/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {a['api_key']}"},
    )
    assert gone.status_code == 401
    # the deleted session's key opens nothing any more
    assert (
        httpx.get(f"{url}/sessions/{a['session_id']}/trace_entries", headers=own).status_code == 401
    )
    with pytest.raises(KeyError):
        proxy.trace_entries(a["session_id"])
    assert len(stub.requests) == 1  # refused calls never reach the model server


def test_a_sessions_urls_are_the_proxys_as_the_client_reached_it(serve: Serve) -> None:
    """The start of a session answers with the Host the client used, and the scheme a
    trusted front (uvicorn trusts 127.0.0.1) says it used; its end is a bare 204."""
    with StubLLM().serve() as upstream, serve(CaptureProxy(upstream)) as url:
        port = url.rsplit(":", 1)[1]
        made = httpx.post(f"{url}/sessions", headers={"Host": f"proxy.example:{port}"}).json()
        assert made["base_url"] == f"http://proxy.example:{port}/sessions/{made['session_id']}/v1"
        fronted = httpx.post(f"{url}/sessions", headers={"X-Forwarded-Proto": "https"}).json()
        assert fronted["base_url"].startswith(f"https://127.0.0.1:{port}/sessions/")
        own = {"Authorization": f"Bearer {made['api_key']}"}
        ended = httpx.delete(f"{url}/sessions/{made['session_id']}", headers=own)
        assert ended.status_code == 204
        assert ended.content == b""
        assert "content-length" not in ended.headers
        assert "content-type" not in ended.headers
        # the routes keep their methods: others are for the router to refuse
        assert httpx.put(f"{url}/sessions/{made['session_id']}", headers=own).status_code == 405


def test_admin_token_guards_the_session_routes(serve: Serve) -> None:
    stub = StubLLM()
    with (
        stub.serve() as upstream,
        serve(CaptureProxy(upstream, admin_token="adm")) as url,
    ):
        assert httpx.post(f"{url}/sessions").status_code == 401
        made = httpx.post(f"{url}/sessions", headers={"Authorization": "Bearer adm"})
        assert made.status_code == 201
        sid = made.json()["session_id"]
        trace = f"{url}/sessions/{sid}/trace_entries"
        assert httpx.get(trace).status_code == 401
        assert httpx.get(trace, headers={"Authorization": "Bearer adm"}).json() == []
        own = {"Authorization": f"Bearer {made.json()['api_key']}"}
        assert httpx.get(trace, headers=own).json() == []
        gone = f"{url}/sessions/0000/trace_entries"
        assert httpx.get(gone, headers={"Authorization": "Bearer adm"}).status_code == 404
        assert httpx.get(f"{url}/sessions").status_code == 401  # the list: admin only
        assert httpx.get(f"{url}/sessions", headers=own).status_code == 401
        [listed] = httpx.get(f"{url}/sessions", headers={"Authorization": "Bearer adm"}).json()
        assert listed == {
            "session_id": sid,
            "calls": 0,
            "created": listed["created"],
            "last_call": None,
        }


def test_upstream_errors_and_models_are_relayed(servers: tuple[StubLLM, CaptureProxy, str]) -> None:
    stub, proxy, url = servers
    s = httpx.post(f"{url}/sessions").json()
    auth = {"Authorization": f"Bearer {s['api_key']}"}
    assert (
        httpx.get(f"{s['base_url']}/models", headers=auth).json()["data"][0]["id"] == "stub-model"
    )
    stub.fail_next(1, 503)
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    assert (
        httpx.post(f"{s['base_url']}/chat/completions", json=body, headers=auth).status_code == 503
    )
    assert proxy.trace_entries(s["session_id"]) == []


def test_server_without_token_ids_is_recorded_and_assembly_refuses(serve: Serve) -> None:
    with StubLLM(token_ids=False).serve() as upstream:
        proxy = CaptureProxy(upstream)
        with serve(proxy) as url:
            s = httpx.post(f"{url}/sessions").json()
            body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
            answer = httpx.post(
                f"{s['base_url']}/chat/completions",
                json=body,
                headers={"Authorization": f"Bearer {s['api_key']}"},
            )
            assert answer.status_code == 200  # the harness keeps working
            (entry,) = proxy.trace_entries(s["session_id"])
    assert entry.prompt_token_ids is None and "return_token_ids" in (entry.error or "")
    with pytest.raises(MissingTokenIdsError, match="token ids"):
        assemble([entry])


def _entry(turn: int, prompt: list[int], ids: list[int]) -> TraceEntry:
    return TraceEntry(
        session_id="s",
        turn=turn,
        timestamp=0.0,
        prompt_token_ids=prompt,
        completion_token_ids=ids,
        per_token_logps=[-0.5] * len(ids),
    )


def test_assembly_starts_a_new_sample_on_drift_and_follows_branches() -> None:
    a = _entry(0, [1, 2], [3, 4])
    b = _entry(1, [1, 2, 3, 4, 9], [5])  # extends a: 9 was added (mask 0)
    drift = _entry(2, [1, 2, 3, 7, 9], [6])  # rewrote a token of a: a new sample
    c = _entry(3, [1, 2, 3, 4, 9, 5, 8], [10])  # extends the first again
    first, second = assemble([a, b, drift, c])
    assert first.prompt_ids == [1, 2]
    assert first.completion_ids == [3, 4, 9, 5, 8, 10]
    assert first.env_mask == [1, 1, 0, 1, 0, 1]
    assert first.logprobs == [-0.5, -0.5, 0.0, -0.5, 0.0, -0.5]
    assert first.turns == [0, 1, 3]
    assert second.prompt_ids == [1, 2, 3, 7, 9] and second.completion_ids == [6]
    assert json.loads(json.dumps(first.as_dict()))["env_mask"] == first.env_mask


def test_an_unreachable_model_server_is_a_502(serve: Serve) -> None:
    from openenv_runtime.testing import free_port

    proxy = CaptureProxy(f"http://127.0.0.1:{free_port()}")
    with serve(proxy) as url:
        s = httpx.post(f"{url}/sessions").json()
        answer = httpx.post(
            f"{s['base_url']}/chat/completions",
            json={"model": "m", "messages": []},
            headers={"Authorization": f"Bearer {s['api_key']}"},
        )
    assert answer.status_code == 502 and "did not answer" in answer.text
    assert proxy.trace_entries(s["session_id"]) == []


def test_a_body_over_the_limit_is_refused_before_it_is_forwarded(serve: Serve) -> None:
    stub = StubLLM()
    with stub.serve() as upstream:
        proxy = CaptureProxy(upstream, max_body_bytes=2_000)
        with serve(proxy) as url:
            s = httpx.post(f"{url}/sessions").json()
            auth = {"Authorization": f"Bearer {s['api_key']}"}
            big = {"model": "m", "messages": [{"role": "user", "content": "x" * 3_000}]}
            answer = httpx.post(f"{s['base_url']}/chat/completions", json=big, headers=auth)
            assert answer.status_code == 413 and "limit" in answer.text

            def chunks() -> Iterator[bytes]:  # no Content-Length: the proxy counts as it reads
                yield json.dumps(big).encode()[:1_500]
                yield json.dumps(big).encode()[1_500:]

            chunked = httpx.post(
                f"{s['base_url']}/chat/completions",
                content=chunks(),
                headers={**auth, "content-type": "application/json"},
            )
            assert chunked.status_code == 413
            small = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
            ok = httpx.post(f"{s['base_url']}/chat/completions", json=small, headers=auth)
            assert ok.status_code == 200
    assert len(stub.requests) == 1  # only the small one reached the model server
    assert len(proxy.trace_entries(s["session_id"])) == 1


def test_bad_bodies_and_methods_are_refused(servers: tuple[StubLLM, CaptureProxy, str]) -> None:
    stub, proxy, url = servers
    s = httpx.post(f"{url}/sessions").json()
    auth = {"Authorization": f"Bearer {s['api_key']}", "content-type": "application/json"}
    target = f"{s['base_url']}/chat/completions"
    assert httpx.post(target, content=b"not json", headers=auth).status_code == 400
    assert httpx.post(target, content=b"[1, 2]", headers=auth).status_code == 400
    assert httpx.put(target, content=b"{}", headers=auth).status_code == 405
    assert stub.requests == [] and proxy.trace_entries(s["session_id"]) == []


def test_each_call_is_recorded_by_the_time_its_answer_ends(
    servers: tuple[StubLLM, CaptureProxy, str],
) -> None:
    _, proxy, url = servers
    s = httpx.post(f"{url}/sessions").json()
    auth = {"Authorization": f"Bearer {s['api_key']}"}
    for turn, stream in enumerate([False, True, False, True]):
        body = {"model": "m", "messages": [{"role": "user", "content": f"t{turn}"}]}
        with httpx.stream(
            "POST",
            f"{s['base_url']}/chat/completions",
            json={**body, "stream": stream},
            headers=auth,
        ) as answer:
            answer.read()
        entries = proxy.trace_entries(s["session_id"])
        assert [e.turn for e in entries] == list(range(turn + 1))
        assert entries[-1].stream is stream and entries[-1].completion_token_ids
        assert entries[-1].request["return_token_ids"] is True


def test_the_calls_of_half_a_second_are_logged_as_one_record(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, serve: Serve
) -> None:
    """A log record per call cost more CPU than the rest of the call: the lines are gathered
    (here over a minute, so that the test never depends on timing) and flushed at shutdown."""
    monkeypatch.setattr("openenv_runtime.capture.proxy._LOG_EVERY", 60.0)
    caplog.set_level(logging.INFO, logger="openenv_runtime.capture")
    with StubLLM().serve() as upstream:
        proxy = CaptureProxy(upstream)
        with serve(proxy) as url:
            s = httpx.post(f"{url}/sessions").json()
            body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
            auth = {"Authorization": f"Bearer {s['api_key']}"}
            for _ in range(3):
                answer = httpx.post(f"{s['base_url']}/chat/completions", json=body, headers=auth)
                assert answer.status_code == 200
    records = [r for r in caplog.records if r.name == "openenv_runtime.capture"]
    lines = [line for r in records for line in r.getMessage().splitlines()]
    assert len(lines) == 3 and all(f"session {s['session_id']}: POST" in line for line in lines)
    assert "(3 calls recorded)" in lines[-1] and s["api_key"] not in caplog.text
    assert len(records) == 1


def test_the_model_server_can_be_named_after_construction(serve: Serve) -> None:
    with StubLLM().serve() as upstream:
        proxy = CaptureProxy("http://placeholder")
        proxy.upstream = upstream + "/v1/"
        assert proxy.upstream == upstream
        with serve(proxy) as url:
            s = httpx.post(f"{url}/sessions").json()
            answer = httpx.post(
                f"{s['base_url']}/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "x"}]},
                headers={"Authorization": f"Bearer {s['api_key']}"},
            )
    assert answer.status_code == 200 and len(proxy.trace_entries(s["session_id"])) == 1

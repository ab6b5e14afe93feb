"""The load generator's plain parts: targets, frames, reply checks, splitting and merging, process readings."""

from __future__ import annotations

import json
import os
import time

import pytest

from openenv_cli.bench import procstat
from openenv_cli.bench.http_sessions import http_step_body
from openenv_cli.bench.loadgen import merge, split
from openenv_cli.bench.outcomes import describe_failure, excerpt, reply_problem
from openenv_cli.bench.target import Target, step_frame


class TestTarget:
    def test_http_url(self) -> None:
        t = Target.parse("http://127.0.0.1:8000")
        assert (t.host, t.port, t.base_path) == ("127.0.0.1", 8000, "")
        assert t.ws_url == "ws://127.0.0.1:8000/ws"
        assert t.http_url == "http://127.0.0.1:8000"

    def test_ws_url_with_prefix_and_ws_suffix(self) -> None:
        t = Target.parse("ws://localhost:9000/env/ws/", transport="http", timeout=5)
        assert t.base_path == "/env"
        assert t.ws_url == "ws://localhost:9000/env/ws"
        assert (t.transport, t.timeout) == ("http", 5.0)

    @pytest.mark.parametrize("url", ["https://x:1", "ftp://x", "127.0.0.1:8000", "http://"])
    def test_rejects(self, url: str) -> None:
        with pytest.raises(ValueError):
            Target.parse(url)

    def test_client(self) -> None:
        assert Target.parse("http://h:1").client == "lean"
        assert Target.parse("http://h:1", client="websockets").client == "websockets"
        with pytest.raises(ValueError):
            Target.parse("http://h:1", client="aiohttp")

    def test_rejects_bad_transport_and_timeout(self) -> None:
        with pytest.raises(ValueError):
            Target.parse("http://h:1", transport="grpc")
        with pytest.raises(ValueError):
            Target.parse("http://h:1", timeout=0)


def test_frames_of_the_built_in_action_carry_the_wait() -> None:
    t = Target.parse("http://h:1")
    assert json.loads(step_frame(t, 1)) == {"type": "step", "data": {"wait": 1.0}}
    assert json.loads(http_step_body(t, 0.5, "abc")) == {
        "action": {"wait": 0.5},
        "session_id": "abc",
    }
    assert json.loads(http_step_body(t, 0.5, None)) == {"action": {"wait": 0.5}}


def test_frames_send_the_environments_own_action() -> None:
    action = {"message": 'héllo "x"', "n": [1, 2]}
    t = Target.parse("http://h:1", action=action, wait_field=False)
    assert json.loads(step_frame(t, 5.0)) == {"type": "step", "data": action}
    assert json.loads(http_step_body(t, 5.0, "s")) == {"action": action, "session_id": "s"}
    both = Target.parse("http://h:1", action={"wait": 2, "x": 1}, wait_field=True)
    assert json.loads(step_frame(both, 0.25))["data"] == {"wait": 0.25, "x": 1}


def test_excerpt_keeps_the_start_of_a_reply() -> None:
    assert excerpt(b"short") == "short"
    assert excerpt("x" * 1000, limit=10) == "x" * 10 + "…"


class TestReplyProblem:
    def test_observations(self) -> None:
        assert reply_problem('{"type":"observation","data":{}}') is None
        assert reply_problem('{"type": "observation", "data": {}}') is None
        assert reply_problem(b'{"data": {}, "type": "observation"}') is None

    def test_errors(self) -> None:
        assert (
            reply_problem('{"type":"error","data":{"code":"CAPACITY_REACHED"}}')
            == "error CAPACITY_REACHED"
        )
        assert reply_problem("not json") == "unparsable reply"
        assert reply_problem('{"type":"state","data":{}}') == "unexpected reply"


def test_describe_failure() -> None:
    assert describe_failure(TimeoutError()) == "timeout"
    assert describe_failure(ConnectionRefusedError(111, "refused")) == "ConnectionRefusedError"
    assert describe_failure(ValueError("x")) == "ValueError"


def test_split() -> None:
    assert split(10, 3) == [4, 3, 3]
    assert split(2, 4) == [1, 1]
    assert split(0, 2) == []


def test_merge_joins_workers() -> None:
    a = {
        "attempted": 2,
        "ok": 2,
        "errors": {"x": 1},
        "connect": [0.1],
        "total": [1.0],
        "steps": 5,
        "window": [1.0, 3.0],
        "cpu": 0.5,
        "samples": ["a"],
    }
    b = {
        "attempted": 3,
        "ok": 1,
        "errors": {"x": 2, "y": 1},
        "connect": [0.2],
        "total": [2.0],
        "steps": 7,
        "window": [0.5, 2.0],
        "cpu": 0.25,
        "samples": ["b"],
    }
    m = merge([a, b])
    assert (m["attempted"], m["ok"], m["steps"]) == (5, 3, 12)
    assert m["errors"] == {"x": 3, "y": 1}
    assert m["connect"] == [0.1, 0.2] and m["total"] == [1.0, 2.0]
    assert m["window"] == [0.5, 3.0]
    assert m["cpu"] == pytest.approx(0.75)
    assert m["samples"] == ["a", "b"]


@pytest.mark.skipif(not procstat.available(), reason="needs /proc")
class TestProcstat:
    def test_own_cpu_grows(self) -> None:
        before = procstat.tree_cpu_seconds([os.getpid()])
        end = time.process_time() + 0.05
        while time.process_time() < end:
            pass
        assert procstat.cpu_delta(before, procstat.tree_cpu_seconds([os.getpid()])) > 0

    def test_memory_threads_and_machine(self) -> None:
        assert procstat.tree_rss_bytes([os.getpid()]) > 1 << 20
        assert procstat.thread_count([os.getpid()]) >= 1
        now = procstat.MachineCpu.read()
        assert now.total >= now.busy > 0

    def test_listen_overflows_is_a_counter(self) -> None:
        value = procstat.listen_overflows()
        assert value is None or value >= 0

    def test_gone_process(self) -> None:
        assert procstat.cpu_seconds(2**22 + 12345) == 0.0
        assert procstat.tree_cpu_seconds([2**22 + 12345]) == {}

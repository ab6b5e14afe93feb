"""Resuming sessions after dropped connections, on real servers through a proxy that cuts
TCP connections. Every case ends with each environment instance closed exactly once and
``/health`` back to 0 sessions."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from openenv_runtime import EnvError
from openenv_runtime.testing import running_server
from tests.fixtures.counter import CounterAction, CounterClient, Lifecycle, make_app
from tests.support.servers import get_json, wait_until
from tests.support.tcp_proxy import cutting_proxy

pytestmark = pytest.mark.timeout(120)


def health(url: str) -> dict[str, object]:
    return get_json(url + "/health")[1]  # type: ignore[no-any-return]


def all_closed_once(life: Lifecycle, url: str) -> None:
    assert wait_until(lambda: health(url)["active_sessions"] == 0)
    assert wait_until(lambda: life.closed_total() == life.created)
    assert life.closed_more_than_once() == []


def test_drop_while_idle_resumes_the_same_instance() -> None:
    life = Lifecycle()
    with running_server(make_app(life)) as url, cutting_proxy(url) as proxy:
        env = CounterClient(proxy.url).sync()
        env.reset()
        env.step(CounterAction(delta=2))
        assert proxy.cut_all() == 1
        assert wait_until(lambda: health(url)["detached_sessions"] == 1)
        result = env.step(CounterAction(delta=3))
        assert result.observation.total == 5  # the same instance, nothing lost or repeated
        assert env.state().step_count == 2
        assert env.client._resumer is not None and env.client._resumer.resumes == 1
        assert life.created == 1 and health(url)["detached_sessions"] == 0
        env.close()
        all_closed_once(life, url)


def test_drop_during_a_step_gets_its_reply_once() -> None:
    life = Lifecycle()
    with running_server(make_app(life)) as url, cutting_proxy(url) as proxy:
        env = CounterClient(proxy.url).sync()
        env.reset()
        results: list[int] = []
        worker = threading.Thread(
            target=lambda: results.append(
                env.step(CounterAction(delta=7, wait=1.0)).observation.total
            )
        )
        worker.start()
        time.sleep(0.3)  # the step is running on the server
        assert proxy.cut_all() == 1
        worker.join(30)
        assert results == [7]
        state = env.state()
        assert (state.step_count, state.total) == (1, 7)
        env.close()
        all_closed_once(life, url)


def test_a_retried_request_is_answered_from_the_kept_reply() -> None:
    life = Lifecycle()
    with running_server(make_app(life)) as url:
        ws_url = url.replace("http", "ws") + "/ws"
        with connect(ws_url, additional_headers={"X-OpenEnv-Session": "k" * 22}) as ws:
            assert ws.response is not None and ws.response.headers["X-OpenEnv-Resume-Token"]
            ws.send('{"type":"reset","seq":1}')
            ws.recv(timeout=5)
            step = '{"type":"step","data":{"delta":4},"seq":2}'
            ws.send(step)
            first = ws.recv(timeout=5)
            ws.send(step)  # the same request again (a client that never saw the reply)
            assert ws.recv(timeout=5) == first
            ws.send('{"type":"state","seq":3}')
            state = json.loads(ws.recv(timeout=5))["data"]
            assert (state["step_count"], state["total"]) == (1, 4)
            ws.send('{"type":"step","data":{"delta":1},"seq":1}')  # older than the last reply
            assert json.loads(ws.recv(timeout=5))["data"]["code"] == "VALIDATION_ERROR"
            ws.send('{"type":"close"}')
        all_closed_once(life, url)


def test_a_wrong_token_is_refused_and_the_session_stays_resumable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)  # (the websockets library itself logs headers at DEBUG)
    life = Lifecycle()
    with running_server(make_app(life)) as url, cutting_proxy(url) as proxy:
        env = CounterClient(proxy.url).sync()
        env.reset()
        env.step(CounterAction(delta=1))
        resumer = env.client._resumer
        assert resumer is not None and resumer.session_id is not None
        ws_url = url.replace("http", "ws") + "/ws"
        real = resumer._token
        assert real is not None
        for token in ("x" * 43, real[:-1] + ("B" if real.endswith("A") else "A"), ""):
            with pytest.raises(InvalidStatus) as info:
                connect(
                    ws_url,
                    additional_headers={
                        "X-OpenEnv-Session": resumer.session_id,
                        "X-OpenEnv-Resume-Token": token,
                    },
                )
            response = info.value.response
            assert response is not None and response.status_code == 410  # as if unknown
            assert response.headers["X-OpenEnv-Error"] == "SESSION_GONE"
        proxy.cut_all()
        assert env.step(CounterAction(delta=1)).observation.total == 2
        env.close()
        all_closed_once(life, url)
    assert "resume refused" in caplog.text
    assert real not in caplog.text and real[:-1] not in caplog.text  # tokens are never logged


def test_after_the_grace_period_the_session_is_gone() -> None:
    life = Lifecycle()
    with running_server(make_app(life, resume_grace=0.5)) as url, cutting_proxy(url) as proxy:
        env = CounterClient(proxy.url).sync()
        env.reset()
        proxy.cut_all()
        all_closed_once(life, url)  # released when the grace period ended
        with pytest.raises(EnvError) as info:
            env.step(CounterAction(delta=1))
        assert info.value.code == "SESSION_GONE"
        env.connect()  # a new session works
        assert env.reset().observation.total == 0
        env.close()
        all_closed_once(life, url)


def test_a_restarted_server_says_gone_and_a_reset_starts_over() -> None:
    life, life2 = Lifecycle(), Lifecycle()
    with running_server(make_app(life)) as first, cutting_proxy(first) as proxy:
        env = CounterClient(proxy.url).sync()
        env.reset()
        env.step(CounterAction(delta=1))
        with running_server(make_app(life2)) as second:
            proxy.target_port = int(second.rsplit(":", 1)[1])  # "the server restarted"
            proxy.cut_all()
            with pytest.raises(EnvError) as info:
                env.step(CounterAction(delta=1))
            assert info.value.code == "SESSION_GONE"
            env.connect()
            assert env.reset().observation.total == 0  # a new session, on the new server
            env.close()
            all_closed_once(life2, second)
        assert health(first)["active_sessions"] == 1  # the old one waits out its grace period
    # stopping the first server closed its detached session
    assert life.closed_total() == life.created == 1 and life.closed_more_than_once() == []


def test_a_reset_after_the_session_is_gone_opens_a_new_one_by_itself() -> None:
    life = Lifecycle()
    with running_server(make_app(life, resume_grace=0.3)) as url, cutting_proxy(url) as proxy:
        env = CounterClient(proxy.url).sync()
        env.reset()
        proxy.cut_all()
        all_closed_once(life, url)
        assert env.reset().observation.total == 0
        assert env.step(CounterAction(delta=2)).observation.total == 2
        env.close()
        all_closed_once(life, url)


def test_resume_off_on_the_server_and_on_the_client() -> None:
    life = Lifecycle()
    with running_server(make_app(life, resume_grace=0)) as url, cutting_proxy(url) as proxy:
        env = CounterClient(proxy.url).sync()
        env.reset()
        proxy.cut_all()
        all_closed_once(life, url)  # no grace: the slot is freed at once
        with pytest.raises(EnvError) as info:
            env.step(CounterAction(delta=1))
        assert info.value.code == "CLOSED"
    life = Lifecycle()
    with running_server(make_app(life)) as url, cutting_proxy(url) as proxy:
        env = CounterClient(proxy.url, resume=False).sync()
        env.reset()
        proxy.cut_all()
        all_closed_once(life, url)  # a client that did not opt in is not kept
        with pytest.raises(EnvError):
            env.step(CounterAction(delta=1))

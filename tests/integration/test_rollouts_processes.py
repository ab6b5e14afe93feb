"""Rollouts over real HTTP against the stand-in model server and environment servers run as
separate processes; one environment server is killed in the middle of a group."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import httpx
import pytest

from openenv_runtime.rollouts import build_rollout_func
from openenv_runtime.testing import free_port
from tests.support.servers import REPO, healthy, spawn_server, stop_process, wait_until

pytestmark = pytest.mark.integration
pytest.importorskip("openai", reason="needs openenv-runtime[llm]")


def test_an_environment_dying_mid_group_marks_its_episodes_and_the_batch_completes() -> None:
    llm_port = free_port()
    llm = f"http://127.0.0.1:{llm_port}"
    stub = subprocess.Popen(
        [
            *(sys.executable, "-m", "openenv_runtime.testing.stub_llm", "--port", str(llm_port)),
            *("--policy", "tests.fixtures.guess:counting_policy", "--latency", "0.3"),
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    doomed = spawn_server("tests.fixtures.guess:app", free_port())
    survivor = spawn_server("tests.fixtures.guess:app", free_port())
    urls = [f"http://127.0.0.1:{p.args[p.args.index('--port') + 1]}" for p in (doomed, survivor)]
    try:
        assert wait_until(lambda: healthy(llm), timeout=30)
        # Target 3 (seed 3, 8, ...): every episode needs four model calls of 0.3 s.
        rollout = build_rollout_func(
            urls, llm=llm, model="m", group_size=2, concurrency=4, env_seed=3, max_turns=8
        )
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["out"] = rollout(["a", "b", "c", "d"], None)
            except BaseException as error:  # shown by the assertion below
                outcome["error"] = error

        worker = threading.Thread(target=run)
        worker.start()

        def busy() -> bool:
            return httpx.get(urls[0] + "/health").json().get("active_sessions", 0) > 0

        assert wait_until(busy, timeout=30)
        doomed.kill()  # mid-group: its sessions' episodes are under way
        worker.join(120)
        assert not worker.is_alive(), "the batch hung"
        assert "error" not in outcome, repr(outcome.get("error"))
        out = outcome["out"]
        assert {len(v) for v in out.values()} == {8}  # no episode dropped
        failed = [i for i, f in enumerate(out["rollout_failed"]) if f]
        assert failed, "no episode ran on the killed server"
        for i in failed:
            assert "environment:" in (rollout.last_episodes[i].error or "")
            assert out["env_reward"][i] == 0.0
        assert all(out["env_reward"][i] == 1.0 for i in range(8) if i not in failed)
        again = rollout(["e"], None)  # dead slots were moved to the surviving server
        assert again["rollout_failed"] == [False, False]
        rollout.close()
    finally:
        for process in (doomed, survivor):
            stop_process(process)
        stub.terminate()
        stub.wait(10)

"""RolloutService: complete groups in the background, policy versions per turn, the staleness
bound across version jumps (paused or not), partial rollouts, both faces, a clean exit."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from openenv_runtime.failures import RolloutError
from openenv_runtime.rollouts import RolloutService, RolloutSettings
from openenv_runtime.testing import running_server
from openenv_runtime.testing.stub_llm import StubLLM
from tests.fixtures.guess import counting_policy, make_app
from tests.support.optional import require
from tests.support.servers import REPO


def wrong_policy(messages: list[dict[str, Any]]) -> str:
    """Never finds the target: every episode plays its 8 steps."""
    return json.dumps({"guess": 7})


@pytest.fixture(scope="module")
def env_url() -> Iterator[str]:
    with running_server(make_app()) as url:
        yield url


def _wait_until(check: Callable[[], bool], what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.01)


def _fresh(batch: list[list[dict[str, Any]]], version: int, bound: int) -> bool:
    return all(
        not s["policy_versions"] or version - min(s["policy_versions"]) <= bound
        for group in batch
        for s in group
    )


def test_blocking_face_gives_complete_exact_groups(env_url: str) -> None:
    llm = StubLLM(counting_policy)
    with (
        llm.serve() as url,
        RolloutService(
            env_url,
            prompts=iter(["a", "b"]),  # an iterator is cycled too
            llm=url,
            model="m",
            group_size=3,
            max_turns=8,
            concurrency=4,
        ) as svc,
    ):
        batch = svc.get_batch(4, timeout=60)
        stats = svc.stats
    assert [len(g) for g in batch] == [3, 3, 3, 3]
    assert sorted(g[0]["prompt"] for g in batch) == ["a", "a", "b", "b"]
    for group in batch:
        # One seed per group: the guess environment's target is seed % 5, found on turn target + 1.
        assert len({len(s["policy_versions"]) for s in group}) == 1
        for s in group:
            assert s["env_reward"] == 1.0 and not s["rollout_failed"]
            assert s["policy_versions"] == [0] * len(s["policy_versions"])
            assert len(s["completion_ids"]) == len(s["env_mask"]) == len(s["logprobs"])
            assert s["prompt_ids"] and sum(s["env_mask"]) > 0
    assert stats["groups_delivered"] == 4 and stats["samples_delivered"] == 12


def test_async_face_and_verl_output(env_url: str) -> None:
    async def main(url: str) -> list[list[dict[str, Any]]]:
        async with RolloutService(
            env_url,
            prompts=["x"],
            llm=url,
            model="m",
            group_size=2,
            concurrency=2,
            output="verl",
        ) as svc:
            with pytest.raises(RuntimeError, match="aget_batch"):
                svc.get_batch(1)  # the blocking face, called on the service's own loop
            return await svc.aget_batch(2, timeout=60)

    with StubLLM(counting_policy).serve() as url:
        batch = asyncio.run(main(url))
    assert [len(g) for g in batch] == [2, 2]
    for s in (s for g in batch for s in g):
        assert len(s["response_ids"]) == len(s["response_mask"]) == len(s["response_logprobs"])
        assert s["extra_fields"]["policy_versions"][0] == 0


def test_version_jumps_without_pause_never_deliver_stale_samples(env_url: str) -> None:
    llm = StubLLM(wrong_policy, latency=0.01)
    with (
        llm.serve() as url,
        RolloutService(
            env_url,
            prompts=["p", "q"],
            llm=url,
            model="m",
            group_size=2,
            max_staleness=1,
            concurrency=4,
            buffer_groups=2,
        ) as svc,
    ):
        version = 0
        for jump in (1, 3, 1, 5, 2):
            batch = svc.get_batch(1, timeout=120)
            assert _fresh(batch, version, 1)
            # Finished groups and half-played episodes exist, then the version jumps.
            _wait_until(lambda: svc.stats["groups_ready"] >= 1, "a ready group")
            version += jump
            svc.set_policy_version(version)
            batch = svc.get_batch(2, timeout=120)
            assert _fresh(batch, version, 1), [s["policy_versions"] for g in batch for s in g]
            assert all(len(g) == 2 for g in batch)
        stats = svc.stats
    assert stats["episodes_regenerated"] > 0 and stats["turns_discarded"] > 0
    with pytest.raises(ValueError, match="only go up"):
        RolloutService(env_url, prompts=["p"], llm="http://127.0.0.1:9", model="m")._set_version(-1)


def test_pause_keeps_in_flight_episodes_and_their_versions(env_url: str) -> None:
    llm = StubLLM(wrong_policy, latency=0.02)
    with (
        llm.serve() as url,
        RolloutService(
            env_url,
            prompts=["p"],
            llm=url,
            model="m",
            group_size=2,
            max_turns=8,
            max_staleness=1,
            concurrency=4,
        ) as svc,
    ):
        _wait_until(lambda: svc.stats["turns_sampled"] >= 6, "a few turns")
        svc.pause()
        assert svc.stats["model_calls_in_flight"] == 0
        sent = len(llm.requests)
        svc.set_policy_version(1)
        assert len(llm.requests) == sent  # nothing reaches the model server while paused
        svc.resume()
        batch = svc.get_batch(2, timeout=120)
        stats = svc.stats
    versions = [s["policy_versions"] for g in batch for s in g]
    assert all(v == sorted(v) and len(v) == 8 for v in versions)
    assert any(v[0] == 0 and v[-1] == 1 for v in versions), versions  # partial rollouts
    assert stats["episodes_regenerated"] == 0  # a step within the bound keeps every episode


def test_a_jump_past_the_bound_during_a_pause_replays_what_it_makes_stale(env_url: str) -> None:
    llm = StubLLM(wrong_policy, latency=0.02)
    with (
        llm.serve() as url,
        RolloutService(
            env_url,
            prompts=["p"],
            llm=url,
            model="m",
            group_size=2,
            max_staleness=1,
            concurrency=4,
        ) as svc,
    ):
        _wait_until(lambda: svc.stats["turns_sampled"] >= 6, "a few turns")
        with svc.weight_sync(3):
            pass
        batch = svc.get_batch(2, timeout=120)
        stats = svc.stats
    assert _fresh(batch, 3, 1)
    assert stats["episodes_regenerated"] >= 1 and stats["policy_version"] == 3


def test_a_server_without_token_ids_stops_get_batch_with_the_fix(env_url: str) -> None:
    with (
        StubLLM(counting_policy, token_ids=False).serve() as url,
        RolloutService(env_url, prompts=["p"], llm=url, model="m", group_size=1) as svc,
        pytest.raises(RolloutError, match="no token ids"),
    ):
        svc.get_batch(1, timeout=60)


def test_get_batch_times_out_with_the_groups_kept(env_url: str) -> None:
    answering = threading.Event()

    async def held_policy(messages: list[dict[str, Any]]) -> str:
        while not answering.is_set():  # no episode can finish until released
            await asyncio.sleep(0.01)
        return counting_policy(messages)

    with (
        StubLLM(held_policy).serve() as url,
        RolloutService(env_url, prompts=["p"], llm=url, model="m", group_size=1) as svc,
    ):
        with pytest.raises(TimeoutError, match="stay queued"):
            svc.get_batch(1, timeout=0.2)
        answering.set()
        assert len(svc.get_batch(1, timeout=60)) == 1


SCRIPT = """
from openenv_runtime.rollouts import RolloutService, RolloutSettings
from openenv_runtime.testing import running_server
from openenv_runtime.testing.stub_llm import StubLLM
from tests.fixtures.guess import counting_policy, make_app

with running_server(make_app()) as env, StubLLM(counting_policy, latency=0.01).serve() as llm:
    with RolloutService(env, prompts=["a"], llm=llm, model="m", group_size=2) as svc:
        svc.get_batch(1, timeout=60)
    left_open = RolloutService(env, prompts=["a"], llm=llm, model="m", group_size=2)
    left_open.__enter__()  # never closed: the interpreter must still exit
    left_open.get_batch(1, timeout=60)
print("done")
"""


def test_the_interpreter_exits_with_or_without_close(tmp_path: Any) -> None:
    require("openai")  # the child process's model client
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,  # a hang at exit fails here
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "done"


def test_pause_with_abort_sends_the_cut_calls_again_at_the_new_version(env_url: str) -> None:
    answering = threading.Event()

    async def held_policy(messages: list[dict[str, Any]]) -> str:
        while not answering.is_set():  # every call stays in flight until released
            await asyncio.sleep(0.01)
        return counting_policy(messages)

    llm = StubLLM(held_policy)
    with (
        llm.serve() as url,
        RolloutService(
            env_url, prompts=["p"], llm=url, model="m", group_size=2, concurrency=2
        ) as svc,
    ):
        _wait_until(lambda: svc.stats["model_calls_in_flight"] == 2, "two calls in flight")
        svc.pause(abort=True)
        assert svc.stats["model_calls_in_flight"] == 0 and svc.stats["calls_aborted"] == 2
        answering.set()
        svc.set_policy_version(1)
        svc.resume()
        (group,) = svc.get_batch(1, timeout=60)
    for sample in group:  # the cut first turns were sampled again, at version 1
        assert sample["policy_versions"][0] == 1 and sample["env_reward"] == 1.0
        assert len(sample["completion_ids"]) == len(sample["env_mask"]) == len(sample["logprobs"])


class WeightServer:
    """A stand-in for the server ``trl vllm-serve`` runs (vLLM in dev mode): chat completions
    from ``StubLLM``, and the weight-update endpoints, recorded with the number of chat
    completions in flight when each arrived."""

    ROUTES = (
        "/pause",
        "/resume",
        "/start_weight_update",
        "/update_weights",
        "/finish_weight_update",
        "/reset_prefix_cache",
    )

    def __init__(self) -> None:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Mount, Route

        self.in_flight = 0
        self.calls: list[tuple[str, int, Any]] = []

        async def policy(messages: list[dict[str, Any]]) -> str:
            self.in_flight += 1
            try:
                await asyncio.sleep(0.02)
            finally:
                self.in_flight -= 1
            return wrong_policy(messages)

        async def record(request: Request) -> JSONResponse:
            body = await request.body()
            self.calls.append((request.url.path, self.in_flight, json.loads(body or b"null")))
            return JSONResponse({"success": True})

        async def world_size(request: Request) -> JSONResponse:
            return JSONResponse({"world_size": 1})

        self.stub = StubLLM(policy)
        routes: list[Any] = [Route(p, record, methods=["POST"]) for p in self.ROUTES]
        routes += [Route("/get_world_size", world_size), Mount("/", app=self.stub.app)]
        self.app = Starlette(routes=routes)


def test_weight_sync_through_trl_vllm_clients_while_paused(
    env_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch", reason="TRL needs torch")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    trl_generation = pytest.importorskip("trl.generation.vllm_client")
    from trl.experimental.async_grpo.vllm_client import VLLMClient as AsyncVLLMClient

    server = WeightServer()
    # TRL's client refuses to start without vLLM installed; its HTTP calls need none of it.
    monkeypatch.setattr(trl_generation, "is_vllm_available", lambda *a, **k: True)
    update_info = {"names": ["w"], "dtype_names": ["float32"], "shapes": [[2, 2]]}
    with (
        running_server(server.app) as url,
        RolloutService(
            env_url, prompts=["p"], llm=url, model="m", group_size=2, concurrency=4
        ) as svc,
    ):
        grpo_client = trl_generation.VLLMClient(base_url=url)  # GRPOTrainer's (trl vllm-serve)
        async_client = AsyncVLLMClient(url)  # AsyncGRPOTrainer's
        _wait_until(lambda: svc.stats["turns_sampled"] >= 6, "a few turns")
        with svc.weight_sync(1):  # our calls in flight end first: the server is idle
            with grpo_client.weight_update():  # update_named_param(s) calls go in here
                pass
            grpo_client.reset_prefix_cache()
        # Cut calls may still run on the server: vLLM's own pause holds them meanwhile.
        with svc.weight_sync(2, abort=True):
            async_client.pause()
            async_client.start_weight_update()
            async_client.update_weights(update_info)  # the NCCL broadcast runs beside it
            async_client.finish_weight_update()
            async_client.resume()
        batch = svc.get_batch(2, timeout=120)
    assert [(path, busy) for path, busy, _ in server.calls[:3]] == [
        ("/start_weight_update", 0),
        ("/finish_weight_update", 0),
        ("/reset_prefix_cache", 0),
    ]
    assert [path for path, _, _ in server.calls[3:]] == [
        "/pause",
        "/start_weight_update",
        "/update_weights",
        "/finish_weight_update",
        "/resume",
    ]
    assert server.calls[5][2] == {"update_info": update_info}
    assert _fresh(batch, 2, 1)
    assert any(2 in s["policy_versions"] for g in batch for s in g)


def test_the_service_as_trl_async_grpo_rollout_worker(
    env_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch", reason="TRL needs torch")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    pytest.importorskip("trl.experimental.async_grpo")
    from trl.experimental.async_grpo.async_grpo_trainer import RolloutWorkerProtocol
    from trl.experimental.async_grpo.async_rollout_worker import RolloutSample

    from openenv_runtime.rollouts.trl_async import AsyncGRPOWorker

    members = {n for n in dir(RolloutWorkerProtocol) if not n.startswith("_")}
    members |= set(RolloutWorkerProtocol.__annotations__)
    with StubLLM(counting_policy).serve() as url:
        service = RolloutService(env_url, prompts=["a", "b"], llm=url, model="m", group_size=2)
        worker = AsyncGRPOWorker(service)
        assert members <= set(dir(worker))
        worker.start()
        try:
            rows = [worker.rollout_buffer.get(timeout=60) for _ in range(4)]
            worker.check_health(60)
            worker.update_model_version(1)
            assert service.stats["policy_version"] == 1
        finally:
            worker.stop()
    assert all(isinstance(r, RolloutSample) for r in rows)
    for row in rows:
        assert len(row.input_ids) == len(row.completion_mask) == len(row.old_log_probs)
        assert row.model_version == 0 and row.completion[0]["role"] == "assistant"
    assert [r.group_id for r in rows] == [0, 0, 1, 1]


def test_settings_whole_or_as_keywords_reach_the_episodes(env_url: str) -> None:
    assert (
        RolloutService(env_url, prompts=["p"], llm="http://127.0.0.1:9", model="m").group_size == 8
    )
    with (
        StubLLM(wrong_policy).serve() as url,
        RolloutService(
            env_url,
            prompts=["p"],
            llm=url,
            model="m",
            settings=RolloutSettings(group_size=3, max_turns=4, concurrency=3),
            max_turns=1,  # a keyword replaces the field of settings
        ) as svc,
    ):
        (group,) = svc.get_batch(1, timeout=60)
    assert len(group) == 3 and svc.concurrency == 3
    assert [len(sample["policy_versions"]) for sample in group] == [1, 1, 1]

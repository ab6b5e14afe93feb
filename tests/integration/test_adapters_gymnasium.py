"""Gymnasium environments served by a real server, compared step by step with the library.

The server is ``python -m openenv_runtime.serve gymnasium:ID`` (what ``openenv serve`` runs);
the client side is :mod:`openenv_runtime.gym`, which must give back the library's own spaces,
types and trajectories on the same seeds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from openenv_runtime import gym
from openenv_runtime.client.vector import VectorSession, supports_vectors
from openenv_runtime.errors import AdapterError
from openenv_runtime.testing import free_port
from tests.support.servers import active_sessions, spawn_server, stop_process, wait_until

IDS = ("CartPole-v1", "FrozenLake-v1", "Pendulum-v1")


@pytest.fixture(scope="module")
def urls() -> Iterator[dict[str, str]]:
    started = {}
    try:
        for env_id in IDS:
            port = free_port()
            started[env_id] = (spawn_server(f"gymnasium:{env_id}", port), port)
        yield {env_id: f"http://127.0.0.1:{port}" for env_id, (_, port) in started.items()}
    finally:
        for process, _ in started.values():
            stop_process(process)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and np.array_equal(a, b)
        )
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("env_id", IDS)
def test_trajectories_equal_the_librarys_on_the_same_seeds(
    urls: dict[str, str], env_id: str
) -> None:
    remote, native = gym.make(urls[env_id]), gymnasium.make(env_id)
    try:
        assert remote.observation_space == native.observation_space
        assert remote.action_space == native.action_space
        actions = native.action_space
        actions.seed(0)
        steps = 0
        episode = 0
        while steps < 300:
            # a seeded reset mid-run of the same session; every third episode unseeded
            given = None if episode % 3 == 2 else episode
            episode += 1
            got, want = remote.reset(seed=given), native.reset(seed=given)
            assert same(got[0], want[0]) and got[1] == want[1]
            for _ in range(120):
                action = actions.sample()  # numpy ints / float32 arrays, as the library gives
                got_step, want_step = remote.step(action), native.step(action)
                steps += 1
                assert same(got_step[0], want_step[0]), (env_id, steps)
                assert got_step[1] == float(want_step[1])
                assert got_step[2] is bool(want_step[2]) and got_step[3] is bool(want_step[3])
                if want_step[2] or want_step[3]:
                    break
    finally:
        remote.close()
        native.close()


def test_reset_mid_episode_reseeds_exactly(urls: dict[str, str]) -> None:
    remote = gym.make(urls["CartPole-v1"])
    try:
        first, _ = remote.reset(seed=11)
        for _ in range(5):
            remote.step(1)  # a Python int
        remote.step(np.int64(0))  # a numpy int
        again, _ = remote.reset(seed=11)
        assert np.array_equal(first, again)
    finally:
        remote.close()


def test_reset_options_reach_the_environment(urls: dict[str, str]) -> None:
    remote, native = gym.make(urls["CartPole-v1"]), gymnasium.make("CartPole-v1")
    try:
        options = {"low": -0.01, "high": 0.01}  # CartPole's own reset options
        got, want = remote.reset(seed=2, options=options), native.reset(seed=2, options=options)
        assert same(got[0], want[0])
        assert float(np.max(np.abs(got[0]))) <= 0.01
    finally:
        remote.close()
        native.close()


def test_discrete_observations_are_ints(urls: dict[str, str]) -> None:
    remote = gym.make(urls["FrozenLake-v1"])
    try:
        obs, _ = remote.reset(seed=0)
        assert type(obs) is int
        obs, reward, terminated, truncated, _ = remote.step(2)
        assert type(obs) is int and type(reward) is float
        assert type(terminated) is bool and type(truncated) is bool
    finally:
        remote.close()


@pytest.mark.parametrize("batched", [True, False], ids=["vector-session", "session-per-env"])
@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_make_vec_follows_gymnasiums_vector_conventions(
    urls: dict[str, str], mode: AutoresetMode, batched: bool
) -> None:
    n, seeds = 4, [7, 8, 9, 10]
    remote = gym.make_vec(urls["CartPole-v1"], num_envs=n, autoreset_mode=mode, batched=batched)
    native = SyncVectorEnv(
        [lambda: gymnasium.make("CartPole-v1") for _ in range(n)], autoreset_mode=mode
    )
    try:
        assert remote.single_observation_space == native.single_observation_space
        assert remote.observation_space == native.observation_space
        assert remote.action_space == native.action_space
        got, want = remote.reset(seed=seeds), native.reset(seed=seeds)
        assert same(got[0], want[0])  # env i seeded with seeds[i]
        first, kept = got[0], got[0].copy()
        rng = np.random.default_rng(1)
        ended = 0
        for _ in range(150):
            actions = rng.integers(0, 2, size=n)
            got_step, want_step = remote.step(actions), native.step(actions)
            for a, b in zip(got_step[:4], want_step[:4], strict=True):
                assert same(np.asarray(a), np.asarray(b))
            done = want_step[2] | want_step[3]
            ended += int(np.sum(done))
            if mode == AutoresetMode.DISABLED and done.any():
                with pytest.raises(RuntimeError, match="reset them first"):
                    remote.step(actions)
                got, want = (
                    env.reset(options={"reset_mask": done.copy()}) for env in (remote, native)
                )
                assert same(got[0], want[0])
            if mode == AutoresetMode.SAME_STEP and "final_obs" in want_step[4]:
                mask = want_step[4]["_final_obs"]
                assert np.array_equal(got_step[4]["_final_obs"], mask)
                for i in np.flatnonzero(mask):
                    assert same(got_step[4]["final_obs"][i], want_step[4]["final_obs"][i])
        assert ended > 0  # the autoreset path was taken
        assert np.array_equal(first, kept)  # a batch handed out is not rewritten later
    finally:
        remote.close()
        native.close()


@pytest.fixture(scope="module")
def more_cartpoles() -> Iterator[dict[str, str]]:
    """Another CartPole server with vector sessions, and one without (as a reference server)."""
    started = {}
    try:
        for name, env in (("second", {}), ("no-vectors", {"OPENENV_MAX_VECTOR_ENVS": "0"})):
            port = free_port()
            started[name] = (spawn_server("gymnasium:CartPole-v1", port, env=env), port)
        yield {name: f"http://127.0.0.1:{port}" for name, (_, port) in started.items()}
    finally:
        for process, _ in started.values():
            stop_process(process)


def run_beside_native(
    remote: Any, n: int, mode: AutoresetMode, steps: int = 120, env_id: str = "CartPole-v1"
) -> int:
    """Drive ``remote`` and a SyncVectorEnv alike from seeds 100.., asserting equal steps;
    returns the episodes that ended."""
    native = SyncVectorEnv([lambda: gymnasium.make(env_id) for _ in range(n)], autoreset_mode=mode)
    try:
        seeds = list(range(100, 100 + n))
        got, want = remote.reset(seed=seeds), native.reset(seed=seeds)
        assert same(got[0], want[0])
        native.action_space.seed(5)
        ended = 0
        for _ in range(steps):
            actions = native.action_space.sample()  # numpy ints, float32 arrays
            got_step, want_step = remote.step(actions), native.step(actions)
            for a, b in zip(got_step[:4], want_step[:4], strict=True):
                assert same(np.asarray(a), np.asarray(b))
            ended += int(np.sum(want_step[2] | want_step[3]))
        return ended
    finally:
        native.close()


@pytest.mark.parametrize("batched", [True, False], ids=["vector-session", "session-per-env"])
@pytest.mark.parametrize("env_id", ["FrozenLake-v1", "Pendulum-v1"])
def test_make_vec_is_exact_for_discrete_observations_and_box_actions(
    urls: dict[str, str], env_id: str, batched: bool
) -> None:
    remote = gym.make_vec(urls[env_id], num_envs=3, batched=batched)
    try:
        assert remote.single_observation_space == gymnasium.make(env_id).observation_space
        run_beside_native(remote, 3, AutoresetMode.NEXT_STEP, steps=230, env_id=env_id)
    finally:
        remote.close()


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_make_vec_over_several_servers_splits_the_envs_and_stays_exact(
    urls: dict[str, str], more_cartpoles: dict[str, str], mode: AutoresetMode
) -> None:
    servers = [urls["CartPole-v1"], more_cartpoles["second"]]
    remote = gym.make_vec(servers, num_envs=5, autoreset_mode=mode, batched=True)
    try:
        assert remote.batched and remote.shares == [3, 2]
        assert run_beside_native(remote, 5, mode) > 0
    finally:
        remote.close()


def test_make_vec_falls_back_to_a_session_per_env_without_vector_sessions(
    more_cartpoles: dict[str, str],
) -> None:
    url = more_cartpoles["no-vectors"]
    with pytest.raises(AdapterError, match="vector sessions"):
        gym.make_vec(url, num_envs=3, batched=True)
    remote = gym.make_vec(url, num_envs=3)  # batched unset: the per-env path, as before
    try:
        assert not remote.batched
        assert run_beside_native(remote, 3, AutoresetMode.NEXT_STEP) > 0
    finally:
        remote.close()


def test_a_mix_of_servers_falls_back_everywhere(
    urls: dict[str, str], more_cartpoles: dict[str, str]
) -> None:
    remote = gym.make_vec([urls["CartPole-v1"], more_cartpoles["no-vectors"]], num_envs=4)
    try:
        assert not remote.batched
        assert run_beside_native(remote, 4, AutoresetMode.NEXT_STEP, steps=40) >= 0
    finally:
        remote.close()
    assert wait_until(lambda: active_sessions(urls["CartPole-v1"]) == 0, timeout=30)


def test_a_vector_session_gives_its_slots_back_when_closed(urls: dict[str, str]) -> None:
    url = urls["CartPole-v1"]
    remote = gym.make_vec(url, num_envs=6)
    assert remote.batched  # the default against a server of this runtime
    assert active_sessions(url) == 6  # one per environment
    remote.close()
    assert wait_until(lambda: active_sessions(url) == 0, timeout=30)


def test_a_server_that_ignores_the_vector_header_is_told_apart_by_its_answer(
    more_cartpoles: dict[str, str],
) -> None:
    url = more_cartpoles["no-vectors"]  # ignores X-OpenEnv-Vector, as a reference server does
    assert supports_vectors(url) == 0
    assert VectorSession.open(url, 3) is None  # a plain session opened, not echoed: closed
    assert wait_until(lambda: active_sessions(url) == 0, timeout=30)

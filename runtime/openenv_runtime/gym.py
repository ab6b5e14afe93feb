"""Remote environments as Gymnasium environments, for code written against Gymnasium.

::

    from openenv_runtime import gym

    env = gym.make("http://127.0.0.1:8000")             # a gymnasium.Env
    obs, info = env.reset(seed=42)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())

    envs = gym.make_vec("http://127.0.0.1:8000", num_envs=64)   # a gymnasium VectorEnv
    obs, infos = envs.reset(seed=list(range(64)))

The server is one that serves a ``gymnasium:ID`` target (``openenv serve gymnasium:CartPole-v1``):
its schema describes the spaces, which are rebuilt here equal to the native ones (Box dtype
and bounds included), and values come back in the library's types (numpy arrays for Box,
ints for Discrete, bools for ``terminated`` / ``truncated``). Needs the ``gymnasium`` extra.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from .adapters.gymnasium import SPACE_KEY, from_wire, space_from_json, to_wire
from .blocking import run_blocking
from .client.generic import GenericEnvClient
from .client.pool import EnvPool
from .client.sync import SyncEnvClient
from .client.vector import VectorSession, supports_vectors
from .errors import AdapterError, EnvError
from .http_reads import read_schema
from .models import StepResult


def spaces_of(url: str, *, token: str | None = None, timeout: float = 30.0) -> tuple[Any, Any]:
    """``(observation_space, action_space)`` of the Gymnasium environment served at ``url``."""
    schema = read_schema(url, token=token, timeout=timeout)
    try:
        obs = schema["observation"]["properties"]["observation"][SPACE_KEY]
        act = schema["action"]["properties"]["action"][SPACE_KEY]
    except (KeyError, TypeError):
        raise AdapterError(
            f"{url} does not serve a Gymnasium environment (its /schema describes no "
            "x-gymnasium-space): serve one with `openenv serve gymnasium:ID`."
        ) from None
    return space_from_json(obs), space_from_json(act)


class RemoteEnv(gymnasium.Env[Any, Any]):
    """A ``gymnasium.Env`` whose episodes run on a server (one session). Build it with :func:`make`."""

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"]}  # noqa: RUF012 (gymnasium's API)

    def __init__(self, url: str, *, token: str | None = None, **client_kwargs: Any) -> None:
        self.url = url
        self.observation_space, self.action_space = spaces_of(url, token=token)
        self._client: SyncEnvClient[Any, Any, Any] = GenericEnvClient(
            url, token=token, **client_kwargs
        ).sync()
        self._client.connect()
        self._frame: Any = None

    def _unpack(self, result: StepResult[Any]) -> tuple[Any, dict[str, Any]]:
        body = result.observation
        frame = body.get("frame")
        self._frame = None if frame is None else np.asarray(frame, dtype=np.uint8)
        return from_wire(self.observation_space, body["observation"]), dict(body.get("info") or {})

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """The server's ``env.reset(seed=seed, options=options)``."""
        super().reset(seed=seed)
        extra: dict[str, Any] = {"options": options} if options is not None else {}
        return self._unpack(self._client.reset(seed=seed, **extra))

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """The server's ``env.step(action)``; numpy or Python values alike."""
        result = self._client.step({"action": to_wire(self.action_space, action)})
        obs, info = self._unpack(result)
        body = result.observation
        reward = float(result.reward) if result.reward is not None else 0.0
        return obs, reward, bool(body["terminated"]), bool(body["truncated"]), info

    def render(self) -> Any:
        """The last frame (an ``uint8`` array) when the server renders ``rgb_array``, else None."""
        return self._frame

    def close(self) -> None:
        """End the session."""
        self._client.close()


def make(url: str, *, token: str | None = None, **client_kwargs: Any) -> RemoteEnv:
    """A ``gymnasium.Env`` for the Gymnasium environment served at ``url``.

    ``token`` and ``client_kwargs`` go to the runtime's client (``GenericEnvClient``).
    """
    return RemoteEnv(url, token=token, **client_kwargs)


_MODES: dict[Any, AutoresetMode] = {
    **{mode: mode for mode in AutoresetMode},
    **{mode.value: mode for mode in AutoresetMode},  # "NextStep", ...
    "next_step": AutoresetMode.NEXT_STEP,  # the runtime pool's names
    "same_step": AutoresetMode.SAME_STEP,
    "disabled": AutoresetMode.DISABLED,
}


class RemoteVectorEnv(VectorEnv[Any, Any, Any]):
    """A Gymnasium vector environment over ``num_envs`` sessions of a pool. See :func:`make_vec`."""

    def __init__(
        self,
        urls: Sequence[str],
        num_envs: int,
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        token: str | None = None,
        batched: bool | None = None,
        **client_kwargs: Any,
    ) -> None:
        if autoreset_mode not in _MODES:
            raise ValueError(
                f"autoreset_mode must be an AutoresetMode or one of {', '.join(map(str, _MODES))}"
            )
        self.autoreset_mode = _MODES[autoreset_mode]
        self.num_envs = num_envs
        self.single_observation_space, self.single_action_space = spaces_of(urls[0], token=token)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.metadata = {"autoreset_mode": self.autoreset_mode}
        self._pool: EnvPool[Any] | None = None
        # (session, index of its first environment): one message a batch per server
        self._vectors: list[tuple[VectorSession, int]] = []
        if batched is not False and client_kwargs.keys() <= _BATCH_OPTIONS:
            self._vectors = _open_vectors(urls, num_envs, token, client_kwargs)
        if batched and not self._vectors:
            raise AdapterError(
                f"batched=True, but not every server of {list(urls)} offers vector sessions of "
                f"the size asked ({num_envs} environments over {len(urls)}; its /health says "
                "max_vector_envs), or options only the per-environment path has were given. "
                "Leave batched unset to fall back to one session per environment."
            )
        if not self._vectors:
            pool = EnvPool(
                GenericEnvClient,
                urls=list(urls),
                size=num_envs,
                autoreset="disabled",
                token=token,
                **client_kwargs,
            )
            self._pool = pool
            run_blocking(pool.open())
        self._obs: Any = create_empty_array(self.single_observation_space, n=num_envs, fn=np.zeros)
        self._autoreset = np.zeros(num_envs, dtype=np.bool_)

    @property
    def batched(self) -> bool:
        """True when each vector reset and step is one message per server (vector sessions)."""
        return bool(self._vectors)

    @property
    def shares(self) -> list[int]:
        """How many environments each server holds, in the order of the URLs given."""
        if self._vectors:
            return [session.n for session, _ in self._vectors]
        return []

    def _batch(self, env_obs: list[Any]) -> Any:
        """The observations as one batch, in new arrays: a batch handed out is never rewritten."""
        space = self.single_observation_space
        out: Any = create_empty_array(space, n=self.num_envs)
        return concatenate(space, env_obs, out)

    async def _exchange(
        self,
        resets: list[int],
        seeds: Sequence[int | None],
        steps: list[int],
        actions: Sequence[Any],
        same_step: bool = False,
    ) -> tuple[dict[int, StepResult[Any]], dict[int, StepResult[Any]]]:
        """Reset ``resets`` (with ``seeds``) and step ``steps`` (with ``actions``), all at once.

        Returns the results, and with ``same_step`` the first observations of the episodes
        that just ended, reset at once. A whole vector step is one coroutine: one hop to the
        client's loop and back.
        """
        pool = self._pool
        assert pool is not None
        if resets:
            await pool.send_reset(resets, seeds)
        if steps:
            await pool.send(steps, actions)
        results = await self._collect(len(resets) + len(steps))
        fresh: dict[int, StepResult[Any]] = {}
        if same_step:
            ended = [i for i in steps if _ended(results[i])]
            if ended:
                await pool.send_reset(ended, [None] * len(ended))
                fresh = await self._collect(len(ended))
        return results, fresh

    def _exchange_batched(
        self,
        resets: list[int],
        seeds: Sequence[int | None],
        steps: list[int],
        actions: Sequence[Any],
        same_step: bool,
    ) -> tuple[dict[int, StepResult[Any]], dict[int, StepResult[Any]]]:
        """:meth:`_exchange` over vector sessions: one message per server, every one sent
        before any reply is read (the servers work at once)."""
        seed_of = dict(zip(resets, seeds, strict=True))
        action_of = dict(zip(steps, actions, strict=True))
        for session, start in self._vectors:
            span = range(start, start + session.n)
            if steps:
                session.send_step(
                    [action_of.get(i) for i in span],
                    reset=[i - start for i in span if i in seed_of],
                    reset_ended=same_step,
                )
            else:
                session.send_reset([_reset_options(i, seed_of) for i in span])
        results: dict[int, StepResult[Any]] = {}
        fresh: dict[int, StepResult[Any]] = {}
        for session, start in self._vectors:
            entries, new = session.receive()
            for k, entry in enumerate(entries):
                if entry is not None:
                    results[start + k] = _result(entry)
            for k, entry in enumerate(new or ()):
                if entry is not None:
                    fresh[start + k] = _result(entry)
        return results, fresh

    def _run(
        self,
        resets: list[int],
        seeds: Sequence[int | None],
        steps: list[int],
        actions: Sequence[Any],
        same_step: bool = False,
    ) -> tuple[dict[int, StepResult[Any]], dict[int, StepResult[Any]]]:
        """:meth:`_exchange` or :meth:`_exchange_batched`, whichever this env uses, done."""
        if self._pool is None:
            return self._exchange_batched(resets, seeds, steps, actions, same_step)
        return run_blocking(self._exchange(resets, seeds, steps, actions, same_step))

    async def _collect(self, wanted: int) -> dict[int, StepResult[Any]]:
        assert self._pool is not None
        results: dict[int, StepResult[Any]] = {}
        while len(results) < wanted:
            for slot, result in await self._pool.recv(wanted - len(results)):
                if isinstance(result, EnvError):
                    raise result
                results[slot] = result
        return results

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the sessions: ``seed[i]`` for env i (an int ``s`` gives ``s + i``), as Gymnasium does."""
        n = self.num_envs
        seeds: list[int | None]
        if seed is None:
            seeds = [None] * n
        elif isinstance(seed, int):
            seeds = [seed + i for i in range(n)]
        else:
            seeds = list(seed)
        if len(seeds) != n:
            raise ValueError(f"{len(seeds)} seeds for {n} environments")
        options = dict(options or {})
        mask = np.asarray(options.pop("reset_mask", np.ones(n, dtype=np.bool_)), dtype=np.bool_)
        indices = [i for i in range(n) if mask[i]]
        results, _ = self._run(indices, [seeds[i] for i in indices], [], [])
        infos: dict[str, Any] = {}
        env_obs = list(iterate(self.observation_space, self._obs))
        for i in indices:
            body = results[i].observation
            env_obs[i] = from_wire(self.single_observation_space, body["observation"])
            infos = self._add_info(infos, dict(body.get("info") or {}), i)
            self._autoreset[i] = False
        self._obs = self._batch(env_obs)
        return self._obs, infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """One action per environment, all sent at once; Gymnasium's autoreset conventions."""
        n = self.num_envs
        wire = [to_wire(self.single_action_space, a) for a in iterate(self.action_space, actions)]
        resetting = [i for i in range(n) if self._autoreset[i]]
        if resetting and self.autoreset_mode == AutoresetMode.DISABLED:
            raise RuntimeError(
                f"environments {resetting} ended: reset them first "
                "(reset(options={'reset_mask': mask}))"
            )
        stepping = [i for i in range(n) if not self._autoreset[i]]
        same_step = self.autoreset_mode == AutoresetMode.SAME_STEP
        results, fresh = self._run(
            resetting,
            [None] * len(resetting),
            stepping,
            [{"action": wire[i]} for i in stepping],
            same_step,
        )
        rewards = np.zeros(n, dtype=np.float64)
        terminated = np.zeros(n, dtype=np.bool_)
        truncated = np.zeros(n, dtype=np.bool_)
        env_obs: list[Any] = [None] * n
        env_infos: list[dict[str, Any]] = [{}] * n
        for i, result in results.items():
            body = result.observation
            env_obs[i] = from_wire(self.single_observation_space, body["observation"])
            env_infos[i] = dict(body.get("info") or {})
            if i in stepping:
                rewards[i] = float(result.reward or 0.0)
                terminated[i] = bool(body["terminated"])
                truncated[i] = bool(body["truncated"])
        infos: dict[str, Any] = {}
        ended = [i for i in stepping if terminated[i] or truncated[i]]
        if same_step:
            for i in ended:
                final = {"final_obs": env_obs[i], "final_info": env_infos[i]}
                infos = self._add_info(infos, final, i)
                body = fresh[i].observation
                env_obs[i] = from_wire(self.single_observation_space, body["observation"])
                env_infos[i] = dict(body.get("info") or {})
        for i in range(n):
            infos = self._add_info(infos, env_infos[i], i)
        self._obs = self._batch(env_obs)
        if self.autoreset_mode != AutoresetMode.SAME_STEP:  # same-step ones were reset above
            self._autoreset = np.logical_or(terminated, truncated)
        return self._obs, rewards, terminated, truncated, infos

    def close_extras(self, **kwargs: Any) -> None:
        """End every session."""
        if self._pool is not None:
            run_blocking(self._pool.close())
        vectors, self._vectors = self._vectors, []
        for session, _ in vectors:
            session.close()


_BATCH_OPTIONS = frozenset({"headers", "connect_timeout", "message_timeout", "max_message_bytes"})
"""The client options a vector session honours; with any other, make_vec uses one session per env."""


def _reset_options(i: int, seed_of: dict[int, int | None]) -> dict[str, Any] | None:
    if i not in seed_of:
        return None
    seed = seed_of[i]
    return {} if seed is None else {"seed": seed}


def _result(entry: dict[str, Any]) -> StepResult[Any]:
    return StepResult(
        observation=entry.get("observation") or {},
        reward=entry.get("reward"),
        done=bool(entry.get("done", False)),
        metadata=entry.get("metadata"),
    )


def _shares(num_envs: int, servers: int) -> list[int]:
    """``num_envs`` split over ``servers`` as evenly as can be, the first ones taking the rest."""
    base, rest = divmod(num_envs, servers)
    return [base + (1 if k < rest else 0) for k in range(servers)]


def _open_vectors(
    urls: Sequence[str], num_envs: int, token: str | None, options: dict[str, Any]
) -> list[tuple[VectorSession, int]]:
    """A vector session on each server for its share of the environments, or ``[]`` when a
    server does not offer them (then nothing stays open)."""
    shares = [(url, k) for url, k in zip(urls, _shares(num_envs, len(urls)), strict=True) if k]
    timeout = float(options.get("connect_timeout", 30.0))
    if any(supports_vectors(url, token=token, timeout=timeout) < k for url, k in shares):
        return []
    sessions: list[VectorSession] = []
    try:
        for url, k in shares:
            session = VectorSession.open(url, k, token=token, **options)
            if session is None:  # a plain session instead: one session per env everywhere
                break
            sessions.append(session)
    except BaseException:
        for session in sessions:
            session.close()
        raise
    if len(sessions) < len(shares):
        for session in sessions:
            session.close()
        return []
    starts = [sum(k for _, k in shares[:j]) for j in range(len(shares))]
    return list(zip(sessions, starts, strict=True))


def _ended(result: StepResult[Any]) -> bool:
    body = result.observation
    return bool(body["terminated"]) or bool(body["truncated"])


def make_vec(
    url: str | Sequence[str],
    num_envs: int,
    *,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    token: str | None = None,
    batched: bool | None = None,
    **client_kwargs: Any,
) -> RemoteVectorEnv:
    """A Gymnasium vector environment of ``num_envs`` environments over one server or several.

    ``autoreset_mode`` is Gymnasium's (``NEXT_STEP``, ``SAME_STEP``, ``DISABLED``, or their
    lower-case names); ``reset(seed=[...])`` seeds env i with ``seeds[i]``.

    The environments are split evenly over the servers. A server of this runtime holds its
    share in one *vector session*: each vector reset or step is one message and one reply per
    server, sent to all servers at once. A server without vector sessions (a reference one,
    or one with ``OPENENV_MAX_VECTOR_ENVS=0``) gets one session per environment (the runtime's
    ``EnvPool``), as do client options other than ``headers``, ``connect_timeout``,
    ``message_timeout`` and ``max_message_bytes``. ``batched=False`` always uses sessions per
    environment; ``batched=True`` raises instead of falling back.
    """
    urls = [url] if isinstance(url, str) else list(url)
    if not urls:
        raise ValueError("make_vec needs at least one server URL")
    return RemoteVectorEnv(
        urls,
        num_envs,
        autoreset_mode=autoreset_mode,
        token=token,
        batched=batched,
        **client_kwargs,
    )

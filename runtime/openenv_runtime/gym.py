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

    async def _collect(self, wanted: int) -> dict[int, StepResult[Any]]:
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
        results, _ = run_blocking(self._exchange(indices, [seeds[i] for i in indices], [], []))
        infos: dict[str, Any] = {}
        env_obs = list(iterate(self.single_observation_space, self._obs))
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
        results, fresh = run_blocking(
            self._exchange(
                resetting,
                [None] * len(resetting),
                stepping,
                [{"action": wire[i]} for i in stepping],
                same_step,
            )
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
        run_blocking(self._pool.close())


def _ended(result: StepResult[Any]) -> bool:
    body = result.observation
    return bool(body["terminated"]) or bool(body["truncated"])


def make_vec(
    url: str | Sequence[str],
    num_envs: int,
    *,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    token: str | None = None,
    **client_kwargs: Any,
) -> RemoteVectorEnv:
    """A Gymnasium vector environment of ``num_envs`` sessions over one server or several.

    ``autoreset_mode`` is Gymnasium's (``NEXT_STEP``, ``SAME_STEP``, ``DISABLED``, or their
    lower-case names); ``reset(seed=[...])`` seeds env i with ``seeds[i]``.
    """
    urls = [url] if isinstance(url, str) else list(url)
    if not urls:
        raise ValueError("make_vec needs at least one server URL")
    return RemoteVectorEnv(
        urls, num_envs, autoreset_mode=autoreset_mode, token=token, **client_kwargs
    )

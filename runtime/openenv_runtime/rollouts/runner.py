"""``build_rollout_func``: episodes for every prompt × group member, concurrently on a pool."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..blocking import run_blocking
from ..errors import EnvError
from ..failures import (
    FailureLog,
    ModelFailure,
    RolloutError,
    describe,
    env_kind,
    too_many,
)
from ..http_reads import read_schema
from ..llm.client import OpenAIClient
from .episode import Episode, ModelPolicy, Player, ToAction, ToMessage, finish
from .mapping import default_to_action, default_to_message
from .settings import RolloutSettings
from .transport import TokenClient

_NO_SLOT = -1


class RolloutFunc:
    """A rollout function with TRL's contract: ``rollout_func(prompts, trainer)`` → a dict.

    Built by ``build_rollout_func``; see there. Called from plain code, it runs on the shared
    background loop (``blocking.run_blocking``; its sessions live there between calls);
    ``close()`` ends the sessions it opened. ``last_episodes``
    holds the previous call's ``Episode`` records (conversations, recorded calls, errors).
    """

    def __init__(
        self,
        env: Any,
        *,
        llm: str | OpenAIClient,
        model: str,
        settings: RolloutSettings | None = None,
        to_action: ToAction | None = None,
        to_message: ToMessage | None = None,
        api_key: str | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        settings = settings or RolloutSettings()
        self.env = env
        self.settings = settings
        self.env_kwargs = dict(env_kwargs or {})
        self._next_seed = settings.env_seed
        self._to_action = to_action
        if isinstance(llm, OpenAIClient):
            client = llm
            client.return_tokens = True
        else:  # the same requests as OpenAIClient's, over aiohttp (see transport)
            client = TokenClient(llm, model, api_key=api_key, timeout=settings.llm_timeout)
        self.model = ModelPolicy(
            llm=client,
            to_action=to_action or (lambda reply: None),
            sampling=settings.sampling_options,
            seed=settings.seed,
        )
        self.player = Player(
            policy=self.model,
            to_message=to_message or default_to_message,
            max_turns=settings.max_turns,
            system_prompt=settings.system_prompt,
            env_timeout=settings.env_timeout,
        )
        self.last_episodes: list[Episode] = []
        self._pool: Any = None
        self._own_pool = False

    def __call__(self, prompts: Sequence[Any], trainer: Any = None) -> dict[str, list[Any]]:
        """Run the episodes of ``prompts`` (TRL passes each prompt once per generation)."""
        episodes = run_blocking(self.arun(prompts))
        return to_trl(episodes)

    def close(self) -> None:
        """Close the sessions this function opened (and its model client's connections)."""
        if self._pool is not None and self._own_pool:
            run_blocking(self._pool.close())
        if isinstance(self.model.llm, TokenClient):
            run_blocking(self.model.llm.aclose())
        self._pool = None

    # -- the batch ------------------------------------------------------------------------
    async def open(self) -> Any:
        """The pool of sessions (opened on first use, on the running loop)."""
        if self._pool is not None:
            return self._pool
        from .. import EnvPool, GenericEnvClient

        if isinstance(self.env, EnvPool):
            pool = self.env
        else:
            urls = [self.env] if isinstance(self.env, str) else list(self.env)
            pool = EnvPool(
                GenericEnvClient, urls=urls, size=self.settings.concurrency, **self.env_kwargs
            )
            self._own_pool = True
        token = self.env_kwargs.get("token")
        early = self._to_action is None and bool(pool.urls)  # before the sessions are busy
        if early:
            self.model.to_action = default_to_action(await _action_schema(pool.urls, token))
        await pool.open()
        if self._to_action is None and not early:  # a provider's servers: known once started
            self.model.to_action = default_to_action(await _action_schema(pool.urls, token))
        self._pool = pool
        return pool

    async def arun(self, prompts: Sequence[Any]) -> list[Episode]:
        """The episodes of ``prompts`` × ``group_size``, in order (the async form of a call)."""
        pool = await self.open()
        if pool.failed:
            await pool.replace_failed()
        episodes = self._plan(prompts)
        slots = free_slots(pool)
        await asyncio.gather(*(self.run_episode(pool, episode, slots) for episode in episodes))
        self.last_episodes = episodes
        self._check(episodes)
        return episodes

    def _check(self, episodes: Sequence[Episode]) -> None:
        """Stop on a failure every episode would meet, or on too many failed episodes."""
        log = FailureLog()
        for episode in episodes:
            if episode.failed:
                log.add(episode.error_kind, episode.error or "")
        if log.stops_run or too_many(log.failed, len(episodes), self.settings.max_error_rate):
            raise RolloutError(
                log.report(len(episodes)) + "\n(the episodes are in rollout_func.last_episodes)"
            )

    def _plan(self, prompts: Sequence[Any]) -> list[Episode]:
        """Prompt × member episodes; a run of equal prompts (TRL repeats each prompt once per
        generation) is one group: its members reset with one seed, other groups another."""
        episodes: list[Episode] = []
        group, previous = -1, object()
        seed = self._next_seed
        for prompt in prompts:
            key = json.dumps(prompt, sort_keys=True, default=str)
            if key != previous:
                group, previous, seed = group + 1, key, self._next_seed
                self._next_seed += 1
            for member in range(self.settings.group_size):
                episodes.append(Episode(len(episodes), group, member, seed, prompt))
        return episodes

    async def run_episode(self, pool: Any, episode: Episode, slots: asyncio.Queue[int]) -> None:
        """Play ``episode`` on a session taken from ``slots`` (``free_slots(pool)``) and put
        back; a failure marks the episode, a failed session is replaced."""
        slot = await slots.get()
        if slot == _NO_SLOT:
            slots.put_nowait(_NO_SLOT)
            episode.error = "environment: no session left in the pool (every slot failed)"
            return
        alive = True
        try:
            await self.player.play(episode, pool[slot])
        except ModelFailure as failure:
            episode.error, episode.error_kind = f"model: {failure}", failure.kind
        except (EnvError, asyncio.TimeoutError, OSError) as error:
            episode.error, episode.error_kind = f"environment: {describe(error)}", env_kind(error)
            alive = await _replace(pool, slot)
        except Exception as error:  # a mapping (to_action, to_message) failed
            episode.error, episode.error_kind = f"episode: {describe(error)}", "episode"
        finally:
            if alive:
                slots.put_nowait(slot)
            elif _all_gone(pool):
                slots.put_nowait(_NO_SLOT)  # wakes the episodes still waiting, to fail them
        finish(episode)


def free_slots(pool: Any) -> asyncio.Queue[int]:
    """The indices of ``pool``'s live sessions, as the queue ``run_episode`` takes them from."""
    slots: asyncio.Queue[int] = asyncio.Queue()
    for index in range(len(pool)):
        if index not in pool.failed:
            slots.put_nowait(index)
    if slots.empty():
        slots.put_nowait(_NO_SLOT)
    return slots


async def _replace(pool: Any, slot: int) -> bool:
    try:
        await pool.replace(slot)
    except Exception:
        return False
    return True


def _all_gone(pool: Any) -> bool:
    return len(pool.failed) >= len(pool)


async def _action_schema(urls: Sequence[str], token: str | None) -> dict[str, Any]:
    """The action's JSON schema from the first server that answers ``GET /schema``."""
    problems = []
    for url in urls:
        try:
            answer = await asyncio.to_thread(read_schema, url, token=token)
        except EnvError as error:
            problems.append(error.message)
            continue
        schema = answer.get("action") or {}
        return schema if isinstance(schema, dict) else {}
    raise EnvError("CONNECTION_ERROR", "no server answered GET /schema: " + "; ".join(problems))


def to_trl(episodes: Sequence[Episode]) -> dict[str, list[Any]]:
    """Episodes as TRL's rollout output: one entry per episode, in order."""
    samples = [e.sample for e in episodes]
    return {
        "prompt_ids": [s.prompt_ids for s in samples],
        "completion_ids": [s.completion_ids for s in samples],
        "logprobs": [s.logprobs for s in samples],
        "env_mask": [s.env_mask for s in samples],
        "env_reward": [e.reward for e in episodes],
        "rollout_failed": [e.failed for e in episodes],
        "invalid_actions": [e.invalid_actions for e in episodes],
    }

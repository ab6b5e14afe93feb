"""``RolloutService``: episodes played in the background while the trainer trains.

A synchronous rollout waits for its slowest episode and generates nothing while the trainer
updates. The service keeps ``concurrency`` episodes going all the time (the same episodes as
``build_rollout_func``: same player, pool and failure handling) and files finished groups in a
queue; the trainer takes them with ``get_batch`` / ``aget_batch``.

Policy versions: every sampled model turn records the version current when its call was sent
(the integers given to ``set_policy_version``). A group is never handed out while one of its
samples' oldest turn is more than ``max_staleness`` versions behind the current version: an
episode that falls behind stops at its next model call (or when found in a finished group)
and is played again from its group's seed, and the counters in ``stats`` say how many.

``pause()`` waits for the model calls in flight and starts no new ones until ``resume()``;
episodes are kept (turns already sampled keep their version), so weights can be pushed to the
model server in between (partial rollouts).
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from ..blocking import background_loop
from ..failures import FailureLog, RolloutError, stops_run
from ..llm.client import LLMResponse, OpenAIClient
from ..observability import tracing
from .adapters import to_verl
from .episode import Episode
from .runner import RolloutFunc, free_slots
from .settings import RolloutOptions, RolloutSettings

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11+; the runtime also supports 3.10
from .transport import TokenClient

T = TypeVar("T")

# The versions of the model turns of the episode the current task plays.
_TURNS: contextvars.ContextVar[list[int]] = contextvars.ContextVar("openenv_rollout_turns")


class StaleEpisode(BaseException):
    """An episode fell more than ``max_staleness`` versions behind; it is played again.

    A ``BaseException`` (like a cancellation) so that the episode runner's failure handling,
    which marks failed episodes and keeps them, lets it through.
    """


@dataclass
class _Group:
    id: int
    prompt: Any
    seed: int
    members: list[tuple[Episode, list[int]] | None]
    running: int = 0

    @property
    def complete(self) -> bool:
        return self.running == 0 and all(m is not None for m in self.members)


@dataclass
class _Counters:
    groups_delivered: int = 0
    samples_delivered: int = 0
    turns_sampled: int = 0
    episodes_regenerated: int = 0
    turns_discarded: int = 0
    calls_aborted: int = 0


class _VersionedLLM:
    """The player's model client: each call is the service's (held while paused, tagged with
    the policy version; see ``RolloutService._complete_turn``)."""

    def __init__(self, complete: Callable[..., Awaitable[LLMResponse]]) -> None:
        self.complete_with_tools = complete


SERVICE_SETTINGS = RolloutSettings(group_size=8)
"""``RolloutService``'s settings when none are given: ``RolloutSettings``' defaults, in groups
of 8 (GRPO learns from the differences within a group)."""


class RolloutService:
    """Episodes of ``prompts`` (cycled) in groups, played in the background; see the module.

    Use it as ``with RolloutService(...) as svc:`` (its loop is the runtime's background loop;
    ``get_batch``, ``pause``, ``resume`` and ``set_policy_version`` from plain code) or
    ``async with`` (the caller's loop; ``await svc.aget_batch(...)``, ``await svc.apause()``).

    Args:
        env: a server URL, a list of URLs or an ``EnvPool`` (not closed by the service).
        prompts: a list or iterable of prompts (text or messages), cycled (an iterator's
            prompts are kept to go round again).
        llm: the model server's base URL (it must report token ids), or an ``OpenAIClient``.
        model: the model name sent with each request.
        settings: how episodes are played (``RolloutSettings``: group size, turns,
            concurrency, seeds, timeouts, sampling), as for ``build_rollout_func``; the
            service's own default is :data:`SERVICE_SETTINGS` (groups of 8).
        max_staleness: how many versions behind the current one a sample's oldest turn may be.
        buffer_groups: finished groups kept ready at most; past it no new group starts.
        output: ``"trl"`` samples (``prompt_ids``, ``completion_ids``, ``logprobs``,
            ``env_mask``, ``env_reward``, ...) or ``"verl"`` (``AgentLoopOutput``'s fields);
            both with ``policy_versions``.
        policy_version: the version the model server starts with.
        **options: ``RolloutSettings``' fields as keywords (``group_size=8, max_turns=4``),
            replacing those of ``settings``.

    ``to_action``, ``to_message``, ``api_key`` and ``env_kwargs`` are ``build_rollout_func``'s.
    """

    def __init__(
        self,
        env: Any,
        *,
        prompts: Iterable[Any],
        llm: str | OpenAIClient,
        model: str,
        settings: RolloutSettings | None = None,
        max_staleness: int = 1,
        buffer_groups: int = 64,
        output: Literal["trl", "verl"] = "trl",
        policy_version: int = 0,
        to_action: Any = None,
        to_message: Any = None,
        api_key: str | None = None,
        env_kwargs: dict[str, Any] | None = None,
        **options: Unpack[RolloutOptions],
    ) -> None:
        if max_staleness < 0 or buffer_groups < 1:
            raise ValueError("max_staleness must be at least 0 and buffer_groups at least 1")
        chosen = replace(settings or SERVICE_SETTINGS, **options)
        self._runner = RolloutFunc(
            env,
            llm=llm,
            model=model,
            settings=chosen,
            to_action=to_action,
            to_message=to_message,
            api_key=api_key,
            env_kwargs=env_kwargs,
        )
        self._model = self._runner.model.llm
        # The policy only calls complete_with_tools, which the wrapper provides.
        self._runner.model.llm = cast(OpenAIClient, _VersionedLLM(self._complete_turn))
        self._traced = tracing.enabled()  # each model call's span names its policy version
        from .. import EnvPool

        self._own_pool = not isinstance(env, EnvPool)  # a URL or URLs: sessions of our own
        if isinstance(prompts, (list, tuple)) and not prompts:
            raise ValueError("prompts is empty")
        self._prompts: Iterator[Any] = _cycle(prompts)
        self.group_size = chosen.group_size
        self.concurrency = chosen.concurrency
        self.max_staleness = max_staleness
        self.buffer_groups = buffer_groups
        self.output = output
        self.policy_version = policy_version
        self._next_seed = chosen.env_seed
        self._episode_index = itertools.count()
        self._group_ids = itertools.count()
        self._counters = _Counters()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pool: Any = None
        self._slots: asyncio.Queue[int] | None = None
        self._pending: dict[int, _Group] = {}
        self._ready: deque[_Group] = deque()
        self._tasks: set[asyncio.Task[None]] = set()
        self._active = 0
        self._calls: set[asyncio.Future[LLMResponse]] = set()
        self._aborted: set[asyncio.Future[LLMResponse]] = set()
        self._error: BaseException | None = None
        self._closed = False
        self._resumed = asyncio.Event()  # bound to the loop that first waits on it
        self._resumed.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._wake = asyncio.Event()
        self._changed = asyncio.Condition()

    # -- the two faces ----------------------------------------------------------------------
    def __enter__(self) -> RolloutService:
        loop = background_loop()
        asyncio.run_coroutine_threadsafe(self._start(loop), loop).result()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> RolloutService:
        await self._start(asyncio.get_running_loop())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def get_batch(self, n_groups: int, timeout: float | None = None) -> list[list[dict[str, Any]]]:
        """``n_groups`` finished groups, each a list of ``group_size`` samples (plain code).

        Raises ``TimeoutError`` when they are not ready within ``timeout`` seconds (the groups
        stay queued), or the error that stopped the service (e.g. a ``RolloutError`` naming a model that reports no token ids).
        """
        return self._blocking(self.aget_batch(n_groups, timeout), "aget_batch")

    async def aget_batch(
        self, n_groups: int, timeout: float | None = None
    ) -> list[list[dict[str, Any]]]:
        """The async form of ``get_batch``, on the service's loop."""
        if n_groups < 1:
            raise ValueError("n_groups must be at least 1")
        self._check_loop()
        try:
            await asyncio.wait_for(self._wait_ready(n_groups), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(
                f"{len(self._ready)} of {n_groups} groups ready after {timeout}s; call again "
                "(they stay queued), or give more time or more concurrency"
            ) from None
        groups = [self._ready.popleft() for _ in range(n_groups)]
        self._wake.set()
        batch = []
        for group in groups:
            samples = [self._sample(*member) for member in group.members if member is not None]
            self._counters.groups_delivered += 1
            self._counters.samples_delivered += len(samples)
            batch.append(samples)
        return batch

    def set_policy_version(self, version: int) -> None:
        """The model server now samples with ``version`` (after a weight update); never lower.

        Finished and in-flight episodes whose oldest turn falls more than ``max_staleness``
        behind are played again.
        """
        self._apply(self._set_version, version)

    def pause(self, abort: bool = False) -> None:
        """Start no model call until ``resume()`` (plain code). The calls in flight are waited
        for, or with ``abort=True`` cancelled and sent again after ``resume()`` (at the new
        version; the turns before them keep theirs)."""
        self._blocking(self.apause(abort), "apause")

    async def apause(self, abort: bool = False) -> None:
        """The async form of ``pause``."""
        self._check_loop()
        self._resumed.clear()
        if abort:
            for call in list(self._calls):
                self._aborted.add(call)
                call.cancel()
        await self._idle.wait()

    def resume(self) -> None:
        """Model calls start again (from any thread or from the service's loop)."""
        self._apply(self._resumed.set)

    @contextmanager
    def weight_sync(self, version: int, *, abort: bool = False) -> Iterator[None]:
        """``pause(abort)``; your weight push; then ``set_policy_version(version)`` and
        ``resume()`` (resumed with the old version if the push raises)."""
        self.pause(abort)
        try:
            yield
            self.set_policy_version(version)
        finally:
            self.resume()

    @asynccontextmanager
    async def aweight_sync(self, version: int, *, abort: bool = False) -> AsyncIterator[None]:
        """The async form of ``weight_sync``."""
        await self.apause(abort)
        try:
            yield
            self.set_policy_version(version)
        finally:
            self.resume()

    @property
    def started(self) -> bool:
        """Whether the service was started (``with``, ``async with``)."""
        return self._loop is not None

    @property
    def stats(self) -> dict[str, int]:
        """Counters: groups and samples delivered, turns sampled, episodes played again because
        they went stale and the turns that threw away, model calls aborted by ``pause`` (and sent
        again), groups ready, model calls in flight."""
        c = self._counters
        return {
            "policy_version": self.policy_version,
            "groups_delivered": c.groups_delivered,
            "samples_delivered": c.samples_delivered,
            "turns_sampled": c.turns_sampled,
            "episodes_regenerated": c.episodes_regenerated,
            "turns_discarded": c.turns_discarded,
            "groups_ready": len(self._ready),
            "calls_aborted": c.calls_aborted,
            "model_calls_in_flight": len(self._calls),
        }

    def close(self) -> None:
        """Stop the episodes, close the sessions the service opened and its model client."""
        if self._loop is None or self._closed:
            return
        if self._loop.is_closed():
            return
        self._blocking(self.aclose(), "aclose")

    async def aclose(self) -> None:
        """The async form of ``close``."""
        if self._closed or self._loop is None:
            return
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._pool is not None and self._own_pool:
            await self._pool.close()
        if isinstance(self._model, TokenClient):
            await self._model.aclose()

    # -- the producer (on the loop) ---------------------------------------------------------
    async def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._loop is not None:
            raise RuntimeError("a RolloutService starts once; make a new one")
        self._loop = loop
        self._pool = await self._runner.open()
        if self._pool.failed:
            await self._pool.replace_failed()
        self._slots = free_slots(self._pool)
        self._spawn(self._produce())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _produce(self) -> None:
        try:
            while True:
                while self._active < self.concurrency and len(self._ready) < self.buffer_groups:
                    self._new_group()
                self._wake.clear()
                await self._wake.wait()
        except Exception as error:  # e.g. an empty prompt iterable: stops the service
            self._error = error
            await self._notify()

    def _new_group(self) -> None:
        group = _Group(
            next(self._group_ids), next(self._prompts), self._next_seed, [None] * self.group_size
        )
        self._next_seed += 1
        self._pending[group.id] = group
        for member in range(self.group_size):
            self._play(group, member)

    def _play(self, group: _Group, member: int) -> None:
        group.members[member] = None
        group.running += 1
        self._active += 1
        self._spawn(self._member(group, member))

    async def _member(self, group: _Group, member: int) -> None:
        assert self._slots is not None
        try:
            while True:
                episode = Episode(
                    next(self._episode_index), group.id, member, group.seed, group.prompt
                )
                versions: list[int] = []
                _TURNS.set(versions)  # this task's own context
                try:
                    await self._runner.run_episode(self._pool, episode, self._slots)
                except StaleEpisode:
                    self._count_stale(versions)
                    continue
                if self._stale(versions):
                    self._count_stale(versions)
                    continue
                if episode.failed and stops_run(episode.error_kind):
                    # every episode would meet it (a 404 model, no token ids): stop, say why
                    log = FailureLog()
                    log.add(episode.error_kind, episode.error or "")
                    raise RolloutError(log.report(1))
                group.members[member] = (episode, versions)
                break
        except asyncio.CancelledError:
            raise
        except Exception as error:  # e.g. RolloutError (no token ids): stops the service
            self._error = error
        finally:
            group.running -= 1
            self._active -= 1
            self._wake.set()
        if group.complete and group.id in self._pending:
            del self._pending[group.id]
            self._ready.append(group)
        await self._notify()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _wait_ready(self, n_groups: int) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: len(self._ready) >= n_groups or bool(self._error))
        if self._error is not None:
            raise self._error

    # -- model calls (the player's, through _VersionedLLM) -----------------------------------
    async def _complete_turn(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **kwargs: Any
    ) -> LLMResponse:
        """One model turn: waits while paused, records the version it was sent at, and is sent
        again (at the version then current) when ``pause(abort=True)`` cancels it."""
        versions = _TURNS.get()
        while True:
            while not self._resumed.is_set():
                await self._resumed.wait()
            self._raise_if_stale(versions)
            version = self.policy_version
            if self._traced:
                tracing.annotate({"openenv.policy_version": version})
            call = asyncio.ensure_future(self._model.complete_with_tools(messages, tools, **kwargs))
            self._calls.add(call)
            self._idle.clear()
            try:
                reply = await call
            except asyncio.CancelledError:
                if call not in self._aborted:
                    raise  # the episode itself is cancelled
                self._aborted.discard(call)
                self._counters.calls_aborted += 1
                continue  # aborted by pause(abort=True): sent again once resumed
            finally:
                self._calls.discard(call)
                if not self._calls:
                    self._idle.set()
            break
        versions.append(version)
        if self._traced and (episode := tracing.EPISODE.get()) is not None:
            episode.set_attribute("openenv.policy_versions", versions)
        self._counters.turns_sampled += 1
        self._raise_if_stale(versions)  # the version moved on past the bound during the call
        return reply

    # -- versions ---------------------------------------------------------------------------
    def _stale(self, versions: list[int]) -> bool:
        return bool(versions) and self.policy_version - min(versions) > self.max_staleness

    def _raise_if_stale(self, versions: list[int]) -> None:
        if self._stale(versions):
            raise StaleEpisode

    def _count_stale(self, versions: list[int]) -> None:
        self._counters.episodes_regenerated += 1
        self._counters.turns_discarded += len(versions)

    def _set_version(self, version: int) -> None:
        if version < self.policy_version:
            raise ValueError(f"policy versions only go up: {version} after {self.policy_version}")
        self.policy_version = version
        # Finished episodes that are now too old, in ready or incomplete groups, play again.
        ready, self._ready = self._ready, deque()
        for group in ready:
            if self._replay_stale(group):
                self._pending[group.id] = group
            else:
                self._ready.append(group)
        for group in list(self._pending.values()):
            self._replay_stale(group)
        self._wake.set()

    def _replay_stale(self, group: _Group) -> bool:
        replayed = False
        for member, played in enumerate(group.members):
            if played is not None and self._stale(played[1]):
                self._count_stale(played[1])
                self._play(group, member)
                replayed = True
        return replayed

    def _sample(self, episode: Episode, versions: list[int]) -> dict[str, Any]:
        if self.output == "verl":
            out = to_verl(episode)
            out["extra_fields"]["policy_versions"] = list(versions)
            return out
        s = episode.sample
        return {
            "prompt": episode.prompt,
            "messages": episode.messages,
            "prompt_ids": s.prompt_ids,
            "completion_ids": s.completion_ids,
            "logprobs": s.logprobs,
            "env_mask": s.env_mask,
            "env_reward": episode.reward,
            "rollout_failed": episode.failed,
            "invalid_actions": episode.invalid_actions,
            "policy_versions": list(versions),
        }

    # -- threads ----------------------------------------------------------------------------
    def _check_loop(self) -> None:
        if self._loop is None:
            raise RuntimeError("start the service first: `with RolloutService(...) as svc:`")

    def _on_own_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def _blocking(self, coro: Coroutine[Any, Any, T], async_name: str) -> T:
        if self._loop is None or self._on_own_loop():
            coro.close()
            self._check_loop()
            raise RuntimeError(
                f"in async code on the service's loop, use `await svc.{async_name}(...)`"
            )
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _apply(self, fn: Callable[..., Any], *args: Any) -> None:
        self._check_loop()
        if self._on_own_loop():
            fn(*args)
            return

        async def call() -> None:
            fn(*args)

        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(call(), self._loop).result()


def _cycle(prompts: Iterable[Any]) -> Iterator[Any]:
    """``prompts`` again and again (a one-shot iterator is remembered on its first pass)."""
    seen: list[Any] = []
    for prompt in prompts:
        seen.append(prompt)
        yield prompt
    if not seen:
        raise ValueError("prompts is empty")
    while True:
        yield from seen

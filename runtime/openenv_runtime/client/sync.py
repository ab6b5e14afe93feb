"""Blocking access to an ``EnvClient`` or an ``EnvPool``: their coroutines run on one background loop.

The twins name what they wrap by Protocols (:class:`AsyncEnv`, :class:`AsyncPool`), so this
module imports neither ``env_client`` nor ``pool``: both import it for their ``sync()``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import typing
from collections.abc import Coroutine, Iterable, Sequence
from typing import Any, Generic, Protocol, TypeVar, overload

from ..blocking import async_call, background_loop
from ..models import Action, Observation, State, StepResult
from .checkpoint import Checkpoint
from .port import Result, SessionPort

ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)
T = TypeVar("T")
ClientT = TypeVar("ClientT", bound=SessionPort)
ActT_contra = TypeVar("ActT_contra", bound=Action, contravariant=True)
StateT_co = TypeVar("StateT_co", bound=State, covariant=True)
ClientT_co = TypeVar("ClientT_co", bound=SessionPort, covariant=True)


class AsyncEnv(Protocol[ActT_contra, ObsT, StateT_co]):
    """What :class:`SyncEnvClient` wraps: an ``EnvClient`` (its other coroutines work too)."""

    async def connect(self) -> Any: ...

    async def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> StepResult[ObsT]: ...

    async def step(self, action: ActT_contra | dict[str, Any]) -> StepResult[ObsT]: ...

    async def state(self) -> StateT_co: ...

    async def close(self) -> None: ...

    async def checkpoint(self) -> Checkpoint: ...

    async def restore(self, checkpoint: Checkpoint | str) -> Checkpoint: ...

    @overload
    async def fork(
        self,
        checkpoint: Checkpoint | None = None,
        *,
        n: None = None,
        base_urls: Sequence[str] | None = None,
    ) -> AsyncEnv[ActT_contra, ObsT, StateT_co]: ...

    @overload
    async def fork(
        self,
        checkpoint: Checkpoint | None = None,
        *,
        n: int,
        base_urls: Sequence[str] | None = None,
    ) -> Sequence[AsyncEnv[ActT_contra, ObsT, StateT_co]]: ...


class AsyncPool(Protocol[ClientT_co]):
    """What :class:`SyncEnvPool` wraps: an ``EnvPool``."""

    async def open(self) -> Any: ...

    async def reset(
        self, seeds: Sequence[int | None] | None = None, *, timeout: float | None = None
    ) -> list[Result]: ...

    async def reset_group(
        self,
        group_size: int,
        *,
        seed: int,
        slots: Sequence[int] | None = None,
        timeout: float | None = None,
        check: bool = True,
    ) -> list[Result]: ...

    async def step(
        self, actions: Sequence[Any], *, timeout: float | None = None
    ) -> list[Result]: ...

    async def fork(
        self, index: int, *, n: int, checkpoint: Checkpoint | None = None
    ) -> Sequence[ClientT_co]: ...

    async def send(self, indices: Iterable[int], actions: Sequence[Any]) -> None: ...

    async def send_reset(
        self, indices: Iterable[int], seeds: Sequence[int | None] | None = None
    ) -> None: ...

    async def recv(
        self, min_results: int = 1, *, timeout: float | None = None
    ) -> list[tuple[int, Result]]: ...

    @property
    def in_flight(self) -> list[int]: ...

    @property
    def failed(self) -> list[int]: ...

    async def replace(self, index: int) -> ClientT_co: ...

    async def replace_failed(self) -> list[int]: ...

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> ClientT_co: ...

    async def close(self) -> None: ...


class SyncEnvClient(Generic[ActT, ObsT, StateT]):
    """Blocking twin of :class:`EnvClient`; works in plain scripts and inside a running loop's thread."""

    def __init__(self, client: AsyncEnv[ActT, ObsT, StateT]) -> None:
        self.client = client
        self._loop = background_loop()

    @property
    def _async(self) -> AsyncEnv[ActT, ObsT, StateT]:
        """The wrapped async client (the reference's name for ``client``)."""
        return self.client

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def connect(self) -> typing.Self:
        self._call(async_call(self.client, "connect"))
        return self

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> StepResult[ObsT]:
        return self._call(
            async_call(self.client, "reset", seed=seed, episode_id=episode_id, **kwargs)
        )

    def step(self, action: ActT | dict[str, Any]) -> StepResult[ObsT]:
        return self._call(async_call(self.client, "step", action))

    def state(self) -> StateT:
        state: StateT = self._call(async_call(self.client, "state"))
        return state

    def schema(self) -> dict[str, Any]:
        """The server's JSON schemas of its ``action``, ``observation`` and ``state``."""
        schema: dict[str, Any] = self._call(async_call(self.client, "schema"))
        return schema

    def close(self, timeout: float | None = None) -> None:
        """Close the session; with ``timeout``, give up waiting after that many seconds."""
        future = asyncio.run_coroutine_threadsafe(async_call(self.client, "close"), self._loop)
        try:
            future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()

    def close_soon(self) -> None:
        """Start closing the session and return at once (for finalizers: never waits).

        Does nothing at interpreter shutdown: the background loop's thread no longer runs
        then, and the process's exit closes its connections anyway.
        """
        if sys.is_finalizing() or self._loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(async_call(self.client, "close"), self._loop)

    def checkpoint(self) -> Checkpoint:
        """Blocking :meth:`EnvClient.checkpoint`."""
        return self._call(self.client.checkpoint())

    def restore(self, checkpoint: Checkpoint | str) -> Checkpoint:
        """Blocking :meth:`EnvClient.restore`."""
        return self._call(self.client.restore(checkpoint))

    @overload
    def fork(
        self,
        checkpoint: Checkpoint | None = None,
        *,
        n: None = None,
        base_urls: Sequence[str] | None = None,
    ) -> SyncEnvClient[ActT, ObsT, StateT]: ...

    @overload
    def fork(
        self,
        checkpoint: Checkpoint | None = None,
        *,
        n: int,
        base_urls: Sequence[str] | None = None,
    ) -> list[SyncEnvClient[ActT, ObsT, StateT]]: ...

    def fork(
        self,
        checkpoint: Checkpoint | None = None,
        *,
        n: int | None = None,
        base_urls: Sequence[str] | None = None,
    ) -> SyncEnvClient[ActT, ObsT, StateT] | list[SyncEnvClient[ActT, ObsT, StateT]]:
        """Blocking :meth:`EnvClient.fork`; the forks are blocking clients too."""
        if n is None:
            return SyncEnvClient(self._call(self.client.fork(checkpoint, base_urls=base_urls)))
        forks = self._call(self.client.fork(checkpoint, n=n, base_urls=base_urls))
        return [SyncEnvClient(f) for f in forks]

    def __getattr__(self, name: str) -> Any:
        # Other async methods of the client (MCPToolClient.call_tool, ...) become blocking too.
        if name == "client":
            raise AttributeError(name)
        attr = getattr(self.client, name)
        if getattr(attr, "__openenv_async__", None) is None and not asyncio.iscoroutinefunction(
            attr
        ):
            return attr

        def blocking(*args: Any, **kwargs: Any) -> Any:
            return self._call(async_call(self.client, name, *args, **kwargs))

        return blocking

    @property
    def async_client(self) -> AsyncEnv[ActT, ObsT, StateT]:
        """The async client this wraps (the reference's name)."""
        return self.client

    def __enter__(self) -> typing.Self:
        try:
            return self.connect()
        except BaseException:
            self.close()  # the servers a from_* constructor started go too
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class SyncEnvPool(Generic[ClientT]):
    """Blocking twin of :class:`EnvPool` (its coroutines run on the client's background loop)."""

    def __init__(self, pool: AsyncPool[ClientT]) -> None:
        self.pool = pool
        self._loop = background_loop()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def open(self) -> typing.Self:
        self._call(self.pool.open())
        return self

    def reset(
        self, seeds: Sequence[int | None] | None = None, *, timeout: float | None = None
    ) -> list[Result]:
        return self._call(self.pool.reset(seeds, timeout=timeout))

    def reset_group(
        self,
        group_size: int,
        *,
        seed: int,
        slots: Sequence[int] | None = None,
        timeout: float | None = None,
        check: bool = True,
    ) -> list[Result]:
        """Blocking :meth:`EnvPool.reset_group`."""
        return self._call(
            self.pool.reset_group(group_size, seed=seed, slots=slots, timeout=timeout, check=check)
        )

    def step(self, actions: Sequence[Any], *, timeout: float | None = None) -> list[Result]:
        return self._call(self.pool.step(actions, timeout=timeout))

    def fork(self, index: int, *, n: int, checkpoint: Checkpoint | None = None) -> list[ClientT]:
        """Blocking :meth:`EnvPool.fork`; the forks are the pool's (async) client class."""
        return list(self._call(self.pool.fork(index, n=n, checkpoint=checkpoint)))

    def send(self, indices: Iterable[int], actions: Sequence[Any]) -> None:
        self._call(self.pool.send(indices, actions))

    def send_reset(self, indices: Iterable[int], seeds: Sequence[int | None] | None = None) -> None:
        self._call(self.pool.send_reset(indices, seeds))

    def recv(
        self, min_results: int = 1, *, timeout: float | None = None
    ) -> list[tuple[int, Result]]:
        return self._call(self.pool.recv(min_results, timeout=timeout))

    @property
    def in_flight(self) -> list[int]:
        return self.pool.in_flight

    def replace(self, index: int) -> ClientT:
        return self._call(self.pool.replace(index))

    def replace_failed(self) -> list[int]:
        return self._call(self.pool.replace_failed())

    @property
    def failed(self) -> list[int]:
        return self.pool.failed

    def __len__(self) -> int:
        return len(self.pool)

    def __getitem__(self, index: int) -> ClientT:
        return self.pool[index]

    def close(self) -> None:
        self._call(self.pool.close())

    def __enter__(self) -> typing.Self:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

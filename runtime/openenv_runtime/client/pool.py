"""``EnvPool``: many sessions over many servers, driven as one batch.

::

    async with EnvPool(MyEnv, provider=DockerProvider("my-env:latest", replicas=2), size=64) as pool:
        results = await pool.reset(seeds=range(64))
        while not all(r.done for r in results if not isinstance(r, EnvError)):
            results = await pool.step([policy(r) for r in results])

Sessions are spread over the servers by free capacity (``/health``'s ``active_sessions`` /
``max_sessions``); a server that refuses with ``CAPACITY_REACHED`` is marked full and the
session opens on another. Every batched call sends all requests at once and waits for all
replies; a slot whose session fails holds its :class:`EnvError` and the others go on.
A failed slot answers every later call with an error until :meth:`EnvPool.replace` gives it
a fresh session.

A replica that drains (a rolling update) lets running episodes finish, then ends each
session at its next ``reset`` with the close code 1012, leaving the reset unanswered. With
``follow_drain`` (the default) the pool takes that as its cue: the slots it ended get fresh
sessions on the other replicas (:meth:`EnvPool.replace_slots`, placed on one ``/health``
reading) and their resets are sent there, so the caller sees an ordinary reset; no step is
lost or sent twice, and no running episode is cut. ``drain_moves`` counts them.

``send``/``recv`` step without waiting for the slowest slot: results come back as they are
ready, episodes reset as ``autoreset`` says, failed slots are replaced on their own
(:mod:`openenv_runtime.client.first_ready`).
"""

from __future__ import annotations

import asyncio
import typing
from collections.abc import Callable, Container, Iterable, Sequence
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from ..errors import EnvError
from ..protocol import CLOSE_SERVICE_RESTART
from ..providers.base import Provider, health
from .batch import CAPACITY_REACHED, Batch, SlotReply
from .checkpoint import Checkpoint
from .endpoints import ENDPOINTS_FILE, EndpointsError, read_endpoints
from .env_client import EnvClient
from .first_ready import AutoReset, FirstReady
from .placement import Server, accepting, free_sessions, pick_server, release, spread
from .port import Result, SessionPort, as_env_error
from .sync import SyncEnvPool

ClientT = TypeVar("ClientT", bound=EnvClient)  # type: ignore[type-arg]


class EnvPool(Generic[ClientT]):
    """``size`` sessions of ``client_cls``, over ``urls`` or the servers a ``provider`` starts.

    Args:
        client_cls: your ``EnvClient`` subclass (or ``GenericEnvClient``).
        urls: base URLs of running servers.
        provider: a provider to start (and stop on close, unless ``own_provider=False``).
        size: number of sessions.
        timeout: default seconds allowed per batched call; a slot that misses it fails
            with ``TIMEOUT`` (None: no limit).
        autoreset: how ``send``/``recv`` start a new episode after one ends: ``"next_step"``,
            ``"same_step"`` or ``"disabled"``, as Gymnasium's vector environments define them
            (see ``openenv_runtime.client.first_ready``). Lockstep ``reset``/``step`` never
            reset on their own.
        client_kwargs: passed to every client (``token``, ``headers``, ...). Sessions do not
            resume after a dropped connection unless ``resume=True`` is passed: a failed
            slot holds its ``EnvError`` and ``replace`` gives it a fresh session.
        follow_drain: when a draining replica ends a slot's session between episodes (close
            code 1012 at its next reset), open the slot anew on another replica and send the
            reset there. False: the slot fails with ``CLOSED`` and ``replace`` moves it.
    """

    def __init__(
        self,
        client_cls: type[ClientT],
        *,
        urls: Sequence[str] | None = None,
        provider: Provider | None = None,
        size: int,
        timeout: float | None = None,
        own_provider: bool = True,
        autoreset: AutoReset = "next_step",
        follow_drain: bool = True,
        **client_kwargs: Any,
    ) -> None:
        if (urls is None) == (provider is None):
            raise ValueError("give EnvPool either urls=[...] or provider=...")
        if size < 1:
            raise ValueError("size must be at least 1")
        self.client_cls = client_cls
        self.urls = list(urls or [])
        self.provider = provider
        self.own_provider = own_provider and provider is not None
        self.size = size
        self.timeout = timeout
        self.follow_drain = follow_drain
        self.drain_moves = 0
        """Slots moved off a draining replica so far (each reset started elsewhere counts once)."""
        # The pool replaces failed sessions itself; resuming (opt in with resume=True) costs
        # a task and a lock per request.
        self.client_kwargs = {"resume": False, **client_kwargs}
        self.clients: list[ClientT] = []
        """Each slot's client: the seam the pool's helpers drive (``pool[i]`` in your code)."""
        self.errors: list[EnvError | None] = []
        """Each slot's failure, None while its session is well (``failed`` lists them)."""
        self._servers: dict[str, Server] = {}
        self._where: list[str] = []
        self._opened = False
        self._first_ready = FirstReady(self, autoreset)

    @classmethod
    def from_deploy(
        cls,
        directory: str | Path,
        client_cls: type[ClientT],
        *,
        size: int,
        via: Literal["replicas", "front"] | None = None,
        **kwargs: Any,
    ) -> EnvPool[ClientT]:
        """A pool over what ``openenv deploy`` deployed: the servers in ``directory``'s
        ``endpoints.json`` (its ``--out`` folder).

        ``via="replicas"`` opens the sessions on the replicas themselves (the pool spreads them
        by each one's ``/health``); ``via="front"`` through the Envoy front; by default the
        replicas when the file lists them, else the front. Other arguments are
        :class:`EnvPool`'s. Raises :class:`~openenv_runtime.client.endpoints.EndpointsError`
        (a ``ValueError``) naming the file when it is missing or malformed.
        """
        endpoints = read_endpoints(directory)
        where = f"in {Path(directory) / ENDPOINTS_FILE}"
        if via == "replicas" or (via is None and endpoints.replicas):
            if not endpoints.replicas:
                raise EndpointsError(f"No replicas listed {where}; pass via='front'.")
            urls = list(endpoints.replicas)
        elif endpoints.front is not None:
            urls = [endpoints.front]
        else:
            raise EndpointsError(f"No front or replicas listed {where} (deploy with --apply).")
        return cls(client_cls, urls=urls, size=size, **kwargs)

    # -- opening ----------------------------------------------------------------------------------
    async def open(self) -> typing.Self:
        """Start the provider (if any), then open every session (``async with`` does this)."""
        if self._opened:
            return self
        self._opened = True
        try:
            if self.provider is not None:
                self.urls = await self.provider.astart()
            await self._refresh_capacity()
            self.errors = [None] * self.size
            self.clients = [self._new_client(self._pick_server()) for _ in range(self.size)]
            self._where = [c.base_url for c in self.clients]
            opened = await asyncio.gather(
                *(self._connect_slot(i) for i in range(self.size)), return_exceptions=True
            )
            for i, outcome in enumerate(opened):
                if isinstance(outcome, BaseException):
                    self.errors[i] = as_env_error(outcome)
        except BaseException:
            await self.close()
            raise
        return self

    def _new_client(self, url: str) -> ClientT:
        return self.client_cls(url, **self.client_kwargs)

    async def _refresh_capacity(self) -> None:
        answers = await asyncio.gather(*(asyncio.to_thread(health, url, 5.0) for url in self.urls))
        for url, answer in zip(self.urls, answers, strict=True):
            server = self._servers.setdefault(url, Server(url, 0))
            server.free, server.accepting = free_sessions(answer), accepting(answer)

    def _pick_server(self, exclude: Iterable[str] = ()) -> str:
        """The server with the most free capacity (the fewest of our sessions on a tie)."""
        return pick_server(self._servers.values(), exclude).url

    async def _connect_slot(self, index: int) -> None:
        tried: list[str] = []
        while True:
            client = self.clients[index]
            try:
                await client.connect()
                return
            except EnvError:
                tried.append(client.base_url)
                self._release(client.base_url, full=True)
                if len(set(tried)) >= len(self._servers):
                    raise
                await self._move(index, exclude=tried)

    def _release(self, url: str, full: bool = False) -> None:
        server = self._servers.get(url)
        if server is not None:
            release(server, full)

    async def _move(self, index: int, exclude: Iterable[str] = ()) -> ClientT:
        self.clients[index].abort()
        client = self._new_client(self._pick_server(exclude))
        self.clients[index] = client
        self._where[index] = client.base_url
        return client

    # -- batched calls ------------------------------------------------------------------------
    async def reset(
        self, seeds: Sequence[int | None] | None = None, *, timeout: float | None = None
    ) -> list[Result]:
        """Reset every session (``seeds[i]`` for session i); results in slot order."""
        await self.open()
        if seeds is not None and len(seeds) != self.size:
            raise ValueError(f"{len(seeds)} seeds for a pool of {self.size} sessions")
        return await self._batch(
            _reset_frame, seeds if seeds is not None else [None] * self.size, timeout
        )

    async def reset_group(
        self,
        group_size: int,
        *,
        seed: int,
        slots: Sequence[int] | None = None,
        timeout: float | None = None,
        check: bool = True,
    ) -> list[Result]:
        """Reset ``group_size`` sessions with the same ``seed``: a group whose episodes start alike.

        ``slots``: which sessions (default the first ``group_size``); the results come in
        that order. The seed reaches every environment's ``reset``, so a seeded environment
        gives every member the same first observation (what GRPO-style groups compare their
        answers from). When the first observations differ, the environment does not start
        from its seed alone: ``EnvError`` ``GROUP_MISMATCH`` names the slots that differ
        (``openenv validate`` reports such an environment); ``check=False`` hands the
        results back without comparing them (for observations that carry something of
        their own, an id or a time). A slot that fails holds its ``EnvError`` as in
        :meth:`reset`.
        """
        chosen = list(range(group_size)) if slots is None else list(slots)
        if len(chosen) != group_size or group_size < 1:
            raise ValueError(f"a group of {group_size} needs as many slots, got {len(chosen)}")
        if len(set(chosen)) != len(chosen) or not all(0 <= i < self.size for i in chosen):
            raise ValueError(f"slots must be distinct, from 0 to {self.size - 1}: {chosen}")
        await self.open()
        results = await self._batch(_reset_frame, [seed] * self.size, timeout, only=set(chosen))
        group = [results[i] for i in chosen]
        if not check:
            return group
        firsts = {
            slot: r.observation.model_dump()
            for slot, r in zip(chosen, group, strict=True)
            if not isinstance(r, EnvError)
        }
        if firsts:
            reference_slot, reference = next(iter(firsts.items()))
            differ = [slot for slot, obs in firsts.items() if obs != reference]
            if differ:
                raise EnvError(
                    "GROUP_MISMATCH",
                    f"reset(seed={seed}) gave slots {differ} another first observation than "
                    f"slot {reference_slot}: the environment does not start from its seed "
                    "alone. Seed every random generator its reset uses from `seed` (and "
                    "accept `seed` in reset's signature); `openenv validate` checks it.",
                    {"seed": seed, "slots": differ, "reference_slot": reference_slot},
                )
        return group

    async def step(self, actions: Sequence[Any], *, timeout: float | None = None) -> list[Result]:
        """One action per session, all sent at once; results (or ``EnvError``\\ s) in slot order."""
        await self.open()
        if len(actions) != self.size:
            raise ValueError(f"{len(actions)} actions for a pool of {self.size} sessions")
        return await self._batch(_step_frame, actions, timeout)

    async def _batch(
        self,
        frame: Callable[[Any, Any], str],
        args: Sequence[Any],
        timeout: float | None,
        only: Container[int] | None = None,
    ) -> list[Result]:
        """Send every slot's request at once (the slots in ``only``, when given); each reply
        is parsed as it arrives. Slots left out hold None."""
        if self._first_ready.inflight:
            raise RuntimeError(
                "requests sent with pool.send() are still in flight: recv() them before a "
                "lockstep reset() or step()"
            )
        timeout = self.timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        batch = Batch(self, loop)
        results = batch.results
        sinks: list[SlotReply | None] = [None] * self.size
        sent: list[str] = [""] * self.size
        errors = self.errors
        for i, client in enumerate(self.clients):
            if only is not None and i not in only:
                continue
            error = errors[i]
            if error is not None:
                results[i] = EnvError(
                    "CLOSED", f"session {i} failed earlier ({error.message}); pool.replace({i})"
                )
                continue
            try:
                sent[i] = frame(client, args[i])
            except Exception as exc:  # e.g. a dict action that does not validate
                results[i] = as_env_error(exc, "VALIDATION_ERROR")
                continue
            sink = sinks[i] = SlotReply(batch, i, client)
            batch.remaining += 1
            if not client.submit_to(sent[i], sink):
                sinks[i] = None
                batch.remaining -= 1
                results[i] = self.fail_slot(i, EnvError("CLOSED", "the session is not connected"))
        batch.one_done()  # the guard that kept an early reply from finishing the batch
        if not batch.finished.done():
            timer = None
            if timeout is not None:
                timer = loop.call_later(timeout, batch.expire)
            try:
                await batch.finished
            finally:
                if timer is not None:
                    timer.cancel()
        if batch.remaining > 0:
            for i, late in enumerate(sinks):
                if late is not None and not late.finished:
                    late.finished = True  # a late reply is dropped
                    results[i] = self.fail_slot(i, self.clients[i].timed_out(timeout))
        drained = self._drained(results) if frame is _reset_frame else []
        if batch.moves:
            await asyncio.gather(*(self._retry_elsewhere(i, sent[i], results) for i in batch.moves))
        if drained:
            await self._follow(drained, sent, results)
        return typing.cast(list[Result], results)

    async def _retry_elsewhere(self, index: int, frame: str, results: list[Result | None]) -> None:
        """The server was full: open the session on another one and send the request again."""
        tried = [self._where[index]]
        self._release(tried[0], full=True)
        while len(set(tried)) < len(self._servers):
            client = await self._move(index, exclude=tried)
            try:
                await client.connect()
                results[index] = client.parse_result(await client.request_frame(frame))
                return
            except EnvError as error:
                results[index] = error
                if error.code != CAPACITY_REACHED and error.code != "CONNECTION_ERROR":
                    return
                tried.append(client.base_url)
                self._release(client.base_url, full=True)
        result = results[index]
        self.errors[index] = result if isinstance(result, EnvError) else None

    def _drained(self, results: Sequence[Result | None]) -> list[int]:
        """Slots whose reset a draining replica left unanswered (it closed them with 1012)."""
        if not self.follow_drain:
            return []
        return [
            i
            for i, r in enumerate(results)
            if isinstance(r, EnvError) and r.details.get("close_code") == CLOSE_SERVICE_RESTART
        ]

    async def _follow(
        self, slots: list[int], sent: list[str], results: list[Result | None]
    ) -> None:
        """Open ``slots`` anew on the replicas that take sessions (one ``/health`` reading
        places them all) and send each its reset there."""
        moved = await self.replace_slots(slots)

        async def resend(index: int) -> None:
            client = self.clients[index]
            try:
                results[index] = client.parse_result(await client.request_frame(sent[index]))
            except EnvError as error:
                results[index] = self.fail_slot(index, error)

        await asyncio.gather(*(resend(i) for i in moved))
        for i in slots:
            if i not in moved:
                results[i] = self.errors[i]
        self.drain_moves += len(moved)

    def fail_slot(self, index: int, error: EnvError) -> EnvError:
        """Record that slot ``index``'s session failed with ``error`` and return it; the slot
        answers with an error until replaced (the seam of the pool's helpers)."""
        self.errors[index] = error
        return error

    # -- first-ready -----------------------------------------------------------------------------
    async def send(self, indices: Iterable[int], actions: Sequence[Any]) -> None:
        """Send one action to each slot in ``indices``; collect the results with :meth:`recv`.

        Returns once every request is sent (not answered). A slot may have one request in
        flight; with autoreset ``"next_step"`` a slot whose episode ended resets instead.
        """
        await self.open()
        await self._first_ready.send(indices, actions)

    async def send_reset(
        self, indices: Iterable[int], seeds: Sequence[int | None] | None = None
    ) -> None:
        """Reset the slots in ``indices`` (``seeds[k]`` for ``indices[k]``); results via :meth:`recv`."""
        await self.open()
        slots = list(indices)
        await self._first_ready.send(
            slots, list(seeds) if seeds is not None else [None] * len(slots), reset=True
        )

    async def recv(
        self, min_results: int = 1, *, timeout: float | None = None
    ) -> list[tuple[int, Result]]:
        """``(slot, result)`` pairs of the requests answered so far, in the order they came.

        Waits until at least ``min_results`` are ready (fewer when fewer are in flight), or
        until ``timeout`` seconds pass, then returns everything ready (possibly empty after a
        timeout). A result is a ``StepResult`` or an ``EnvError``; an error with
        ``details["episode_failed"]`` means the slot's session was lost and has been replaced.
        """
        return await self._first_ready.recv(min_results, timeout)

    @property
    def in_flight(self) -> list[int]:
        """Slots with a request sent by :meth:`send` and not yet received."""
        return sorted(self._first_ready.inflight)

    # -- sessions --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> ClientT:
        """Session ``index``'s own client (``await pool[i].state()``)."""
        if not self._opened:
            raise RuntimeError("open the pool first: `async with pool`, `await pool.open()`")
        return self.clients[index]

    @property
    def failed(self) -> list[int]:
        """Slots whose session failed and has not been replaced."""
        return [i for i, error in enumerate(self.errors) if error is not None]

    def server_of(self, index: int) -> str:
        return self._where[index]

    async def replace(self, index: int) -> ClientT:
        """Give slot ``index`` a fresh session (on a server with free capacity); returns its client.

        To replace several slots at once use :meth:`replace_failed`: it places them all on one
        reading of the servers' ``/health``.
        """
        self._release(self._where[index])
        await self._refresh_capacity()
        self._place_anew(index)
        return await self._connect_anew(index)

    async def replace_failed(self) -> list[int]:
        """Replace every failed session; returns the slots that got a fresh one.

        The servers' ``/health`` is read once and every slot placed on it before any connects,
        so the new sessions share the free capacity (each reading its own ``/health`` would
        not see the others' picks, and they would crowd onto the same server).
        """
        return await self.replace_slots(self.failed)

    async def replace_slots(self, slots: Sequence[int]) -> list[int]:
        """Give each of ``slots`` a fresh session, all placed on one reading of the servers'
        ``/health`` (as :meth:`replace_failed`); returns the slots that got one."""
        if not slots:
            return []
        for i in slots:
            self._release(self._where[i])
        await self._refresh_capacity()
        for i in slots:
            self._place_anew(i)
        outcomes = await asyncio.gather(
            *(self._connect_anew(i) for i in slots), return_exceptions=True
        )
        return [i for i, o in zip(slots, outcomes, strict=True) if not isinstance(o, BaseException)]

    def _place_anew(self, index: int) -> None:
        """Drop slot ``index``'s session and give it a new client on the roomiest server."""
        self.errors[index] = None
        self.clients[index].abort()
        client = self._new_client(self._pick_server())
        self.clients[index] = client
        self._where[index] = client.base_url

    async def _connect_anew(self, index: int) -> ClientT:
        try:
            await self._connect_slot(index)
        except EnvError as error:
            self.errors[index] = error
            raise
        return self.clients[index]

    async def fork(
        self, index: int, *, n: int, checkpoint: Checkpoint | None = None
    ) -> list[ClientT]:
        """``n`` new sessions with slot ``index``'s current state (or ``checkpoint``'s),
        spread over the pool's servers by free capacity.

        The servers must read each other's checkpoints (a shared ``CHECKPOINT_DIR``, or the
        same ``CHECKPOINT_KEY`` and storage). The forks are not slots of the pool: close them
        when done. See :meth:`EnvClient.fork`.
        """
        await self.open()
        await self._refresh_capacity()
        servers = spread(self._servers.values(), n)
        return await self[index].fork(checkpoint, n=n, base_urls=servers)

    # -- closing ---------------------------------------------------------------------------------
    async def close(self) -> None:
        """Close every session, then stop the provider if the pool owns it."""
        await self._first_ready.close()
        clients, self.clients = self.clients, []
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
        self.errors = []
        provider = self.provider
        if provider is not None and self.own_provider:
            await provider.astop()
        self._opened = False
        self._first_ready = FirstReady(self, self._first_ready.autoreset)

    async def __aenter__(self) -> typing.Self:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def sync(self) -> SyncEnvPool[ClientT]:
        """The same pool with blocking methods: ``with pool.sync() as p: p.step(actions)``."""
        return SyncEnvPool(self)


def _reset_frame(client: SessionPort, seed: int | None) -> str:
    return client.reset_frame(seed)


def _step_frame(client: SessionPort, action: Any) -> str:
    return client.step_frame(action)

"""How the server calls an environment: sync or async, with its results checked.

Plain methods run on one shared, bounded thread pool; ``async def`` methods run on the
event loop. What a class offers is inspected once per class, not once per call.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any

from openenv_runtime.models import Observation, State
from openenv_runtime.server.running.call_cost import LifecycleCost
from openenv_runtime.server.running.env_class import ClassAdapter
from openenv_runtime.server.running.step_placement import PlainStep

logger = logging.getLogger("openenv_runtime.server")

__all__ = [
    "AsyncStep",
    "ContractViolation",
    "EnvRunner",
    "Exhausted",
    "StepTimeout",
]


class ContractViolation(Exception):
    """An environment returned something the contract does not allow (reported as EXECUTION_ERROR)."""


class StepTimeout(Exception):
    """A create, reset, step, state or tool call ran past ``step_timeout``; its instance has
    been abandoned."""


class Exhausted(Exception):
    """Too many environment calls are stuck past the step timeout to start new environments."""


class AsyncStep:
    """An ``async def step`` bound to one instance, without a step timeout: ``await
    bound(action)`` works; the step function awaits ``bound.pending(action)`` (the environment's
    own coroutine) itself and checks the result, one coroutine less per step."""

    __slots__ = ("env", "name", "pending", "runner")

    def __init__(
        self, runner: EnvRunner, env: Any, func: Callable[[Any], Awaitable[Any]], name: str
    ) -> None:
        self.runner = runner
        self.env = env
        self.pending = func
        self.name = name

    def checked(self, result: Any) -> Observation:
        """``result`` of the step when it is an observation; else ``ContractViolation``."""
        return self.runner.check_observation(self.env, self.name, result)

    async def __call__(self, action: Any) -> Observation:
        result = await self.pending(action)
        return result if isinstance(result, Observation) else self.checked(result)


class EnvRunner:
    """Calls environment instances for a server: one per app, shared by every session."""

    def __init__(
        self,
        factory: Callable[[], Any],
        pool_size: int,
        observation_cls: type[Observation],
        step_timeout: float | None = None,
    ) -> None:
        self.step_timeout = step_timeout
        self.stuck_threads = 0  # pool threads still running an abandoned call
        self._background: set[asyncio.Task[None]] = set()
        self._factory = factory
        self._factory_is_async = inspect.iscoroutinefunction(factory)
        self._pool_size = pool_size
        self._pool_instance: ThreadPoolExecutor | None = None
        self._observation_cls = observation_cls
        self._adapters: dict[type, ClassAdapter] = {}
        self._create_cost = LifecycleCost()
        # Thread affinity: the one-thread executor of each instance whose class sets
        # REQUIRES_SINGLE_THREAD_EXECUTOR (keyed by id(instance)); see environment.py.
        self._own_threads: dict[int, ThreadPoolExecutor] = {}

    def pool_for(self, env: Any) -> ThreadPoolExecutor:
        """Where ``env``'s plain methods run: its own thread when its class asks for one
        (``REQUIRES_SINGLE_THREAD_EXECUTOR``), else the shared pool."""
        return self._own_threads.get(id(env)) or self.pool

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The shared thread pool of plain methods (replaced when a call is abandoned)."""
        # Made on first use, so an app can be served again after a server using it stopped.
        if self._pool_instance is None:
            self._pool_instance = ThreadPoolExecutor(
                max_workers=self._pool_size, thread_name_prefix="openenv-env"
            )
        return self._pool_instance

    def shutdown(self) -> None:
        """Stop the thread pool (a later call makes a new one)."""
        pool, self._pool_instance = self._pool_instance, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    async def guarded(self, env: Any, is_async: bool, func: Callable[..., Any], *args: Any) -> Any:
        """Run one reset/step within ``step_timeout``; past it, abandon ``env`` and raise StepTimeout.

        Python cannot stop a thread. A plain method that overruns keeps its pool thread until
        it returns; the pool is replaced at once (its idle threads exit, new calls get fresh
        threads), so a few hung steps never starve other sessions, and when the stuck call
        finally returns, the abandoned instance is closed. At most ``4 × pool_size`` stuck
        threads are replaced; past that the server logs that its pool may be exhausted. An ``async``
        method that overruns is cancelled, then its instance is closed.
        """
        timeout = self.step_timeout
        if is_async:
            try:
                return await asyncio.wait_for(func(*args), timeout)
            except asyncio.TimeoutError:
                self._later(self._close_quietly(env))
                raise StepTimeout(self._timeout_message(func)) from None
        pool = self._own_threads.get(id(env)) or self.pool  # thread affinity, when declared
        if timeout is None:
            return await asyncio.get_running_loop().run_in_executor(pool, func, *args)
        call = pool.submit(func, *args)
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(call)), timeout)
        except asyncio.TimeoutError:
            self._abandon(env, call)
            raise StepTimeout(self._timeout_message(func)) from None

    @property
    def exhausted(self) -> bool:
        """True when so many calls are stuck that the pool is no longer replaced."""
        return self.stuck_threads > 4 * self._pool_size

    def check_not_exhausted(self) -> None:
        """Raise :class:`Exhausted` (a clear error for the client) instead of waiting forever."""
        if self.exhausted:
            raise Exhausted(
                f"{self.stuck_threads} environment calls are stuck past the step timeout; this "
                "server starts no new environments until they return. Retry later, or restart it."
            )

    async def bounded(self, env: Any, func: Callable[..., Any], *args: Any) -> Any:
        """Run ``func(*args)`` (plain or ``async``, returning a value or an awaitable) on ``env``
        within ``step_timeout``, like :meth:`guarded`."""
        is_async = inspect.iscoroutinefunction(func)
        result = await self.guarded(env, is_async, func, *args)
        if inspect.isawaitable(result):
            timeout = self.step_timeout
            try:
                result = await asyncio.wait_for(result, timeout)
            except asyncio.TimeoutError:
                self._later(self._close_quietly(env))
                raise StepTimeout(self._timeout_message(func)) from None
        return result

    def _timeout_message(self, func: Callable[..., Any]) -> str:
        if isinstance(func, partial) and func.func is getattr and len(func.args) == 2:
            name = f"{type(func.args[0]).__qualname__}.{func.args[1]}"  # a property read
        else:
            name = getattr(func, "__qualname__", "the call")
        return (
            f"{name} ran longer than the server's step timeout of {self.step_timeout:g}s; the "
            "session was ended. Open a new one (and raise STEP_TIMEOUT if steps legitimately take longer)."
        )

    def _abandon(self, env: Any, call: Future[Any], made: bool = False) -> None:
        loop = asyncio.get_running_loop()
        self.stuck_threads += 1
        if self.stuck_threads <= 4 * self._pool_size:
            old, self._pool_instance = self._pool_instance, None
            if old is not None:
                old.shutdown(wait=False)  # its stuck thread runs on; the others exit when idle
        else:
            logger.error(
                "%d environment calls are stuck past the step timeout; the thread pool is no "
                "longer replaced and may be exhausted: restart the server.",
                self.stuck_threads,
            )

        def finished(done: Future[Any]) -> None:
            def later() -> None:
                self.stuck_threads -= 1
                instance = env
                if made:  # an abandoned constructor: close what it made, if it made anything
                    failed = done.cancelled() or done.exception() is not None
                    instance = None if failed else done.result()
                if instance is not None:
                    self._later(self._close_quietly(instance))

            try:
                loop.call_soon_threadsafe(later)
            except RuntimeError:  # the server has stopped meanwhile
                pass

        call.add_done_callback(finished)

    def _later(self, job: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(job)
        self._background.add(task)  # held until done, so it is not collected half-way
        task.add_done_callback(self._background.discard)

    async def _close_quietly(self, env: Any) -> None:
        try:
            await self.close(env)
        except Exception:
            logger.exception("close() of abandoned %s raised", type(env).__qualname__)

    def adapter_for(self, env: Any) -> ClassAdapter:
        cls = type(env)
        adapter = self._adapters.get(cls)
        if adapter is None:
            adapter = self._adapters[cls] = ClassAdapter(cls)
        return adapter

    async def _run(
        self,
        is_async: bool,
        func: Callable[..., Any],
        *args: Any,
        pool: ThreadPoolExecutor | None = None,
        **kwargs: Any,
    ) -> Any:
        if is_async:
            return await func(*args, **kwargs)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            pool or self.pool, partial(func, *args, **kwargs) if kwargs else partial(func, *args)
        )

    async def create(self) -> Any:
        """A new environment instance (the factory may be a class, a function or a coroutine),
        within ``step_timeout``: a constructor that overruns raises :class:`StepTimeout` and
        what it makes later is closed."""
        timeout = self.step_timeout
        if timeout is None:
            return await self._create()
        if self._factory_is_async:
            try:
                return await asyncio.wait_for(self._create(), timeout)
            except asyncio.TimeoutError:
                raise StepTimeout(self._timeout_message(self._factory)) from None
        self.check_not_exhausted()
        if getattr(self._factory, "REQUIRES_SINGLE_THREAD_EXECUTOR", False) is True:
            made = asyncio.ensure_future(self._create())  # on the instance's own thread
            try:
                return await asyncio.wait_for(asyncio.shield(made), timeout)
            except asyncio.TimeoutError:
                made.add_done_callback(self._close_when_made)
                raise StepTimeout(self._timeout_message(self._factory)) from None
        call = self.pool.submit(self._create_in_thread)
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(call)), timeout)
        except asyncio.TimeoutError:
            self._abandon(None, call, made=True)
            raise StepTimeout(self._timeout_message(self._factory)) from None

    def _close_when_made(self, made: asyncio.Future[Any]) -> None:
        if not made.cancelled() and made.exception() is None:
            self._later(self._close_quietly(made.result()))

    def _create_in_thread(self) -> Any:
        """A plain factory's instance, made on a pool thread (the bounded path of :meth:`create`)."""
        env = self._factory()
        self._claim_thread(env)
        self.adapter_for(env)
        return env

    def _claim_thread(self, env: Any) -> None:
        if (
            getattr(type(env), "REQUIRES_SINGLE_THREAD_EXECUTOR", False)
            and id(env) not in self._own_threads
        ):
            self._own_threads[id(env)] = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="openenv-session"
            )

    async def _create(self) -> Any:
        if self._factory_is_async:
            env = await self._factory()
        elif getattr(self._factory, "REQUIRES_SINGLE_THREAD_EXECUTOR", False) is True:
            # The constructor runs on the session's own thread too (it may create the browser).
            own = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openenv-session")
            try:
                env = await asyncio.get_running_loop().run_in_executor(own, self._factory)
            except BaseException:
                own.shutdown(wait=False)
                raise
            self._own_threads[id(env)] = own
        else:
            env = await self._create_cost.run(self.pool, self._factory)
        self._claim_thread(env)
        self.adapter_for(env)  # checks the contract once per class
        return env

    async def reset(self, env: Any, options: dict[str, Any]) -> Observation:
        method = self.adapter_for(env).reset
        func = getattr(env, method.name)
        kwargs = method.filter_kwargs(options)
        result = await self.guarded(
            env, method.is_async, partial(func, **kwargs) if kwargs else func
        )
        return self.check_observation(env, method.name, result)

    async def reset_many(
        self, jobs: list[tuple[Any, dict[str, Any]]]
    ) -> list[Observation | Exception]:
        """Reset each ``(env, options)``; per job its observation or what it raised.

        Plain ``reset`` methods without a step timeout or a thread of their own run one after
        the other in one pool job (one hop for the batch, not one each), or inline once the
        class's resets proved cheap the way steps do (``step_placement.py``); the others as
        :meth:`reset` does, all at once.
        """

        def plain(env: Any) -> bool:
            method = self.adapter_for(env).reset
            return not method.is_async and id(env) not in self._own_threads

        if self.step_timeout is not None or not all(plain(env) for env, _ in jobs):
            outcome = await asyncio.gather(
                *(self.reset(env, options) for env, options in jobs), return_exceptions=True
            )
            gathered: list[Observation | Exception] = []
            for item in outcome:
                if isinstance(item, BaseException) and not isinstance(item, Exception):
                    raise item  # cancelled: the caller is going away
                gathered.append(item)
            return gathered

        def run_all(inline: bool) -> list[Any]:
            done: list[Any] = []
            for env, options in jobs:
                adapter = self.adapter_for(env)
                func = getattr(env, adapter.reset.name)
                kwargs = adapter.reset.filter_kwargs(options)

                def call(_: Any, func: Any = func, kwargs: dict[str, Any] = kwargs) -> Any:
                    return func(**kwargs)

                placement = adapter.reset_placement
                try:
                    done.append(
                        placement.call_inline(call, None) if inline else placement.timed(call, None)
                    )
                except Exception as exc:
                    done.append(exc)
            return done

        if all(self.adapter_for(env).reset_placement.inline for env, _ in jobs):
            results = run_all(True)  # proven cheap, as steps are (step_placement.py)
        else:
            results = await asyncio.get_running_loop().run_in_executor(self.pool, run_all, False)
        checked: list[Observation | Exception] = []
        for (env, _), result in zip(jobs, results, strict=True):
            if isinstance(result, Exception):
                checked.append(result)
                continue
            try:
                checked.append(
                    self.check_observation(env, self.adapter_for(env).reset.name, result)
                )
            except ContractViolation as exc:
                checked.append(exc)
        return checked

    def bind_step(self, env: Any, tools: bool = False) -> Callable[[Any], Awaitable[Observation]]:
        """``step`` of one instance, bound once per session: the hot path does no lookups.
        ``tools``: bound for MCP tools, whose plain step has a placement of its own."""
        method = self.adapter_for(env).step
        func = getattr(env, method.name)
        check = self.check_observation
        name = method.name
        if self.step_timeout is not None:
            guarded, is_async = self.guarded, method.is_async

            async def step(action: Any) -> Observation:
                result = await guarded(env, is_async, func, action)
                return result if isinstance(result, Observation) else check(env, name, result)
        elif method.is_async:
            return AsyncStep(self, env, func, name)
        elif self._own_threads.get(id(env)) is None:
            adapter = self.adapter_for(env)
            return PlainStep(
                self, env, func, adapter.tool_placement if tools else adapter.step_placement
            )
        else:
            own = self._own_threads[id(env)]  # thread affinity: the session's own thread

            async def step(action: Any) -> Observation:
                result = await asyncio.get_running_loop().run_in_executor(own, func, action)
                return result if isinstance(result, Observation) else check(env, name, result)

        return step

    async def state(self, env: Any) -> State:
        """The instance's state, within ``step_timeout`` (a hung ``state`` never pins a slot)."""
        adapter = self.adapter_for(env)
        if adapter.state_is_property:
            if adapter.state_is_async:

                async def read() -> Any:
                    return await env.state

                read.__qualname__ = f"{type(env).__qualname__}.state"
                result = await self.guarded(env, True, read)
            else:
                result = await self.guarded(env, False, partial(getattr, env, "state"))
        else:
            result = await self.guarded(env, adapter.state_is_async, env.state)
        if not isinstance(result, State):
            raise ContractViolation(
                f"{type(env).__qualname__}.state returned {type(result).__name__}; "
                f"return an instance of State (or your State subclass), e.g. `return self._state`."
            )
        return result

    async def close(self, env: Any) -> None:
        adapter = self.adapter_for(env)
        method = adapter.close
        own = self._own_threads.pop(id(env), None)
        try:
            if method is None:
                return
            if method.is_async:
                await getattr(env, method.name)()
            elif own is not None:
                await asyncio.get_running_loop().run_in_executor(own, getattr(env, method.name))
            else:
                await adapter.close_cost.run(self.pool, getattr(env, method.name))
        finally:
            if own is not None:
                own.shutdown(wait=False)

    def check_observation(self, env: Any, method: str, result: Any) -> Observation:
        """``result`` of ``env``'s ``method`` when it is an observation; else
        :class:`ContractViolation`, saying what to return."""
        if isinstance(result, Observation):
            return result
        expected = self._observation_cls.__name__
        raise ContractViolation(
            f"{type(env).__qualname__}.{method}() returned {type(result).__name__}; "
            f"it must return an instance of {expected}, e.g. `return {expected}(..., reward=..., done=...)`."
        )

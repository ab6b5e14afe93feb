"""First-ready stepping for ``EnvPool``: send to some slots, receive whichever answer first.

::

    await pool.reset()
    await pool.send(range(len(pool)), [policy(None)] * len(pool))
    while training:
        ready = await pool.recv(min_results=8)          # [(slot, result), ...]
        await pool.send([i for i, _ in ready], [policy(r) for _, r in ready])

A slot has at most one request in flight. Episodes that end are reset as Gymnasium's vector
environments define it (``autoreset``):

* ``"next_step"``: the step that ends an episode returns its final observation; the next
  ``send`` to that slot ignores its action and resets, returning the first observation
  (reward ``None``, ``done`` False).
* ``"same_step"``: the step that ends an episode also resets it; its result carries the new
  episode's first observation, the final step's reward, ``done=True``, and the final
  observation in ``final_observation``.
* ``"disabled"``: nothing is reset; call :meth:`EnvPool.send_reset` yourself.

A slot whose session fails (connection lost, timeout, server gone) is reported once as an
``EnvError`` with ``details["episode_failed"] = True`` and gets a fresh session in the
background; its next ``send`` starts a new episode (under ``"disabled"``: send a reset).
A reset a draining replica leaves unanswered (close code 1012) is not a failure when the pool
follows drains (``follow_drain``): the slot gets a session elsewhere and the reset goes there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from ..errors import EnvError
from ..models import StepResult
from ..protocol import CLOSE_SERVICE_RESTART, reply_data
from .port import Result, SessionPort, SlotPool, as_env_error
from .transport import ConnectionLost

AutoReset = Literal["next_step", "same_step", "disabled"]
AUTORESET_MODES: tuple[str, ...] = ("next_step", "same_step", "disabled")
CAPACITY_REACHED = "CAPACITY_REACHED"
_STEP, _RESET = 0, 1


class FirstReady:
    """The in-flight requests and the ready results of one pool's first-ready mode."""

    def __init__(self, pool: SlotPool, autoreset: AutoReset) -> None:
        if autoreset not in AUTORESET_MODES:
            raise ValueError(f"autoreset must be one of {', '.join(AUTORESET_MODES)}")
        self.pool = pool
        self.autoreset = autoreset
        self.ready: list[tuple[int, Result]] = []
        self.inflight: dict[int, _Request] = {}
        self.needs_reset: set[int] = set()
        self.replacing: dict[int, asyncio.Task[None]] = {}  # slot: the batch replacing it
        self.to_replace: set[int] = set()  # slots the next batch replaces
        self.batch: asyncio.Task[None] | None = None  # the batch not yet started
        self.waiter: asyncio.Future[None] | None = None
        self.resending: set[asyncio.Task[None]] = set()  # resets moving off a draining replica
        self.wanted = 0
        self.closed = False

    # -- sending ---------------------------------------------------------------------------
    async def send(
        self, indices: Iterable[int], payloads: Sequence[Any], reset: bool = False
    ) -> None:
        slots = list(indices)
        if len(slots) != len(payloads):
            raise ValueError(f"{len(payloads)} actions for {len(slots)} slots")
        size = self.pool.size
        seen: set[int] = set()
        for i in slots:
            if not 0 <= i < size:
                raise IndexError(f"slot {i} is not in a pool of {size}")
            if i in self.inflight or i in seen:
                raise ValueError(
                    f"slot {i} already has a request in flight; recv() its result first"
                )
            seen.add(i)
        for i, payload in zip(slots, payloads, strict=True):
            if i in self.replacing or self.pool.errors[i] is not None:
                await self._ensure_session(i)
            self.submit(i, payload, reset)

    async def _ensure_session(self, index: int) -> None:
        task = self.replacing.get(index)
        if task is None:
            task = self._start_replacing(index)
        await asyncio.shield(task)

    def submit(self, index: int, payload: Any, reset: bool) -> None:
        pool = self.pool
        client = pool.clients[index]
        error = pool.errors[index]
        if error is not None:
            self.deliver(
                index,
                EnvError(
                    error.code,
                    f"slot {index} has no session ({error.message}); a later send tries again",
                    {**error.details, "episode_failed": True},
                ),
            )
            return
        kind = _RESET if reset or index in self.needs_reset else _STEP
        try:
            frame = (
                client.reset_frame(payload if reset else None)
                if kind
                else client.step_frame(payload)
            )
        except Exception as exc:  # e.g. a dict action that does not validate
            self.deliver(index, as_env_error(exc, "VALIDATION_ERROR"))
            return
        self._send_frame(index, client, kind, frame, None)

    def _send_frame(
        self,
        index: int,
        client: SessionPort,
        kind: int,
        frame: str,
        final: StepResult[Any] | None,
    ) -> None:
        request = _Request(self, index, client, kind, frame, final)
        self.inflight[index] = request
        timeout = self.pool.timeout
        if timeout is not None:
            request.timer = asyncio.get_running_loop().call_later(timeout, request.expire, timeout)
        if not client.submit_to(frame, request):
            request.fail(EnvError("CLOSED", "the session is not connected"))

    # -- replies ---------------------------------------------------------------------------
    def on_reply(self, request: _Request, result: Result) -> None:
        index = request.index
        final = request.final
        if isinstance(result, StepResult):
            if request.kind == _RESET:
                self.needs_reset.discard(index)
            if final is not None:  # same_step: the reset after a final step
                result = StepResult(
                    observation=result.observation,
                    reward=final.reward,
                    done=True,
                    metadata=final.metadata,
                    final_observation=final.observation,
                )
            elif result.done and request.kind == _STEP:
                if self.autoreset == "next_step":
                    self.needs_reset.add(index)
                elif self.autoreset == "same_step":
                    client = request.client
                    self._send_frame(index, client, _RESET, client.reset_frame(None), result)
                    return
        elif final is not None:
            # The final step's result stands; the reset is retried by the next send.
            self.needs_reset.add(index)
            result = StepResult(
                observation=final.observation,
                reward=final.reward,
                done=True,
                metadata=final.metadata,
                final_observation=final.observation,
            )
        elif result.code == CAPACITY_REACHED:
            self.on_failure(request, result)
            return
        self.deliver(index, result)

    def on_failure(self, request: _Request, error: EnvError) -> None:
        index = request.index
        if (
            error.details.get("close_code") == CLOSE_SERVICE_RESTART
            and request.kind == _RESET
            and self.pool.follow_drain
            and not self.closed
        ):
            # a draining replica: still in flight while the slot moves and resets elsewhere
            self.pool.fail_slot(index, error)
            task = asyncio.get_running_loop().create_task(
                self._reset_elsewhere(request, self._start_replacing(index))
            )
            self.resending.add(task)
            task.add_done_callback(self.resending.discard)
            return
        self.pool.fail_slot(index, error)
        self.inflight.pop(index, None)
        self.needs_reset.add(index)
        if not self.closed:
            self._start_replacing(index)
        self.deliver(
            index,
            EnvError(
                error.code,
                f"slot {index}: the episode failed ({error.message}); the slot gets a fresh "
                "session and its next send starts a new episode",
                {**error.details, "episode_failed": True},
            ),
        )

    async def _reset_elsewhere(self, request: _Request, replacing: asyncio.Task[None]) -> None:
        await asyncio.shield(replacing)
        if self.closed:
            return
        index = request.index
        pool = self.pool
        error = pool.errors[index]
        if error is not None:  # no replica took it: report it as any failed slot
            self.inflight.pop(index, None)
            self.on_failure(request, error)
            return
        pool.drain_moves += 1
        self._send_frame(index, pool.clients[index], _RESET, request.frame, request.final)

    def _start_replacing(self, index: int) -> asyncio.Task[None]:
        """Queue slot ``index`` for a fresh session. Slots failing together (a server gone
        takes many) are replaced in one batch placed on one reading of ``/health``: replaced
        one by one, each would read the same free capacity and they would pile onto one server."""
        self.to_replace.add(index)
        task = self.batch
        if task is None:
            task = self.batch = asyncio.get_running_loop().create_task(self._replace_batch())
        self.replacing[index] = task
        return task

    async def _replace_batch(self) -> None:
        await asyncio.sleep(0)  # the failures delivered in the same turn of the loop join in
        slots = sorted(self.to_replace)
        self.to_replace.clear()
        task, self.batch = self.batch, None  # a later failure starts the next batch
        try:
            # a slot left without a session keeps its error: its next send reports it and
            # tries again
            await self.pool.replace_slots(slots)
        finally:
            for i in slots:
                if self.replacing.get(i) is task:
                    del self.replacing[i]

    def deliver(self, index: int, result: Result) -> None:
        self.inflight.pop(index, None)
        self.ready.append((index, result))
        waiter = self.waiter
        if waiter is not None and len(self.ready) >= self.wanted and not waiter.done():
            waiter.set_result(None)

    # -- receiving -------------------------------------------------------------------------
    async def recv(self, min_results: int, timeout: float | None) -> list[tuple[int, Result]]:
        if min_results < 1:
            raise ValueError("min_results must be at least 1")
        if not self.ready and not self.inflight:
            raise RuntimeError("nothing is in flight: pool.send(indices, actions) first")
        wanted = min(min_results, len(self.ready) + len(self.inflight))
        if len(self.ready) < wanted:
            waiter = self.waiter = asyncio.get_running_loop().create_future()
            self.wanted = wanted
            try:
                await asyncio.wait_for(waiter, timeout)
            except (TimeoutError, asyncio.TimeoutError):
                pass  # what is ready by now
            finally:
                self.waiter = None
        ready, self.ready = self.ready, []
        return ready

    async def close(self) -> None:
        self.closed = True
        tasks = [*self.replacing.values(), *self.resending]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for request in list(self.inflight.values()):
            request.cancel_timer()
        self.inflight.clear()
        self.ready.clear()


class _Request:
    """One slot's request in flight; receives its reply straight from the connection."""

    __slots__ = ("client", "final", "finished", "frame", "index", "kind", "owner", "timer")

    def __init__(
        self,
        owner: FirstReady,
        index: int,
        client: SessionPort,
        kind: int,
        frame: str,
        final: StepResult[Any] | None,
    ) -> None:
        self.owner = owner
        self.index = index
        self.client = client
        self.kind = kind
        self.frame = frame
        self.final = final
        self.finished = False
        self.timer: asyncio.TimerHandle | None = None

    def done(self) -> bool:
        return self.finished

    def cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def set_result(self, raw: str | bytes) -> None:
        if self.finished:
            return
        self.finished = True
        if self.timer is not None:
            self.cancel_timer()
        client = self.client
        result: Result
        try:
            result = client.parse_result(reply_data(raw))
        except EnvError as error:
            result = error
        except Exception as exc:
            result = as_env_error(exc, "CLIENT_ERROR")
        if not self.owner.closed:
            self.owner.on_reply(self, result)

    def set_exception(self, exception: BaseException) -> None:
        if self.finished:
            return
        lost = (
            exception if isinstance(exception, ConnectionLost) else ConnectionLost(str(exception))
        )
        self.fail(self.client.lost(lost))

    def expire(self, seconds: float) -> None:
        if not self.finished:
            self.fail(self.client.timed_out(seconds))

    def fail(self, error: EnvError) -> None:
        if self.finished:
            return
        self.finished = True
        self.cancel_timer()
        if not self.owner.closed:
            self.owner.on_failure(self, error)

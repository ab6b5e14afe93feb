"""One step, every way in: the inline frame, the ASGI WebSocket loop, ``POST /step``, vector
sessions and MCP tools answered by ``step()``.

Each way in parses its request and writes its reply in its own format; what happens in
between is decided and run here, once: the action is checked (:meth:`Stepper.action`: its
field count, then the action model), and :meth:`Stepper.run` runs it on the session's
environment — inline, returning the observation at once, when the session's plain ``step()``
is proven cheap (``step_placement.py``), else as a coroutine to await (the thread pool, an
``async def step``, a step timeout) — and counts it for ``/metrics``.

The inline frame path (``inline_frames.py``) calls :meth:`Stepper.run` only for a session whose
step runs inline, so the reply is ready before the protocol reads the next frame; its fence
(the ``inline_frames`` setting and the uvicorn / websockets versions it is tested with) lives
beside that path, in ``inline_frames.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from time import perf_counter
from typing import Any, Protocol

from pydantic import ValidationError

from openenv_runtime.models import Observation
from openenv_runtime.server.guards.limits import invalid_action_text, too_many_fields
from openenv_runtime.server.guards.limits import validation_errors as bounded_validation_errors
from openenv_runtime.server.metrics import Tally
from openenv_runtime.server.running.adapter import AsyncStep, EnvRunner, StepTimeout
from openenv_runtime.server.running.step_placement import PlainStep

Outcomes = tuple[int, int, int, int, int]
"""The /metrics keys of one way in: ok, done, invalid, error, timeout (``metrics.WS_OK``, ...)."""


class Stepped(Protocol):
    """What a step needs of its session (``sessions.session.Session``, or an MCP tool call's
    :class:`ToolCall`): the environment, and its step once bound (``None`` before)."""

    env: Any
    step: Any


class ToolCall:
    """An MCP tool answered by ``step()`` on ``env`` (a session's or a short-lived instance):
    what :meth:`Stepper.run` needs, its step bound by the MCP stepper's ``bind``."""

    __slots__ = ("env", "step")

    def __init__(self, env: Any) -> None:
        self.env = env
        self.step: Any = None


class ActionRefused(Exception):
    """The action was refused before any step ran: ``message`` says why; ``extra`` holds the
    first validation errors and their count (``errors``, ``error_count``) when the model
    refused it."""

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra


def invalid_action(exc: ValidationError) -> dict[str, Any]:
    """An invalid action's reply: a ``message`` naming the first wrong field, the ``errors``
    (the first few) and ``error_count``."""
    errors, total = bounded_validation_errors(exc)
    return {"message": invalid_action_text(errors, total), "errors": errors, "error_count": total}


class Stepper:
    """Checks and runs the steps of one way in, counted under its ``outcomes`` in ``tally``
    (``None``: not counted). ``bind`` binds an environment's step on its session's first
    step (default: ``runner.bind_step``)."""

    __slots__ = (
        "DONE",
        "ERROR",
        "INVALID",
        "OK",
        "TIMEOUT",
        "bind",
        "max_action_fields",
        "runner",
        "tally",
        "validate_action",
    )

    def __init__(
        self,
        runner: EnvRunner,
        validate_action: Callable[[Any], Any],
        max_action_fields: int,
        tally: Tally | None,
        outcomes: Outcomes,
        bind: Callable[[Any], Any] | None = None,
    ) -> None:
        self.runner = runner
        self.validate_action = validate_action
        self.max_action_fields = max_action_fields
        self.tally = tally
        self.OK, self.DONE, self.INVALID, self.ERROR, self.TIMEOUT = outcomes
        self.bind = runner.bind_step if bind is None else bind

    def action(self, data: Any) -> Any:
        """The action ``data`` describes, validated; :class:`ActionRefused` (counted as an
        invalid step) when it has too many fields or the model refuses it. (:meth:`run` checks
        the same; a caller that must refuse an action early, before waiting for its session,
        calls this first and hands :meth:`run` the action, which the model then passes as is.)"""
        if type(data) is dict and len(data) > self.max_action_fields:
            raise self._refused(data, None)
        try:
            return self.validate_action(data)
        except ValidationError as exc:
            raise self._refused(data, exc) from None

    def run(self, session: Stepped, data: Any) -> Observation | Coroutine[Any, Any, Observation]:
        """One step of ``session``: the action ``data`` describes, checked (:meth:`action`),
        then run by the session's step (bound on first use) — inline when its plain ``step()``
        is proven cheap, returning the observation, else in a coroutine that returns it.
        Counted either way. :class:`ActionRefused` when the action is refused; an exception of
        the environment's (or :class:`~.adapter.StepTimeout`) propagates."""
        # self.action(data), unrolled: one call less on the hot path
        if type(data) is dict and len(data) > self.max_action_fields:
            raise self._refused(data, None)
        try:
            action = self.validate_action(data)
        except ValidationError as exc:
            raise self._refused(data, exc) from None
        step = session.step
        if step is None:
            step = session.step = self.bind(session.env)
        if type(step) is not PlainStep or not step.placement.inline:
            return self._awaited(step, action)
        start = perf_counter()
        tally = self.tally
        try:
            obs = step.placement.call_inline(step.func, action)  # PlainStep.now, unrolled
            if not isinstance(obs, Observation):
                obs = step.checked(obs)
        except Exception:
            if tally is not None:
                tally.step(self.ERROR, perf_counter() - start)
            raise
        if tally is not None:
            tally.step(self.DONE if obs.done else self.OK, perf_counter() - start)
        return obs

    def _refused(self, data: Any, exc: ValidationError | None) -> ActionRefused:
        """The refusal of an action with too many fields (``exc`` None) or that the model
        refused (``exc``), counted as an invalid step."""
        if self.tally is not None:
            self.tally.steps[self.INVALID] += 1
        if exc is None:
            return ActionRefused(str(too_many_fields(data, self.max_action_fields)))
        return ActionRefused(**invalid_action(exc))

    async def _awaited(self, step: Any, action: Any) -> Observation:
        start = perf_counter()
        tally = self.tally
        try:
            kind = type(step)
            if kind is PlainStep or kind is AsyncStep:
                # the pool's future or the environment's coroutine, awaited here: the step's own
                # __call__ unrolled, one coroutine less per step
                result = await step.pending(action)
                obs: Observation = (
                    result if isinstance(result, Observation) else step.checked(result)
                )
            else:
                obs = await step(action)
        except Exception as exc:
            if tally is not None:
                failed = self.TIMEOUT if isinstance(exc, StepTimeout) else self.ERROR
                tally.step(failed, perf_counter() - start)
            raise
        if tally is not None:
            tally.step(self.DONE if obs.done else self.OK, perf_counter() - start)
        return obs

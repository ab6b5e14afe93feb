"""What the pool, the blocking twins and checkpoints need of a session, as Protocols.

``EnvClient`` satisfies :class:`SessionPort` and :class:`CheckpointSession`; ``EnvPool``
satisfies :class:`SlotPool`. The modules that drive a session (``pool``, ``batch``,
``first_ready``, ``checkpoint``, ``sync``) name these ports, never the classes, so they sit
below ``env_client`` and ``pool`` and import nothing above them (no import circle, not even
a type-only one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import EnvError
from ..models import StepResult
from .transport import ConnectionLost, ReplySink

if TYPE_CHECKING:
    from typing import Self  # Python 3.11+; the runtime also supports 3.10

Result = StepResult[Any] | EnvError
"""One slot's outcome in a pool: its ``StepResult``, or the ``EnvError`` that ended it."""


class SessionPort(Protocol):
    """The pool's port onto one session: frames, sending, reading a reply, ending it.

    Frames are built by :mod:`openenv_runtime.protocol`; ``_submit_to`` sends one with no
    coroutine per request (its raw reply goes to ``sink``), ``_request`` sends one and waits;
    ``_unwrap`` then ``_parse_result`` read a reply; ``_lost`` / ``_timed_out`` end the
    session and say why.
    """

    @property
    def base_url(self) -> str: ...

    async def connect(self) -> Any: ...

    def abort(self) -> None: ...

    async def close(self) -> None: ...

    def _reset_frame(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> str: ...

    def _step_frame(self, action: Any) -> str: ...

    def _submit_to(self, frame: str, sink: ReplySink) -> bool: ...

    async def _request(self, frame: str) -> dict[str, Any]: ...

    def _unwrap(self, raw: str | bytes) -> dict[str, Any]: ...

    def _parse_result(self, data: dict[str, Any]) -> StepResult[Any]: ...

    def _lost(self, exc: ConnectionLost) -> EnvError: ...

    def _timed_out(self, seconds: float | None = None) -> EnvError: ...


class SlotPool(Protocol):
    """What a pool's helpers (lockstep batches, first-ready) need of the pool."""

    @property
    def size(self) -> int: ...

    @property
    def timeout(self) -> float | None: ...

    follow_drain: bool
    drain_moves: int

    @property
    def _clients(self) -> Sequence[SessionPort]: ...

    @property
    def _errors(self) -> Sequence[EnvError | None]: ...

    def _fail(self, index: int, error: EnvError) -> EnvError: ...

    async def replace_slots(self, slots: Sequence[int]) -> list[int]: ...


class CheckpointSession(Protocol):
    """What ``checkpoint`` / ``restore`` / ``fork`` need of a session."""

    @property
    def headers(self) -> dict[str, str]: ...

    async def connect(self) -> Any: ...

    async def close(self) -> None: ...

    async def _request(self, frame: str) -> dict[str, Any]: ...

    @property
    def base_url(self) -> str: ...

    def _twin(self, base_url: str | None = None) -> Self:
        """A client of the same class and options (not connected), of ``base_url`` (default:
        this client's server)."""
        ...


def as_env_error(exc: BaseException, code: str = "CONNECTION_ERROR") -> EnvError:
    """``exc`` as the ``EnvError`` a slot holds (an ``EnvError`` stays as it is)."""
    if isinstance(exc, EnvError):
        return exc
    return EnvError(code, f"{type(exc).__name__}: {exc}")

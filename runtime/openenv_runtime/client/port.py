"""What the pool, the blocking twins and checkpoints need of a session, as Protocols.

``EnvClient`` satisfies :class:`SessionPort` and :class:`CheckpointSession`; ``EnvPool``
satisfies :class:`SlotPool`. The modules that drive a session (``pool``, ``batch``,
``first_ready``, ``checkpoint``, ``sync``) name these ports, never the classes, so they sit
below ``env_client`` and ``pool`` and import nothing above them (no import circle, not even
a type-only one).

Every member here is public: the pool and its sessions meet only through these names (as an
HTTP client meets its transport through one public method), never through each other's
underscore attributes (``tests/unit/test_private_access.py`` keeps it so). They are the seam
between the pool and a session, not application code's API.
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

    The public seam between a session and what drives it (as an HTTP client's transport has
    one method it is driven through), not for application code. ``reset_frame`` /
    ``step_frame`` build a frame (:mod:`openenv_runtime.protocol`); ``submit_to`` sends one
    with no coroutine per request (its raw reply goes to ``sink``), ``request_frame`` sends one
    and waits for the reply's ``data``; ``parse_result`` reads that ``data`` (a raw reply:
    ``parse_result(reply_data(raw))``); ``lost`` / ``timed_out`` end the session and say why.
    """

    @property
    def base_url(self) -> str: ...

    async def connect(self) -> Any: ...

    def abort(self) -> None: ...

    async def close(self) -> None: ...

    def reset_frame(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> str: ...

    def step_frame(self, action: Any) -> str: ...

    def submit_to(self, frame: str, sink: ReplySink) -> bool: ...

    async def request_frame(self, frame: str) -> dict[str, Any]: ...

    def parse_result(self, data: dict[str, Any]) -> StepResult[Any]: ...

    def lost(self, exc: ConnectionLost) -> EnvError: ...

    def timed_out(self, seconds: float | None = None) -> EnvError: ...


class SlotPool(Protocol):
    """What a pool's helpers (lockstep batches, first-ready) need of the pool.

    ``clients[i]`` / ``errors[i]`` are slot i's session and the error that ended it (None while
    it is well); ``fail_slot`` records such an error. The pool's seam with its helpers.
    """

    @property
    def size(self) -> int: ...

    @property
    def timeout(self) -> float | None: ...

    follow_drain: bool
    drain_moves: int

    @property
    def clients(self) -> Sequence[SessionPort]: ...

    @property
    def errors(self) -> Sequence[EnvError | None]: ...

    def fail_slot(self, index: int, error: EnvError) -> EnvError: ...

    async def replace_slots(self, slots: Sequence[int]) -> list[int]: ...


class CheckpointSession(Protocol):
    """What ``checkpoint`` / ``restore`` / ``fork`` need of a session."""

    @property
    def headers(self) -> dict[str, str]: ...

    async def connect(self) -> Any: ...

    async def close(self) -> None: ...

    async def request_frame(self, frame: str) -> dict[str, Any]: ...

    @property
    def base_url(self) -> str: ...

    def twin(self, base_url: str | None = None) -> Self:
        """A client of the same class and options (not connected), of ``base_url`` (default:
        this client's server)."""
        ...


def as_env_error(exc: BaseException, code: str = "CONNECTION_ERROR") -> EnvError:
    """``exc`` as the ``EnvError`` a slot holds (an ``EnvError`` stays as it is)."""
    if isinstance(exc, EnvError):
        return exc
    return EnvError(code, f"{type(exc).__name__}: {exc}")

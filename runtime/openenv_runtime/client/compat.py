"""What code written for the reference's client expects of ours.

* Plain blocking calls: ``env.reset()`` / ``env.step(a)`` / ``env.state()`` outside an event
  loop block and return the result; inside a running loop they return the awaitable as
  before (``await env.reset()``). ``.sync()`` keeps working. One client is used from one
  side: a connection opened by blocking calls lives on a background loop.
* Constructor names ``connect_timeout_s``, ``message_timeout_s``, ``max_message_size_mb``,
  ``websocket_ping_interval_s``, ``websocket_ping_timeout_s``, ``mode``.
* ``new_session()``, ``disconnect()``, ``with env:`` and the ``_step_payload`` hook.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

from ..blocking import async_call, install_blocking, run_blocking

# The reference's constructor keywords → ours (with a unit conversion where needed).
REFERENCE_OPTION_NAMES: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "connect_timeout_s": ("connect_timeout", lambda v: v),
    "message_timeout_s": ("message_timeout", lambda v: v),
    "max_message_size_mb": ("max_message_bytes", lambda v: int(float(v) * 1024 * 1024)),
    "websocket_ping_interval_s": ("ping_interval", lambda v: v),
    "websocket_ping_timeout_s": ("ping_timeout", lambda v: v),
}


def reference_options(options: dict[str, Any]) -> dict[str, Any]:
    """Our constructor keywords for the reference's; unknown names raise ``TypeError``."""
    mapped: dict[str, Any] = {}
    for key, value in options.items():
        if key in REFERENCE_OPTION_NAMES:
            ours, convert = REFERENCE_OPTION_NAMES[key]
            mapped[ours] = convert(value)
        elif key == "mode":
            client_mode(value)  # checked here; stored by EnvClient.__init__
        elif key == "provider":
            # A running provider the client owns: close() stops it, as in the reference.
            mapped["provider"] = value
        else:
            raise TypeError(f"unexpected keyword argument {key!r}")
    return mapped


def client_mode(mode: str | None) -> str:
    """``simulation`` (reset/step, the default) or ``production`` (tools); ``OPENENV_CLIENT_MODE``."""
    import os

    value = (mode or os.environ.get("OPENENV_CLIENT_MODE") or "simulation").strip().lower()
    if value not in ("simulation", "production"):
        raise ValueError(
            f"mode must be 'simulation' or 'production' (argument or OPENENV_CLIENT_MODE), got {value!r}"
        )
    return value


class ReferenceClientMixin:
    """Methods the reference's client has and ours lacks; mixed into ``EnvClient``."""

    BLOCKING_EXTRA: tuple[str, ...] = ("new_session", "disconnect")

    # Set by EnvClient.__init__. Declared, not read through ``self.__dict__``: touching an
    # instance's ``__dict__`` turns its attributes into a plain dict, and every attribute
    # read and write of the client (several per step) then takes CPython's slower path.
    url: str
    connect_timeout: float
    message_timeout: float | None
    _openenv_mode: str

    @property
    def _mode(self) -> str:
        """``simulation`` or ``production``, fixed when the client is made."""
        return getattr(self, "_openenv_mode", "simulation")

    @_mode.setter
    def _mode(self, value: str) -> None:
        if hasattr(self, "_openenv_mode"):
            raise AttributeError("a client's mode is fixed when it is made; create another client")
        self._openenv_mode = value

    # The reference client's attribute names for ours, read-only (some trainers read them).
    @property
    def _ws_url(self) -> str:
        return self.url

    @property
    def _connect_timeout(self) -> float:
        return float(self.connect_timeout)

    @property
    def _message_timeout(self) -> float | None:
        return self.message_timeout

    async def new_session(self) -> typing.Self:
        """Another connected client (its own server session) with the same settings."""
        other = self.twin()  # type: ignore[attr-defined]
        await async_call(other, "connect")
        return other  # type: ignore[no-any-return]

    async def disconnect(self) -> None:
        """End the session and close the connection (``close`` under the reference's name)."""
        await async_call(self, "close")

    def __enter__(self) -> Any:
        run_blocking(async_call(self, "connect"))
        return self

    def __exit__(self, *exc_info: object) -> None:
        run_blocking(async_call(self, "close"))


install_blocking(ReferenceClientMixin)

"""Blocking calls on async clients: the one home for running a client's coroutines from plain code.

One daemon thread runs the event loop that every blocking call of the process uses
(:func:`background_loop`). :func:`install_blocking` makes a client class's request methods
block when called with no running loop (and return the awaitable inside one);
:func:`async_call` gets the coroutine of such a method either way.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

BLOCKING_METHODS = ("connect", "reset", "step", "state", "close")

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def background_loop() -> asyncio.AbstractEventLoop:
    """One daemon thread runs the event loop shared by every sync client of the process."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(
                target=loop.run_forever, name="openenv-client-loop", daemon=True
            ).start()
            _loop = loop
        return _loop


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the shared background loop of the sync clients and wait for it."""
    return asyncio.run_coroutine_threadsafe(coro, background_loop()).result()


def blocking_outside_loop(method: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., Any]:
    """Wrap an ``async def`` method: a plain call with no running loop blocks for the result."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        coro = method(self, *args, **kwargs)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return run_blocking(coro)
        return coro

    call.__openenv_async__ = method  # type: ignore[attr-defined]
    return call


def async_call(client: Any, name: str, *args: Any, **kwargs: Any) -> Coroutine[Any, Any, Any]:
    """The coroutine of ``client.<name>(...)``, whether or not the method was wrapped."""
    method = getattr(type(client), name)
    raw = getattr(method, "__openenv_async__", method)
    return raw(client, *args, **kwargs)  # type: ignore[no-any-return]


def install_blocking(cls: type) -> None:
    """Wrap ``cls``'s own async request methods (subclasses' overrides included)."""
    for name in BLOCKING_METHODS + tuple(getattr(cls, "BLOCKING_EXTRA", ())):
        method = cls.__dict__.get(name)
        if method is not None and asyncio.iscoroutinefunction(method):
            setattr(cls, name, blocking_outside_loop(method))

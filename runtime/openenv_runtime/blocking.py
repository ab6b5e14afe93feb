"""Running coroutines from plain code: the one home for blocking helpers.

* :func:`run_blocking` runs a coroutine on the shared background loop: one daemon thread
  runs the event loop that every blocking client call of the process uses
  (:func:`background_loop`), so connections opened by blocking calls live on.
* :func:`run_to_completion` runs a coroutine on a loop of its own (a thread when this
  thread already runs a loop), for one-off calls such as an MCP server's tool list.
* :func:`install_blocking` makes a client class's request methods block when called with no
  running loop (and return the awaitable inside one); :func:`async_call` gets the coroutine
  of such a method either way.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

BLOCKING_METHODS = ("connect", "reset", "step", "state", "schema", "close")

_loop: asyncio.AbstractEventLoop | None = None
_NO_ARG: Any = object()  # "no positional argument" for the wrappers of blocking_outside_loop
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
    def call(self: Any, arg: Any = _NO_ARG, /, *args: Any, **kwargs: Any) -> Any:
        # One positional argument (``step(action)``) or none (``state()``) is passed on
        # without repacking: this wrapper runs on every step of every client.
        if args or kwargs:
            coro = method(self, **kwargs) if arg is _NO_ARG else method(self, arg, *args, **kwargs)
        elif arg is _NO_ARG:
            coro = method(self)
        else:
            coro = method(self, arg)
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


def run_to_completion(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from plain code, even when this thread runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # handed back to the caller below
            box["error"] = exc

    thread = threading.Thread(target=target, name="openenv-mcp-call")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]

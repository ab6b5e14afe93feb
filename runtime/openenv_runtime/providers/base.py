"""What every provider is: start N servers, hand back their base URLs, always stop them.

A provider is started once (``start()`` returns the base URLs once every replica's
``/health`` answers) and stopped once (``stop()`` is idempotent). Whatever happens in
between — an exception, Ctrl-C, ``SIGTERM``, the interpreter exiting — what it started is
stopped: ``start()`` cleans up after itself when it fails or is interrupted half-way,
every started provider is registered for an ``atexit`` stop, and ``SIGTERM`` (whose default
would end the process without running ``atexit``) is turned into a normal exit while a
provider is running.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import signal
import threading
import time
import typing
import weakref
from abc import ABC, abstractmethod

from ..errors import EnvError
from ..http_reads import read_json

_live: weakref.WeakSet[Provider] = weakref.WeakSet()
_live_lock = threading.Lock()
_hooks_installed = False


class ProviderError(EnvError):
    """A provider could not start (or reach) its servers; the message says what to do."""

    def __new__(cls, message: str) -> ProviderError:
        return RuntimeError.__new__(cls)  # EnvError.__new__ wants a code first

    def __init__(self, message: str) -> None:
        super().__init__("PROVIDER_ERROR", message)

    def __str__(self) -> str:
        return self.message


def missing_extra(package: str, extra: str) -> ProviderError:
    return ProviderError(
        f"this provider needs the {package!r} package: pip install 'openenv-runtime[{extra}]'"
    )


def _stop_all() -> None:
    with _live_lock:
        providers = list(_live)
    for provider in providers:
        with contextlib.suppress(Exception):
            provider.stop()


def _on_sigterm(signum: int, frame: object) -> None:
    # Unwind like Ctrl-C does, so `with` blocks, `finally` clauses and atexit all run.
    raise SystemExit(128 + signum)


def _install_hooks() -> None:
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(_stop_all)
    if threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
                signal.signal(signal.SIGTERM, _on_sigterm)


class Provider(ABC):
    """Starts replicas of an environment server and stops them.

    Use it as a context manager (``with`` or ``async with``), or call :meth:`start` and
    :meth:`stop` yourself::

        with ProcessProvider("my_env.server.app:app", replicas=2) as urls:
            ...  # urls: ["http://127.0.0.1:41234", "http://127.0.0.1:41235"]
    """

    startup_timeout: float = 120.0

    def __init__(self) -> None:
        self.urls: list[str] = []
        self._started = False
        self._lock = threading.RLock()

    # -- what each provider implements ---------------------------------------------------------
    @abstractmethod
    def _launch(self) -> list[str]:
        """Start the replicas; return their base URLs (not necessarily healthy yet)."""

    @abstractmethod
    def _teardown(self) -> None:
        """Stop and remove everything started so far (also after a partial ``_launch``)."""

    def _check_alive(self, index: int) -> str | None:
        """Why replica ``index`` can no longer become healthy (with its last log lines), or None."""
        return None

    # -- the interface ----------------------------------------------------------------------------
    def start(self) -> list[str]:
        """Start the replicas and wait until each ``/health`` answers; returns their base URLs.

        On any failure (or Ctrl-C) everything started so far is stopped before the error
        propagates.
        """
        with self._lock:
            if self._started:
                return list(self.urls)
            _install_hooks()
            with _live_lock:
                _live.add(self)
            self._started = True
            try:
                self.urls = self._launch()
                self.wait_healthy()
            except BaseException:
                self.stop()
                raise
            return list(self.urls)

    def stop(self) -> None:
        """Stop every replica. Safe to call more than once, and before or after ``start``."""
        with self._lock:
            if not self._started:
                return
            self._started = False
            with _live_lock:
                _live.discard(self)
            try:
                self._teardown()
            finally:
                self.urls = []

    def wait_healthy(self, timeout: float | None = None) -> None:
        """Poll every URL's ``/health`` until it answers; fail early when a replica dies."""
        deadline = time.monotonic() + (self.startup_timeout if timeout is None else timeout)
        pending = dict(enumerate(self.urls))
        while pending:
            for index, url in list(pending.items()):
                if health(url, timeout=2.0) is not None:
                    del pending[index]
                    continue
                reason = self._check_alive(index)
                if reason is not None:
                    raise ProviderError(reason)
            if not pending:
                break
            if time.monotonic() > deadline:
                waiting = ", ".join(pending.values())
                raise ProviderError(
                    f"{waiting} did not answer /health within {self.startup_timeout:g}s; "
                    "raise startup_timeout if the environment is slow to start"
                )
            time.sleep(0.1)

    @property
    def running(self) -> bool:
        return self._started

    def __enter__(self) -> list[str]:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> list[str]:
        return await self.astart()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.astop()

    async def astart(self) -> list[str]:
        """``start()`` on a worker thread, so the event loop keeps running meanwhile."""
        try:
            return await asyncio.to_thread(self.start)
        except asyncio.CancelledError:
            await asyncio.to_thread(self.stop)
            raise

    async def astop(self) -> None:
        await asyncio.to_thread(self.stop)

    def __repr__(self) -> str:
        state = f"running at {self.urls}" if self._started else "stopped"
        return f"<{type(self).__name__} {state}>"


def health(
    base_url: str, timeout: float = 5.0, token: str | None = None
) -> dict[str, typing.Any] | None:
    """The JSON of ``GET base_url/health``, or None while it does not answer 200."""
    try:
        return read_json(base_url, "/health", token=token, timeout=timeout)
    except EnvError:
        return None


def wait_until_healthy(
    base_url: str,
    timeout_s: float,
    what: str = "Server",
    *,
    token: str | None = None,
    interval_s: float = 0.2,
    probe_timeout_s: float = 2.0,
    alive: typing.Callable[[], str | None] | None = None,
) -> dict[str, typing.Any]:
    """Poll ``base_url/health`` until it answers 200 and return its JSON.

    The one "wait until healthy" loop. ``alive`` (when given) is asked between polls and
    returns why the server can no longer come up (its process exited, ...), raised at once as
    ``RuntimeError``; after ``timeout_s``, ``TimeoutError`` naming ``what``.
    """
    deadline = time.monotonic() + timeout_s
    while (found := health(base_url, timeout=probe_timeout_s, token=token)) is None:
        reason = alive() if alive is not None else None
        if reason is not None:
            raise RuntimeError(reason)
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what} at {base_url} did not become ready within {timeout_s:g}s")
        time.sleep(interval_s)
    return found


def last_lines(text: str, count: int = 20) -> str:
    lines = text.rstrip().splitlines()[-count:]
    return "\n".join("    " + line for line in lines) or "    (no output)"

"""Server settings, resolved once: explicit parameter, then environment variable, then default."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import EnvironmentContractError

DEFAULT_MAX_CONCURRENT_ENVS = 100
DEFAULT_SESSION_TIMEOUT = 600.0
DEFAULT_SYNC_POOL_SIZE = 64
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """How one server process behaves. Build it with :func:`resolve_config`."""

    max_concurrent_envs: int = DEFAULT_MAX_CONCURRENT_ENVS
    """Sessions (WebSocket and HTTP together) this worker holds at once."""
    session_timeout: float | None = DEFAULT_SESSION_TIMEOUT
    """Seconds a session may stay idle (no message, no step running) before it is closed; None: never."""
    api_key: str | None = None
    """When set, every route but /health requires ``Authorization: Bearer <api_key>``."""
    enable_web_interface: bool = True
    """Serve the interactive page at /web."""
    sync_pool_size: int = DEFAULT_SYNC_POOL_SIZE
    """Threads of the one pool that runs plain (non-async) environment methods."""
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """Largest frame accepted; a larger one gets VALIDATION_ERROR and the session lives on."""


def _env(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else None


def _parse_int(name: str, raw: str, minimum: int) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise EnvironmentContractError(
            f"{name}={raw!r} is not a whole number; set it to e.g. {name}=100."
        ) from None
    if value < minimum:
        raise EnvironmentContractError(f"{name}={value} must be at least {minimum}.")
    return value


def _parse_timeout(name: str, raw: str) -> float | None:
    try:
        value = float(raw)
    except ValueError:
        raise EnvironmentContractError(
            f"{name}={raw!r} is not a number of seconds; use e.g. {name}=600 (0 disables)."
        ) from None
    return None if value <= 0 else value


def parse_bool(raw: str) -> bool:
    """``1/true/yes/on`` → True, ``0/false/no/off`` → False (case-insensitive)."""
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise EnvironmentContractError(f"{raw!r} is not a boolean; use true or false.")


def resolve_config(
    *,
    max_concurrent_envs: int | None = None,
    session_timeout: float | None = None,
    api_key: str | None = None,
    enable_web_interface: bool | None = None,
    sync_pool_size: int | None = None,
    max_message_bytes: int | None = None,
) -> ServerConfig:
    """Resolve each setting from its parameter, else its environment variable, else the default.

    Environment variables: ``MAX_CONCURRENT_ENVS``, ``SESSION_TIMEOUT`` (seconds, 0 = never),
    ``OPENENV_API_KEY``, ``ENABLE_WEB_INTERFACE``, ``OPENENV_SYNC_POOL_SIZE``,
    ``OPENENV_MAX_MESSAGE_BYTES``.
    """
    if max_concurrent_envs is None:
        raw = _env("MAX_CONCURRENT_ENVS")
        max_concurrent_envs = (
            _parse_int("MAX_CONCURRENT_ENVS", raw, 1) if raw else DEFAULT_MAX_CONCURRENT_ENVS
        )
    elif max_concurrent_envs < 1:
        raise EnvironmentContractError(
            f"max_concurrent_envs={max_concurrent_envs} must be at least 1."
        )

    if session_timeout is None:
        raw = _env("SESSION_TIMEOUT")
        session_timeout = _parse_timeout("SESSION_TIMEOUT", raw) if raw else DEFAULT_SESSION_TIMEOUT
    elif session_timeout <= 0:
        session_timeout = None

    if api_key is None:
        api_key = _env("OPENENV_API_KEY")

    if enable_web_interface is None:
        raw = _env("ENABLE_WEB_INTERFACE")
        enable_web_interface = parse_bool(raw) if raw else True

    if sync_pool_size is None:
        raw = _env("OPENENV_SYNC_POOL_SIZE")
        sync_pool_size = (
            _parse_int("OPENENV_SYNC_POOL_SIZE", raw, 1) if raw else DEFAULT_SYNC_POOL_SIZE
        )

    if max_message_bytes is None:
        raw = _env("OPENENV_MAX_MESSAGE_BYTES")
        max_message_bytes = (
            _parse_int("OPENENV_MAX_MESSAGE_BYTES", raw, 1024) if raw else DEFAULT_MAX_MESSAGE_BYTES
        )

    return ServerConfig(
        max_concurrent_envs=max_concurrent_envs,
        session_timeout=session_timeout,
        api_key=api_key,
        enable_web_interface=enable_web_interface,
        sync_pool_size=sync_pool_size,
        max_message_bytes=max_message_bytes,
    )

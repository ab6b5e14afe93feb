"""Settings of a session's life beyond one connection: resume grace, drain timeout, warm pool.

Resolved once, from the ``create_app`` argument, else the environment variable, else the
default. (These three join the server's one typed settings object when it exists.)
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import EnvironmentContractError

DEFAULT_RESUME_GRACE = 30.0
DEFAULT_DRAIN_TIMEOUT = 30.0
DEFAULT_WARM_POOL = 0


@dataclass(frozen=True, slots=True)
class LifecycleSettings:
    resume_grace: float = DEFAULT_RESUME_GRACE
    """Seconds a dropped session waits for its client to resume it (``SESSION_RESUME_GRACE``; 0 = off)."""
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT
    """Seconds running episodes may go on after SIGTERM or a drain request (``DRAIN_TIMEOUT``)."""
    warm_pool: int = DEFAULT_WARM_POOL
    """Environment instances kept constructed ahead of demand (``WARM_POOL``; 0 = none)."""


def _number(name: str, value: float | None, default: float) -> float:
    if value is None:
        raw = os.environ.get(name, "").strip()
        if not raw:
            return default
        try:
            value = float(raw)
        except ValueError:
            raise EnvironmentContractError(
                f"{name}={raw!r} is not a number of seconds; use e.g. {name}=30 (0 turns it off)."
            ) from None
    if value < 0:
        raise EnvironmentContractError(f"{name}={value} must be 0 or more.")
    return value


def resolve_lifecycle(
    *,
    resume_grace: float | None = None,
    drain_timeout: float | None = None,
    warm_pool: int | None = None,
) -> LifecycleSettings:
    """Each setting from its argument, else ``SESSION_RESUME_GRACE`` / ``DRAIN_TIMEOUT`` /
    ``WARM_POOL``, else its default."""
    pool = _number("WARM_POOL", warm_pool, DEFAULT_WARM_POOL)
    if pool != int(pool):
        raise EnvironmentContractError(f"WARM_POOL={pool} must be a whole number, e.g. 4.")
    return LifecycleSettings(
        resume_grace=_number("SESSION_RESUME_GRACE", resume_grace, DEFAULT_RESUME_GRACE),
        drain_timeout=_number("DRAIN_TIMEOUT", drain_timeout, DEFAULT_DRAIN_TIMEOUT),
        warm_pool=int(pool),
    )

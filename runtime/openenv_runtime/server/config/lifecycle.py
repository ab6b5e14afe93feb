"""What a session manager needs to know about a session's life beyond one connection.

The values come from the server's settings (``settings.py``: ``--resume-grace`` /
``SESSION_RESUME_GRACE`` / ``server.resume_grace``, ``--drain-timeout`` / ``DRAIN_TIMEOUT`` /
``server.drain_timeout``, ``--warm-pool`` / ``WARM_POOL`` / ``server.warm_pool``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LifecycleSettings:
    resume_grace: float
    """Seconds a dropped session waits for its client to resume it (0 = resuming off)."""
    drain_timeout: float
    """Seconds running episodes may go on after SIGTERM or a drain request."""
    warm_pool: int
    """Environment instances kept constructed ahead of demand (0 = none)."""

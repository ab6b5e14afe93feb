"""Sizing a deployment: how many Envoy fronts its sessions need, and a replica's memory.

Each session through a front holds two open files (the client's socket and the replica's), so
a front's open-file limit bounds the sessions it carries.
"""

from __future__ import annotations

import math
import resource

# Open files an Envoy front keeps for itself (listeners, admin, logs, DNS, health checks).
FRONT_FD_RESERVE = 1024
# Each session through a front holds two sockets: the client's and the replica's.
FDS_PER_SESSION = 2
MAX_NOFILE = 1 << 20  # the kernel's usual fs.nr_open


def front_session_budget(front_nofile: int) -> int:
    """The sessions one front can hold within ``front_nofile`` open files."""
    return max(1, (front_nofile - FRONT_FD_RESERVE) // FDS_PER_SESSION)


def fronts_needed(capacity: int, front_nofile: int) -> int:
    """How many fronts carry ``capacity`` sessions at two open files a session."""
    return max(1, math.ceil(capacity / front_session_budget(front_nofile)))


def local_nofile_limit() -> int:
    """This machine's hard limit on open files per process (what root may raise the soft one to)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return MAX_NOFILE if hard == resource.RLIM_INFINITY else min(int(hard), MAX_NOFILE)


def default_memory(capacity_per_replica: int) -> str:
    """A memory limit for one replica: 256 MiB plus 64 KiB a session (idle sessions take ~23 KB)."""
    return f"{256 + (capacity_per_replica * 64 + 1023) // 1024}Mi"

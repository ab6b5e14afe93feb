"""Where a pool opens a session: the servers' free capacity, as far as the pool knows it.

A server's ``/health`` says ``active_sessions`` / ``max_sessions``; one without a limit counts
as :data:`UNLIMITED`. The pool picks the server with the most free capacity (the fewest of its
own sessions on a tie), and marks a server that refused with ``CAPACITY_REACHED`` as full.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

UNLIMITED = 1 << 30


@dataclass(slots=True)
class Server:
    """One server of a pool: its URL, the sessions it can still take, and the pool's there."""

    url: str
    free: int  # sessions it can still take, as far as we know
    sessions: int = 0


def free_sessions(answer: dict[str, Any] | None) -> int:
    """The sessions a server can still take, from its ``/health`` answer (None: unreachable)."""
    if answer is None:
        return 0
    if isinstance(answer.get("max_sessions"), int):
        return max(0, int(answer["max_sessions"]) - int(answer.get("active_sessions", 0)))
    return UNLIMITED


def pick_server(servers: Iterable[Server], exclude: Iterable[str] = ()) -> Server:
    """The server with the most free capacity, counted as taken by one more session.

    Servers in ``exclude`` are skipped unless no other is left.
    """
    everyone = list(servers)
    skip = set(exclude)
    candidates = [s for s in everyone if s.url not in skip] or everyone
    best = max(candidates, key=lambda s: (s.free, -s.sessions))
    best.free = max(0, best.free - 1)
    best.sessions += 1
    return best


def release(server: Server, full: bool = False) -> None:
    """One of the pool's sessions left ``server``; ``full``: it refused, count it as full."""
    server.sessions = max(0, server.sessions - 1)
    if full:
        server.free = 0
    else:
        server.free += 1


def spread(servers: Iterable[Server], n: int) -> list[str]:
    """The servers for ``n`` new sessions, by free capacity (fewest new ones on a tie).

    Unlike :func:`pick_server` it changes no count: the sessions it places (forks) are not
    the pool's own.
    """
    free = {s.url: s.free for s in servers}
    placed = dict.fromkeys(free, 0)
    out = []
    for _ in range(n):
        url = max(free, key=lambda u: (free[u], -placed[u]))
        free[url] = max(0, free[url] - 1)
        placed[url] += 1
        out.append(url)
    return out

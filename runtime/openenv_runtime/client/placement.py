"""Where a pool opens a session: the servers' free capacity, as far as the pool knows it.

A server's ``/health`` says ``active_sessions`` / ``max_sessions``; one without a limit counts
as :data:`UNLIMITED`. The pool picks the server with the most free capacity (the fewest of its
own sessions on a tie), and marks a server that refused with ``CAPACITY_REACHED`` as full.
A server whose ``/health`` says it is not taking sessions (``status`` other than ``healthy``,
e.g. ``draining`` during a rollout) or does not answer gets no new session while another does.
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
    accepting: bool = True  # /health answered and did not say draining


def accepting(answer: dict[str, Any] | None) -> bool:
    """Whether a server takes new sessions, from its ``/health`` answer (None: unreachable).
    A server that does not say its ``status`` (an older one) is taken at its word: yes."""
    if answer is None:
        return False
    return bool(answer.get("status", "healthy") == "healthy")


def free_sessions(answer: dict[str, Any] | None) -> int:
    """The sessions a server can still take, from its ``/health`` answer (None: unreachable)."""
    if not accepting(answer):
        return 0
    assert answer is not None
    if isinstance(answer.get("max_sessions"), int):
        return max(0, int(answer["max_sessions"]) - int(answer.get("active_sessions", 0)))
    return UNLIMITED


def pick_server(servers: Iterable[Server], exclude: Iterable[str] = ()) -> Server:
    """The server with the most free capacity, counted as taken by one more session.

    Servers in ``exclude`` are skipped unless no other is left; so are servers not accepting
    sessions (draining, unreachable).
    """
    everyone = list(servers)
    skip = set(exclude)
    candidates = [s for s in everyone if s.url not in skip] or everyone
    candidates = [s for s in candidates if s.accepting] or candidates
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
    everyone = list(servers)
    free = {s.url: s.free for s in [s for s in everyone if s.accepting] or everyone}
    placed = dict.fromkeys(free, 0)
    out = []
    for _ in range(n):
        url = max(free, key=lambda u: (free[u], -placed[u]))
        free[url] = max(0, free[url] - 1)
        placed[url] += 1
        out.append(url)
    return out

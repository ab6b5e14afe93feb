"""What the simulated sessions observed: replies checked, failures labelled, all counted.

A reply that starts like an observation is one (no full JSON parse on the hot path); anything
else is parsed to find out what went wrong, and kept as a sample.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from .wsclient import ConnectionLost, HandshakeRefused

OBSERVATION_PREFIXES = ('{"type":"observation"', '{"type": "observation"')
"""How an observation message starts, as the runtime writes it (and with a space)."""
_MAX_SAMPLES = 5


def excerpt(reply: str | bytes, limit: int = 400) -> str:
    """The start of a reply, for an error sample."""
    text = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else reply
    return text if len(text) <= limit else text[:limit] + "…"


def reply_problem(reply: str | bytes) -> str | None:
    """None when ``reply`` is an observation message; else a short label of what it is."""
    if isinstance(reply, bytes):
        reply = reply.decode("utf-8", "replace")
    if reply.startswith(OBSERVATION_PREFIXES):
        return None
    try:
        message = json.loads(reply)
    except ValueError:
        return "unparsable reply"
    if isinstance(message, dict):
        if message.get("type") == "observation":
            return None
        if message.get("type") == "error":
            data = message.get("data")
            return f"error {data.get('code', '?') if isinstance(data, dict) else '?'}"
    return "unexpected reply"


def describe_failure(exc: BaseException) -> str:
    """A short, countable label for an exception (no addresses or ids in it)."""
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, InvalidStatus):
        return f"HTTP {exc.response.status_code}"
    if isinstance(exc, HandshakeRefused):
        return f"HTTP {exc.status}"
    if isinstance(exc, ConnectionLost):
        code = exc.close_code
        return f"connection closed ({code})" if code is not None else "connection lost"
    if isinstance(exc, ConnectionClosed):
        code = exc.rcvd.code if exc.rcvd is not None else None
        return f"connection closed ({code})" if code is not None else "connection lost"
    if isinstance(exc, InvalidHandshake):
        return "bad handshake"
    if isinstance(exc, OSError):
        return type(exc).__name__ if type(exc) is not OSError else f"OSError {exc.errno}"
    return type(exc).__name__


@dataclass
class Collector:
    """What the sessions of one worker process observed (columns of seconds)."""

    attempted: int = 0
    ok: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)
    connect: list[float] = field(default_factory=list)
    reset: list[float] = field(default_factory=list)
    step: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    step_latencies: list[float] = field(default_factory=list)
    steps: int = 0
    window: list[float] = field(
        default_factory=list
    )  # [first step start, last step end] (monotonic)

    def fail(self, phase: str, what: str, detail: object = None) -> None:
        label = f"{phase}: {what}"
        self.errors[label] += 1
        if len(self.samples) < _MAX_SAMPLES:
            self.samples.append(f"{label}: {detail}" if detail else label)

    def mark_window(self, start: float, end: float) -> None:
        if not self.window:
            self.window = [start, end]
        else:
            self.window[0] = min(self.window[0], start)
            self.window[1] = max(self.window[1], end)

    def as_dict(self) -> dict[str, Any]:
        return {
            "attempted": self.attempted,
            "ok": self.ok,
            "errors": dict(self.errors),
            "samples": self.samples,
            "connect": self.connect,
            "reset": self.reset,
            "step": self.step,
            "total": self.total,
            "step_latencies": self.step_latencies,
            "steps": self.steps,
            "window": self.window,
        }

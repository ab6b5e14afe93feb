"""CPU time and memory of a process tree, read from /proc (Linux).

The load generator shares the machine with the server, so a server's cost is measured
from the kernel's accounting of the server's own processes (and their children: uvicorn
workers), never from wall time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_PROC = Path("/proc")
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def available() -> bool:
    """True where /proc/<pid>/stat can be read (Linux)."""
    return (_PROC / str(os.getpid()) / "stat").is_file()


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    return raw[raw.rfind(")") + 2 :].split()


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is None:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def process_tree(roots: Iterable[int]) -> list[int]:
    """``roots`` and all their living descendants."""
    children = _children_map()
    seen: list[int] = []
    stack = [pid for pid in roots if (_PROC / str(pid)).exists()]
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.append(pid)
        stack.extend(children.get(pid, ()))
    return seen


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process (all its threads); 0.0 if it is gone."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    # After the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
    return (int(fields[11]) + int(fields[12])) / _TICK


def tree_cpu_seconds(roots: Iterable[int]) -> dict[int, float]:
    """CPU seconds of every process of the trees under ``roots``, by pid.

    Keep the dict of the first reading: a worker that exits between two readings keeps
    its last value, and :func:`cpu_delta` handles pids that appear or disappear.
    """
    return {pid: cpu_seconds(pid) for pid in process_tree(roots)}


def cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds spent between two :func:`tree_cpu_seconds` readings."""
    total = 0.0
    for pid, value in after.items():
        total += value - before.get(pid, 0.0)
    return total


def rss_bytes(pid: int) -> int:
    """Resident memory of one process (0 if it is gone)."""
    try:
        pages = int((_PROC / str(pid) / "statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return pages * _PAGE


def tree_rss_bytes(roots: Iterable[int]) -> int:
    """Resident memory of the process trees under ``roots`` (shared pages counted per process)."""
    return sum(rss_bytes(pid) for pid in process_tree(roots))


def thread_count(roots: Iterable[int]) -> int:
    """Threads of the process trees under ``roots``."""
    total = 0
    for pid in process_tree(roots):
        try:
            total += len(os.listdir(_PROC / str(pid) / "task"))
        except OSError:
            pass
    return total


@dataclass(frozen=True, slots=True)
class MachineCpu:
    """Busy and total CPU time of the whole machine (all cores), from /proc/stat."""

    busy: float
    total: float

    @staticmethod
    def read() -> MachineCpu:
        try:
            line = (_PROC / "stat").read_text().splitlines()[0]
        except (OSError, IndexError):
            return MachineCpu(0.0, 0.0)
        values = [int(v) for v in line.split()[1:]]
        idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
        total = sum(values[:8])  # guest time is already inside user
        return MachineCpu((total - idle) / _TICK, total / _TICK)

    def busy_since(self, earlier: MachineCpu) -> float:
        """CPU seconds all processes of the machine used between two readings."""
        return self.busy - earlier.busy


def listen_overflows() -> int | None:
    """The kernel's count of connections dropped because a listen queue was full (this network namespace).

    Read before and after a run: a growing count means the server's accept backlog (or
    ``net.core.somaxconn``) was too small for the burst of connects, and clients waited for
    SYN retransmissions (1 s, 3 s, 7 s, ...).
    """
    try:
        lines = (_PROC / "net" / "netstat").read_text().splitlines()
    except OSError:
        return None
    for header, values in zip(lines[::2], lines[1::2]):
        if header.startswith("TcpExt:"):
            fields = dict(zip(header.split()[1:], values.split()[1:]))
            value = fields.get("ListenOverflows")
            return int(value) if value is not None else None
    return None

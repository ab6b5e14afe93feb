"""CPU time and memory of a process tree (``psutil``), and the kernel's listen-queue drops.

The load generator shares the machine with the server, so a server's cost is measured
from the kernel's accounting of the server's own processes (and their children: uvicorn
workers), never from wall time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil


def available() -> bool:
    """True where the CPU time of a process can be read."""
    try:
        psutil.Process().cpu_times()
    except (psutil.Error, NotImplementedError):
        return False
    return True


def process_tree(roots: Iterable[int]) -> list[int]:
    """``roots`` and all their living descendants."""
    seen: dict[int, None] = {}
    for pid in roots:
        try:
            process = psutil.Process(pid)
            family = [process, *process.children(recursive=True)]
        except psutil.Error:
            continue
        seen.update(dict.fromkeys(p.pid for p in family))
    return list(seen)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process (all its threads); 0.0 if it is gone."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


def tree_cpu_seconds(roots: Iterable[int]) -> dict[int, float]:
    """CPU seconds of every process of the trees under ``roots``, by pid.

    Keep the dict of the first reading: a worker that exits between two readings keeps
    its last value, and :func:`cpu_delta` handles pids that appear or disappear.
    """
    return {pid: cpu_seconds(pid) for pid in process_tree(roots)}


def cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds spent between two :func:`tree_cpu_seconds` readings."""
    return sum(value - before.get(pid, 0.0) for pid, value in after.items())


def rss_bytes(pid: int) -> int:
    """Resident memory of one process (0 if it is gone)."""
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


def tree_rss_bytes(roots: Iterable[int]) -> int:
    """Resident memory of the process trees under ``roots`` (shared pages counted per process)."""
    return sum(rss_bytes(pid) for pid in process_tree(roots))


def thread_count(roots: Iterable[int]) -> int:
    """Threads of the process trees under ``roots``."""
    total = 0
    for pid in process_tree(roots):
        try:
            total += psutil.Process(pid).num_threads()
        except psutil.Error:
            pass
    return total


@dataclass(frozen=True, slots=True)
class MachineCpu:
    """Busy and total CPU time of the whole machine (all cores)."""

    busy: float
    total: float

    @staticmethod
    def read() -> MachineCpu:
        times = psutil.cpu_times()
        # guest time is already inside user: leave it out of the total
        total = sum(
            getattr(times, name, 0.0)
            for name in ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
        )
        idle = times.idle + getattr(times, "iowait", 0.0)
        return MachineCpu(total - idle, total)

    def busy_since(self, earlier: MachineCpu) -> float:
        """CPU seconds all processes of the machine used between two readings."""
        return self.busy - earlier.busy


def listen_overflows() -> int | None:
    """The kernel's count of connections dropped because a listen queue was full (this network namespace).

    Read before and after a run: a growing count means the server's accept backlog (or
    ``net.core.somaxconn``) was too small for the burst of connects, and clients waited for
    SYN retransmissions (1 s, 3 s, 7 s, ...). psutil has no reading of this counter.
    """
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return None
    for header, values in zip(lines[::2], lines[1::2], strict=False):
        if header.startswith("TcpExt:"):
            fields = dict(zip(header.split()[1:], values.split()[1:], strict=False))
            value = fields.get("ListenOverflows")
            return int(value) if value is not None else None
    return None


def server_root(pid: int, port: int) -> int | None:
    """The process tree to measure for the server whose ``/health`` said ``pid``: ``pid``
    when it listens on ``port`` here (not a pid of another machine or a container), or its
    ``openenv`` launcher parent when it is one worker of several; None otherwise."""
    try:
        process = psutil.Process(pid)
        connections = process.net_connections(kind="tcp")
    except (psutil.Error, AttributeError):
        return None
    if not any(
        c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in connections
    ):
        return None
    try:
        parent = process.parent()
        if parent is not None and any("openenv" in part for part in parent.cmdline()):
            return int(parent.pid)
    except psutil.Error:
        pass
    return pid

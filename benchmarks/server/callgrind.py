"""What the callgrind benchmarks share: switching a process's instrumentation, reading its counts.

``server/hot_path_callgrind.py`` and ``client/client_callgrind.py`` run a process under
``valgrind --tool=callgrind --instr-atstart=no``, switch instrumentation on for the measured
steps only (:func:`control`), dump the counters, and add up the instructions of the dumps
(:func:`instructions`). Import it as ``benchmarks.server.callgrind`` with the repository root on
``sys.path``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

_TOTAL = re.compile(rb"^(?:summary|totals):\s+(\d+)", re.MULTILINE)
MISSING = "valgrind (with callgrind_control) is needed: apt-get install valgrind"


def available() -> bool:
    """Whether ``valgrind`` and ``callgrind_control`` are installed."""
    return shutil.which("valgrind") is not None and shutil.which("callgrind_control") is not None


def valgrind(out_file: Path) -> list[str]:
    """The command prefix that runs a program under callgrind, instrumentation off at start."""
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={out_file}",
    ]


def control(flag: str, value: str | None, pid: int, timeout: float = 300) -> None:
    """``callgrind_control FLAG [VALUE] PID``: ``-i on`` / ``-i off`` switch counting, ``-d`` dumps."""
    argv = ["callgrind_control", flag, *([value] if value else []), str(pid)]
    subprocess.run(argv, check=True, capture_output=True, timeout=timeout)


def instructions(out_file: Path) -> int:
    """Total Ir of the dumps callgrind wrote for the measured phase (one file per thread/part)."""
    total = 0
    dumps = [p for p in out_file.parent.glob(out_file.name + "*") if p != out_file]
    for path in dumps or [out_file]:
        match = _TOTAL.search(path.read_bytes())
        if match:
            total += int(match.group(1))
    return total

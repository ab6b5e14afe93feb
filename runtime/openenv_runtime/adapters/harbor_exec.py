"""Where a Harbor episode's commands run: the :class:`Executor` both executors implement
(a container per episode on the Docker engine, :mod:`.harbor`; the container the server runs
in, :mod:`.harbor_local`), and what a command produced."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

TESTS_DIR = "/tests"
VERIFIER_DIR = "/logs/verifier"
# Seconds a command gets after its time limit to end on SIGTERM, before SIGKILL.
KILL_GRACE = 5


@dataclass
class Ran:
    """What one exec in the container produced."""

    stdout: bytes
    stderr: bytes
    exit_code: int
    truncated: bool
    timed_out: bool


class Executor(Protocol):
    """Where one episode's commands run: a container of the task's image (Docker-backed) or
    the container this server itself runs in (:mod:`.harbor_local`)."""

    @property
    def label(self) -> str:
        """What :class:`HarborState` shows as the episode's container."""
        ...

    def run(
        self,
        argv: list[str],
        seconds: float,
        *,
        limit: int,
        user: str = "",
        environment: Mapping[str, str] | None = None,
    ) -> Ran:
        """Run ``argv`` for at most ``seconds``, keeping ``limit`` bytes of each stream."""
        ...

    def write(self, path: str, data: bytes) -> str | None:
        """Write ``data`` at ``path`` (relative: to the working folder), parent folders made;
        an error message when it could not."""
        ...

    def put_tests(self, archive: bytes) -> None:
        """Unpack ``archive`` (the task's ``tests/``) into the emptied ``TESTS_DIR``."""
        ...

    def stop_processes(self) -> None:
        """Kill every process the agent left running."""
        ...

    def close(self) -> None:
        """The episode is over: release what it held."""
        ...

"""A Harbor task served from inside its own image: ``harbor:/PATH?executor=local``.

The project ``openenv import harbor:/PATH`` writes builds an image from the task's image with
the server installed in it; there the server runs the agent's commands and the task's
``tests/test.sh`` directly, in the container it runs in, with no Docker engine. The actions,
observations, verifier and reward are those of :mod:`.harbor` (its ``HarborEnvironment``
over this module's :class:`LocalExecutor`, an :class:`~.harbor_exec.Executor`).

One session per container: the container is the episode's working state, so the image
serves one session at a time (``MAX_CONCURRENT_ENVS=1`` in its Dockerfile; a Task API call
would take that one slot too, and harbor tasks have none). A new episode keeps the files the last one left (each ``reset`` kills the processes
it left running); for a fresh container per episode, run one container per episode.

Commands run as the user the server runs as (the task image's ``USER``); the verifier too,
where the Docker-backed adapter runs it as root. They start with the server's environment
minus every credential-like variable (``OPENENV_API_KEY``, ``HF_TOKEN``, ...); a process of the
same user can still read the server's own ``/proc/<pid>/environ``, so give such an image no
secret the agent must not see.

Outside its image this executor runs nothing: commands answer with an error unless
``OPENENV_HARBOR_IN_CONTAINER=1`` is set (the image sets it), so ``openenv validate`` or
``openenv serve`` of the project on a workstation never runs an agent's command there.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import tarfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from ..redaction import secret_name
from .harbor_exec import KILL_GRACE, TESTS_DIR, Ran

IN_CONTAINER_VARIABLE = "OPENENV_HARBOR_IN_CONTAINER"
READ_CHUNK = 65536
# Seconds the output readers get after the command ended (a background child may hold the
# pipes open; what it writes later is not the command's output).
DRAIN_WAIT = 1.0


def in_container() -> bool:
    return os.environ.get(IN_CONTAINER_VARIABLE) == "1"


def _read_bounded(stream: IO[bytes], kept: bytearray, limit: int, flags: list[bool]) -> None:
    """Keep the first ``limit`` bytes of ``stream``, read the rest to its end and drop it."""
    with contextlib.suppress(OSError, ValueError):
        while chunk := stream.read1(READ_CHUNK):  # type: ignore[attr-defined]
            room = limit - len(kept)
            if len(chunk) > room:
                flags[0] = True
            kept += chunk[: max(room, 0)]


def command_environment() -> dict[str, str]:
    """The server's environment without its credentials (``OPENENV_API_KEY``, ``HF_TOKEN``,
    any name that ends like a secret): what an agent's command and the verifier start with."""
    return {name: value for name, value in os.environ.items() if not secret_name(name)}


def run_local(
    argv: list[str],
    *,
    limit: int,
    seconds: float,
    cwd: str,
    environment: Mapping[str, str] | None = None,
) -> Ran:
    """Run ``argv`` in its own process group under ``timeout``, as :func:`~.harbor.run_in`
    does in a container: SIGTERM after ``seconds``, SIGKILL ``KILL_GRACE`` seconds later, each
    output stream cut at ``limit`` bytes."""
    wrapped = ["timeout", "-k", str(KILL_GRACE), f"{seconds:.3f}", *argv]
    started = time.monotonic()
    process = subprocess.Popen(
        wrapped,
        cwd=cwd,
        env={**command_environment(), **dict(environment or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdout is not None and process.stderr is not None
    kept = [bytearray(), bytearray()]
    truncated = [False]
    readers = [
        threading.Thread(target=_read_bounded, args=(s, k, limit, truncated), daemon=True)
        for s, k in zip((process.stdout, process.stderr), kept, strict=True)
    ]
    for reader in readers:
        reader.start()
    gave_up = False
    try:
        process.wait(seconds + KILL_GRACE + 5)
    except subprocess.TimeoutExpired:
        gave_up = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    for reader in readers:
        reader.join(DRAIN_WAIT)
    process.stdout.close()
    process.stderr.close()
    exit_code = process.returncode
    elapsed = time.monotonic() - started
    timed_out = gave_up or exit_code == 124 or (exit_code == 137 and elapsed >= seconds)
    return Ran(bytes(kept[0]), bytes(kept[1]), exit_code, truncated[0], timed_out)


def _ancestors(pid: int) -> set[int]:
    """``pid`` and every process above it."""
    found = {pid}
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        # The command name (2nd field) may hold spaces and parentheses: fields follow the last ')'.
        pid = int(stat.rpartition(")")[2].split()[1])
        found.add(pid)
    return found


class LocalExecutor:
    """The container the server runs in, as an episode's :class:`~.harbor.Executor`."""

    label = "local"

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.stop_processes()

    def run(
        self,
        argv: list[str],
        seconds: float,
        *,
        limit: int,
        user: str = "",
        environment: Mapping[str, str] | None = None,
    ) -> Ran:
        if not in_container():
            message = (
                f"this server runs commands only inside its image ({IN_CONTAINER_VARIABLE}=1 "
                "is unset): `openenv build`, then run the image"
            )
            return Ran(b"", message.encode(), 126, False, False)
        return run_local(
            argv, limit=limit, seconds=seconds, cwd=self.workdir, environment=environment
        )

    def write(self, path: str, data: bytes) -> str | None:
        if not in_container():
            return f"this server writes files only inside its image ({IN_CONTAINER_VARIABLE}=1)"
        target = Path(self.workdir, path)
        if target == Path("/"):
            return "write_path must name a file, not /."
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        except OSError as exc:
            return f"could not write {target}: {exc.strerror or exc}"
        return None

    def put_tests(self, archive: bytes) -> None:
        if not in_container():
            return
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            if hasattr(tarfile, "tar_filter"):  # Python 3.10.12+, 3.11.4+
                tar.extractall(TESTS_DIR, filter="tar")
            else:  # the archive is the project's own tests/, links kept as links
                tar.extractall(TESTS_DIR)

    def stop_processes(self) -> None:
        """Kill every process in the container but this server and the processes above it."""
        if not in_container():
            return
        spared = _ancestors(os.getpid())
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) not in spared:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(entry.name), signal.SIGKILL)
        # Orphans are re-parented to the server when it is PID 1: reap them.
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass

    def close(self) -> None:
        """Nothing to release: the container stays for the next episode."""

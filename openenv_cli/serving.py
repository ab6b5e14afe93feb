"""What ``openenv serve`` does, as plain functions: resolve settings, check the project, run.

The settings are the runtime server's own (:mod:`openenv_runtime.server.config.settings`): one
typed object, resolved flag → environment variable → ``openenv.yaml`` → default, each value
with where it came from. The app is imported here first so that a broken import is a
one-line error instead of a uvicorn traceback.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.manifest import load_manifest
from openenv_cli.manifest_schema import MANIFEST_FILE, Manifest, is_app_path
from openenv_runtime.adapters.served import served_app
from openenv_runtime.adapters.target import parse_family_target
from openenv_runtime.errors import AdapterError, EnvironmentContractError
from openenv_runtime.server.config.fields import ServerSettings
from openenv_runtime.server.config.settings import ResolvedSettings, app_settings, load_settings

# What `openenv serve` shows in its settings table, in this order.


@dataclass(frozen=True)
class ServePlan:
    """Everything ``openenv serve`` needs: the project, the flags given, the resolved settings."""

    project_dir: Path
    manifest: Manifest
    flags: dict[str, Any]
    resolved: ResolvedSettings
    reload: bool
    capacity: int | None = None  # sessions per worker the imported app really holds
    single_file: bool = False  # MODULE:APP (or FAMILY:NAME) given instead of a project folder

    @property
    def settings(self) -> ServerSettings:
        return self.resolved.values

    @property
    def manifest_path(self) -> Path:
        return self.project_dir / MANIFEST_FILE

    @property
    def per_worker(self) -> int:
        """Sessions one worker holds: the app's own count once imported, else the setting."""
        return self.settings.max_concurrent_envs if self.capacity is None else self.capacity

    @property
    def capacity_source(self) -> str:
        """Where the per-worker capacity came from, for the summary."""
        if self.capacity is not None and self.capacity < self.settings.max_concurrent_envs:
            return "the environment serves one session at a time (SUPPORTS_CONCURRENT_SESSIONS = False)"
        return f"from {self.resolved.origin('max_concurrent_envs')}"

    @property
    def total_capacity(self) -> int:
        return self.per_worker * self.settings.workers

    @property
    def base_url(self) -> str:
        host = self.settings.host
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else (f"[{host}]" if ":" in host else host)
        return f"http://{shown}:{self.settings.port}"

    def rows(self) -> list[tuple[str, str, str]]:
        """``(setting, value, from)`` for the summary table."""
        return self.resolved.summary()


def plan_serve(
    project_dir: Path,
    *,
    reload: bool = False,
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ServePlan:
    """Resolve the settings of ``openenv serve`` for the project in ``project_dir``.

    ``flags`` maps setting names (``workers``, ``max_concurrent_envs``, ...) to the values
    given on the command line (None: not given).
    """
    single = single_file_app(project_dir)
    if single is not None:
        project_dir, manifest = single
    else:
        manifest = load_manifest(project_dir)
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    environ = dict(os.environ if environ is None else environ)
    environ.pop("OPENENV_SERVER_FLAGS", None)  # this command's flags are the only flags
    try:
        resolved = load_settings(flags=given, environ=environ, manifest=project_dir / MANIFEST_FILE)
    except EnvironmentContractError as exc:
        raise UsageError(str(exc), hint="Fix the value named above.") from None
    plan = ServePlan(
        project_dir=project_dir.resolve(),
        manifest=manifest,
        flags=given,
        resolved=resolved,
        reload=reload,
        single_file=single is not None,
    )
    if plan.reload and plan.settings.workers > 1:
        raise UsageError("--reload runs a single worker; drop --workers or --reload.")
    return plan


def single_file_app(target: Path) -> tuple[Path, Manifest] | None:
    """``MODULE:APP`` (or ``path/to/file.py:APP``) given instead of a project folder: the
    folder to import it from and a manifest for it (that folder's ``openenv.yaml`` when it
    has one, its ``app`` replaced). None when ``target`` is a folder or not of that form.

    A family target (``gymnasium:CartPole-v1``, see :mod:`openenv_runtime.adapters.target`)
    wins over ``MODULE:APP``: it is recorded for the server's workers and served from the
    current folder.
    """
    text = str(target)
    if target.is_dir() or ":" not in text:
        return None
    family = parse_family_target(text)
    if family is not None:
        try:
            app = served_app(family)
        except AdapterError as exc:
            raise UsageError(
                str(exc), hint="Install the extra named above, or fix the target."
            ) from None
        return Path.cwd(), Manifest(name=family.name, app=app)
    left, _, attribute = text.rpartition(":")
    if left.endswith(".py"):
        file = Path(left)
        if not file.is_file():
            raise UsageError(
                f"No file {left} (from {text}).", hint="Give FILE.py:APP or MODULE:APP."
            )
        folder, module = file.resolve().parent, file.stem
    else:
        folder, module = Path.cwd(), left
    app = f"{module}:{attribute}"
    if not is_app_path(app):
        raise UsageError(
            f"{text!r} is neither a project folder nor MODULE:APP.",
            hint="Give the project folder (with openenv.yaml), or the app as MODULE:APP, e.g. guess:app.",
        )
    if (folder / MANIFEST_FILE).is_file():
        return folder, load_manifest(folder).model_copy(update={"app": app})
    return folder, Manifest(name=module.split(".")[0], app=app)


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


def check_app_imports(plan: ServePlan, import_paths: list[str]) -> Any:
    """Import the app in this process (``import_paths`` first on sys.path) to fail early and briefly.

    Returns the app object.
    """
    module_name, _, attribute = plan.manifest.app.partition(":")
    sys.path[:0] = [path for path in import_paths if path and path not in sys.path]
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        where = f" ({frame.filename}:{frame.lineno})" if frame else ""
        hint = "Fix the error above, or check `app:` in openenv.yaml; `openenv validate` checks the whole project."
        missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
        if missing is not None and missing.split(".")[0] in ("openenv", "openenv_core"):
            hint = (
                "The project is written for the reference OpenEnv (openenv.core): run "
                f"`openenv migrate {plan.project_dir}` (add --dry-run to see the diff first), "
                "then serve it again."
            )
        raise OpenEnvError(
            f"The app {plan.manifest.app} (openenv.yaml: app) does not import: {type(exc).__name__}: {exc}{where}",
            hint=hint,
        ) from None
    try:
        found = hasattr(module, attribute)
    except AdapterError as exc:  # a family target's app is built here, on first access
        raise UsageError(
            str(exc), hint="Fix the target: the library's name of the environment, its options."
        ) from None
    if not found:
        raise OpenEnvError(
            f"{module_name} has no attribute {attribute!r} (openenv.yaml: app is {plan.manifest.app}).",
            hint=f"Define `{attribute} = create_app(...)` in {module_name.replace('.', '/')}.py or fix `app:`.",
        )
    return getattr(module, attribute)


def adopt_app_settings(plan: ServePlan, app: Any) -> ServePlan:
    """The plan with the settings the imported ``app`` resolved (its ``create_app`` arguments
    included) and the capacity its session manager really holds.

    The launcher resolves flags, environment and ``openenv.yaml`` before the app is imported;
    only the app knows what its author passed to ``create_app``. An app not made by
    ``create_app`` leaves the plan as it was.
    """
    resolved = app_settings(app)
    if resolved is None:
        return plan
    sessions = getattr(app.state, "openenv_sessions", None)
    capacity = getattr(sessions, "capacity", None)
    return replace(
        plan, resolved=resolved, capacity=capacity if isinstance(capacity, int) else None
    )


def open_file_advice(soft_limit: int, plan: ServePlan) -> str | None:
    """A warning when the open-file limit is below what the asked capacity needs."""
    capacity = plan.settings.max_concurrent_envs
    needed = capacity + 64  # one descriptor per session, plus the server's own
    if soft_limit < needed:
        return (
            f"The open-file limit is {soft_limit}, below the {needed} that {capacity} "
            "sessions per worker need; raise it (`ulimit -n 65536`) or lower --max-concurrent-envs."
        )
    return None


def workers_advice(workers: int, cores: int | None) -> str | None:
    """A hint when more worker processes are asked for than the machine has cores."""
    if cores and workers > cores:
        return (
            f"--workers {workers} on a machine with {cores} cores: workers beyond the cores "
            "only compete for them (each worker is one process on one core at a time); "
            f"--workers {cores} serves as much, and --max-concurrent-envs sets the sessions "
            "per worker."
        )
    return None

"""The ``openenv.yaml`` manifest: its schema, and loading it with useful errors.

Required keys are ``name`` and ``app``; everything else has a default (without ``app:``,
the layout ``openenv init`` writes is assumed: ``<name>.server.app:app``). Unknown keys are
warnings (with a "did you mean" when one is close), never errors, so a manifest written for a
newer CLI or by ``openenv-core`` (``type: space``, ``runtime: fastapi``) still loads.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from openenv_cli.errors import OpenEnvError
from openenv_runtime.bounded_yaml import MAX_BYTES, YamlRefused, load_bounded

MANIFEST_FILE = "openenv.yaml"
SPEC_VERSION = 1
_APP_PATTERN = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


class _Section(BaseModel):
    model_config = ConfigDict(extra="allow", validate_default=True)


class ServerSection(_Section):
    """``server:`` — how ``openenv serve`` and the container run the app.

    Every key is optional: unset means "not set here" (the runtime's own default applies, and
    ``openenv serve`` says so). The runtime reads these keys itself
    (``openenv_runtime.server.settings``); this model only checks them early.
    """

    workers: int | None = Field(None, ge=1, description="Uvicorn worker processes (WORKERS).")
    max_concurrent_envs: int | None = Field(
        None, ge=1, description="Sessions served at once per worker (MAX_CONCURRENT_ENVS)."
    )
    session_timeout: float | None = Field(
        None, ge=0, description="Seconds before an idle session is closed (SESSION_TIMEOUT)."
    )
    web_interface: bool | None = Field(
        None, description="Serve the web UI at /web (ENABLE_WEB_INTERFACE)."
    )
    step_timeout: float | None = Field(
        None, ge=0, description="Seconds a reset/step may run (STEP_TIMEOUT)."
    )
    max_sessions_per_client: int | None = Field(
        None, ge=0, description="Sessions one client may hold (MAX_SESSIONS_PER_CLIENT)."
    )
    forwarded_allow_ips: str | None = Field(
        None, description="Proxies trusted for X-Forwarded-For (FORWARDED_ALLOW_IPS)."
    )
    limit_concurrency: int | None = Field(
        None, ge=1, description="Open connections per worker (LIMIT_CONCURRENCY)."
    )
    sync_pool_size: int | None = Field(
        None, ge=1, description="Threads for plain environment methods (OPENENV_SYNC_POOL_SIZE)."
    )
    max_message_bytes: int | None = Field(
        None, ge=1024, description="Largest message or body (OPENENV_MAX_MESSAGE_BYTES)."
    )
    resume_grace: float | None = Field(
        None,
        ge=0,
        description="Seconds a dropped session waits to be resumed (SESSION_RESUME_GRACE).",
    )
    drain_timeout: float | None = Field(
        None, ge=0, description="Seconds running sessions get on shutdown (DRAIN_TIMEOUT)."
    )
    warm_pool: int | None = Field(
        None, ge=0, description="Instances created ahead of demand (WARM_POOL)."
    )
    capacity_refusal: Literal["auto", "http", "message"] | None = Field(
        None,
        description="How a full server refuses a WebSocket session: auto, http (503) or "
        "message (OPENENV_CAPACITY_REFUSAL).",
    )
    checkpoint_dir: str | None = Field(
        None, description="Folder that keeps checkpoints, shared by replicas (CHECKPOINT_DIR)."
    )
    max_checkpoint_bytes: int | None = Field(
        None, ge=1, description="Largest state a checkpoint may hold (MAX_CHECKPOINT_BYTES)."
    )
    checkpoint_ttl: float | None = Field(
        None, ge=0, description="Seconds a checkpoint is kept (CHECKPOINT_TTL; 0: until deleted)."
    )


class BuildConfig(_Section):
    """What ``openenv build`` needs."""

    dockerfile: str = Field("server/Dockerfile", description="Dockerfile, relative to the project.")
    base_image: str = Field(
        "python:3.11-slim", description="Passed as the BASE_IMAGE build argument."
    )
    tag: str | None = Field(None, description="Image tag; defaults to <name>:<version>.")
    # A request only: a cloned repository writes this file, so the command refuses unless each
    # path is also typed as --include-secret (see image.selection.typed_includes).
    include_secret_files: list[str] = Field(
        default_factory=list,
        description="Secret paths this project asks to ship; build and push refuse unless each is also passed as --include-secret.",
    )


class PushConfig(_Section):
    """What ``openenv push`` needs."""

    repo_id: str | None = Field(None, description="Hugging Face Space id, e.g. user/my_env.")
    private: bool = Field(False, description="Create (or switch) the Space to private.")
    variables: dict[str, str] = Field(default_factory=dict, description="Space variables.")
    exclude: list[str] = Field(
        default_factory=list, description="Extra gitignore-style patterns not uploaded."
    )

    @field_validator("variables", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {
                str(k): "" if v is None else str(v) if not isinstance(v, bool) else str(v).lower()
                for k, v in value.items()
            }
        return value


# `openenv deploy`: the deploy: section.
class DeployConfig(_Section):
    """The ``deploy:`` section of ``openenv.yaml`` (every key optional)."""

    replicas: int | None = Field(None, ge=1, description="Server replicas (--replicas).")
    port: int | None = Field(None, ge=1, le=65535, description="Port of the Envoy front (--port).")
    image: str | None = Field(None, description="Image the replicas run (--image).")
    envoy_image: str | None = Field(None, description="Image Envoy runs in (Kubernetes, Swarm).")
    token: bool | None = Field(
        None, description="Replicas require the access token OPENENV_API_KEY (--token)."
    )
    max_replicas: int | None = Field(None, ge=1, description="Kubernetes autoscaler ceiling.")
    namespace: str | None = Field(None, description="Kubernetes namespace.")
    access_log: bool = Field(False, description="Envoy access log on stdout.")
    balancing: Literal["least_request", "session"] | None = Field(
        None,
        description="Envoy balancing: least_request (fewest open sessions) or session (hash of "
        "X-OpenEnv-Session, so a resumed session reaches its replica).",
    )
    cpu: str | None = Field(None, description="CPU request per replica (Kubernetes), e.g. 500m.")
    memory: str | None = Field(None, description="Memory limit per replica, e.g. 1Gi.")
    fronts: int | None = Field(
        None,
        ge=1,
        description="Envoy fronts (processes or pods) sharing the sessions (--fronts); default: "
        "as many as the capacity needs at two open files a session.",
    )
    front_nofile: int | None = Field(
        None,
        ge=1024,
        description="Open files one Envoy front may hold (--front-nofile); default: this "
        "machine's hard limit (ulimit -Hn).",
    )
    checkpoints: bool = Field(
        False,
        description="A volume every replica shares as CHECKPOINT_DIR, so a checkpoint taken on "
        "one can be restored on any (Kubernetes: a ReadWriteMany claim; Swarm: a named volume).",
    )


class Manifest(_Section):
    """The contents of ``openenv.yaml``."""

    spec_version: int = Field(SPEC_VERSION, description="Manifest format version.")
    name: str = Field(..., min_length=1, description="Project and package name, e.g. my_env.")
    version: str | None = Field(None, description="Environment version (defaults to pyproject's).")
    description: str = Field("", description="One line shown in /metadata and on the Hub.")
    app: str = Field(..., description="Import path of the ASGI app, e.g. my_env.server.app:app.")
    port: int = Field(8000, ge=1, le=65535, description="Port the server listens on.")
    example_action: dict[str, Any] | None = Field(
        None, description="An action used by `openenv validate` and smoke tests."
    )
    # Accepted (and ignored) so manifests written by openenv-core load without warnings.
    type: str | None = None
    runtime: str | None = None
    # The reference's validation block (reward range, resources, capabilities, tags): kept as
    # written for its `openenv validate`; this CLI reads none of it.
    validation: dict[str, Any] | None = None
    server: ServerSection = Field(default_factory=ServerSection)
    build: BuildConfig = Field(default_factory=BuildConfig)
    push: PushConfig = Field(default_factory=PushConfig)
    deploy: DeployConfig = Field(default_factory=DeployConfig)

    @field_validator("spec_version")
    @classmethod
    def _supported(cls, value: int) -> int:
        if value != SPEC_VERSION:
            raise ValueError(
                f"spec_version {value} is not supported by this openenv (it reads {SPEC_VERSION})"
            )
        return value

    @field_validator("app")
    @classmethod
    def _app_path(cls, value: str) -> str:
        if not _APP_PATTERN.match(value.strip()):
            raise ValueError(
                "must look like `package.module:attribute`, e.g. my_env.server.app:app"
            )
        return value.strip()

    @field_validator("version", mode="before")
    @classmethod
    def _version_str(cls, value: Any) -> Any:
        # YAML reads `version: 1.0` as a float.
        return (
            str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
        )

    @property
    def app_module(self) -> str:
        return self.app.split(":", 1)[0]

    @property
    def app_attribute(self) -> str:
        return self.app.split(":", 1)[1]


@dataclass(frozen=True)
class ManifestIssue:
    """One problem with the manifest: the key (dotted), what is wrong and how to fix it."""

    key: str
    message: str
    fix: str


@dataclass
class ManifestReport:
    """The outcome of reading a manifest: the model (None when it has errors) and the issues."""

    path: Path
    manifest: Manifest | None = None
    errors: list[ManifestIssue] = field(default_factory=list)
    warnings: list[ManifestIssue] = field(default_factory=list)


def _fix_for(key: str, project_dir: Path) -> str:
    guess = project_dir.resolve().name if project_dir.name not in {"", "."} else "my_env"
    guess = re.sub(r"\W", "_", guess) or "my_env"
    fixes = {
        "name": f"Add `name: {guess}` to {MANIFEST_FILE} (the project and package name).",
        "app": f"Add `app: {guess}.server.app:app` to {MANIFEST_FILE} (the import path of the ASGI app).",
        "spec_version": f"Set `spec_version: {SPEC_VERSION}` in {MANIFEST_FILE}.",
        "port": f"Set `port:` to a number between 1 and 65535 in {MANIFEST_FILE}, e.g. `port: 8000`.",
    }
    return fixes.get(key, f"Correct `{key}` in {MANIFEST_FILE}.")


def _unknown_keys(model: BaseModel, prefix: str = "") -> list[tuple[str, list[str]]]:
    found = [(prefix + key, list(type(model).model_fields)) for key in model.model_extra or {}]
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, _Section):
            found.extend(_unknown_keys(value, f"{prefix}{name}."))
    return found


def parse_manifest(data: Any, project_dir: Path, path: Path | None = None) -> ManifestReport:
    """Validate already-parsed YAML ``data``; never raises."""
    path = path or project_dir / MANIFEST_FILE
    report = ManifestReport(path=path)
    if data is None:
        report.errors.append(
            ManifestIssue(
                "",
                f"{MANIFEST_FILE} is empty.",
                _fix_for("name", project_dir) + " " + _fix_for("app", project_dir),
            )
        )
        return report
    if not isinstance(data, dict):
        report.errors.append(
            ManifestIssue(
                "",
                f"{MANIFEST_FILE} must be a mapping of keys to values, not a {type(data).__name__}.",
                f"Rewrite {MANIFEST_FILE} as `key: value` lines (see `openenv init`).",
            )
        )
        return report
    inferred = conventional_app(data.get("name")) if "app" not in data else None
    if inferred is not None:
        data = {**data, "app": inferred}  # the layout `openenv init` writes
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            if err["type"] == "missing":
                message = f"{MANIFEST_FILE}: missing required key `{key}`."
            else:
                got = err.get("input")
                shown = f" (got {got!r})" if not isinstance(got, (dict, list)) else ""
                message = f"{MANIFEST_FILE}: `{key}`: {err['msg']}{shown}."
            report.errors.append(ManifestIssue(key, message, _fix_for(key, project_dir)))
        return report
    for key, known in _unknown_keys(manifest):
        leaf = key.rsplit(".", 1)[-1]
        close = difflib.get_close_matches(leaf, known, n=1)
        hint = (
            f"Did you mean `{key[: len(key) - len(leaf)]}{close[0]}`?"
            if close
            else (f"Remove it, or check the spelling (known keys here: {', '.join(known)}).")
        )
        report.warnings.append(
            ManifestIssue(key, f"{MANIFEST_FILE}: unknown key `{key}` is ignored.", hint)
        )
    report.manifest = manifest
    return report


def conventional_app(name: Any) -> str | None:
    """``<name>.server.app:app``, the app of a project laid out as ``openenv init`` does
    (used when ``openenv.yaml`` has no ``app:``); None when ``name`` cannot be a package."""
    if not isinstance(name, str) or not name.strip():
        return None
    package = re.sub(r"\W", "_", name.strip())
    return f"{package}.server.app:app" if package.isidentifier() else None


def is_app_path(text: str) -> bool:
    """True for ``module.path:attribute`` (what ``app:`` holds)."""
    return _APP_PATTERN.match(text.strip()) is not None


def inspect_manifest(project_dir: Path) -> ManifestReport:
    """Read and validate ``project_dir/openenv.yaml``; never raises."""
    path = project_dir / MANIFEST_FILE
    report = ManifestReport(path=path)
    if not path.is_file():
        report.errors.append(
            ManifestIssue(
                "",
                f"No {MANIFEST_FILE} in {project_dir}.",
                "Run this in an environment project, or create one with `openenv init NAME`.",
            )
        )
        return report
    try:
        if path.stat().st_size > MAX_BYTES:
            raise YamlRefused(f"it is {path.stat().st_size} bytes; at most {MAX_BYTES} are read")
        text = path.read_text(encoding="utf-8")
    except YamlRefused as exc:
        report.errors.append(
            ManifestIssue("", f"{MANIFEST_FILE} is refused: {exc}.", "Keep only settings in it.")
        )
        return report
    except (OSError, UnicodeDecodeError) as exc:
        report.errors.append(
            ManifestIssue(
                "", f"Cannot read {path}: {exc}.", f"Make {MANIFEST_FILE} a readable UTF-8 file."
            )
        )
        return report
    try:
        data = load_bounded(text)  # size, depth and aliases bounded
    except YamlRefused as exc:
        report.errors.append(
            ManifestIssue("", f"{MANIFEST_FILE} is refused: {exc}", f"Fix {path}.")
        )
        return report
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        report.errors.append(
            ManifestIssue(
                "",
                f"{MANIFEST_FILE} is not valid YAML{where}: {problem}.",
                f"Fix the YAML syntax in {path}{where}.",
            )
        )
        return report
    return parse_manifest(data, project_dir, path)


def load_manifest(
    project_dir: str | Path, on_warning: Callable[[ManifestIssue], None] | None = None
) -> Manifest:
    """Load ``openenv.yaml`` from ``project_dir`` for a command.

    Unknown keys are passed to ``on_warning`` (by default printed to stderr); any error raises
    :class:`OpenEnvError` naming the file and the fix.
    """
    report = inspect_manifest(Path(project_dir))
    if report.errors or report.manifest is None:
        first = report.errors[0]
        message = (
            first.message
            if len(report.errors) == 1
            else (
                f"{report.path} has {len(report.errors)} problems:\n"
                + "\n".join(f"  - {e.message}" for e in report.errors)
            )
        )
        if len(report.errors) == 1 and str(report.path) not in message:
            message = f"{message} ({report.path})"
        hint = " ".join(dict.fromkeys(e.fix for e in report.errors))
        raise OpenEnvError(message, hint=hint)
    for warning in report.warnings:
        if on_warning is not None:
            on_warning(warning)
        else:
            from rich.markup import escape

            from openenv_cli.console import err_console

            err_console.print(
                f"[yellow]Warning:[/] {escape(warning.message)} {escape(warning.fix)}",
                highlight=False,
            )
    return report.manifest

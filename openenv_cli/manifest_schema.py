"""The schema of ``openenv.yaml``: its sections, their keys, defaults and checks.

:mod:`openenv_cli.manifest` loads a file against it and turns what is wrong into issues that
say how to fix them.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MANIFEST_FILE = "openenv.yaml"
SPEC_VERSION = 1
_APP_PATTERN = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


class Section(BaseModel):
    """A section of ``openenv.yaml``: unknown keys are kept (and reported as warnings)."""

    model_config = ConfigDict(extra="allow", validate_default=True)


class ServerSection(Section):
    """``server:`` — how ``openenv serve`` and the container run the app.

    Every key is optional: unset means "not set here" (the runtime's own default applies, and
    ``openenv serve`` says so). The runtime reads these keys itself
    (``openenv_runtime.server.config.settings``); this model only checks them early.
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
    metrics: bool | None = Field(None, description="Serve /metrics (OPENENV_METRICS).")
    public_metrics: bool | None = Field(
        None, description="Serve /metrics without the API key (OPENENV_PUBLIC_METRICS)."
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
    max_checkpoints: int | None = Field(
        None, ge=1, description="Checkpoints kept in all, oldest removed first (MAX_CHECKPOINTS)."
    )
    max_checkpoint_total_bytes: int | None = Field(
        None,
        ge=1,
        description="Bytes of checkpoints kept in all, oldest removed first "
        "(MAX_CHECKPOINT_TOTAL_BYTES).",
    )
    max_checkpoints_per_client: int | None = Field(
        None, ge=0, description="Checkpoints one client may keep (MAX_CHECKPOINTS_PER_CLIENT)."
    )
    max_checkpoint_bytes_per_client: int | None = Field(
        None,
        ge=0,
        description="Bytes of checkpoints one client may keep (MAX_CHECKPOINT_BYTES_PER_CLIENT).",
    )
    code_wait_timeout: float | None = Field(
        None, gt=0, description="Seconds a code-mode run waits for a slot (CODE_WAIT_TIMEOUT)."
    )
    code_slots_per_client: int | None = Field(
        None, ge=0, description="Code-mode slots one client may hold (CODE_SLOTS_PER_CLIENT)."
    )


class BuildConfig(Section):
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


class PushConfig(Section):
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
class DeployConfig(Section):
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


class FamilySection(Section):
    """``family:`` — the library environment a project made by ``openenv import`` serves."""

    target: str = Field(..., description="The family target, e.g. gymnasium:CartPole-v1.")
    package: str = Field(..., description="The library's distribution, e.g. gymnasium.")
    version: str = Field(..., description="The library's version the project pins.")


class Manifest(Section):
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
    family: FamilySection | None = None
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


def is_app_path(text: str) -> bool:
    """True for ``module.path:attribute`` (what ``app:`` holds)."""
    return _APP_PATTERN.match(text.strip()) is not None

"""The fields of :class:`ServerSettings`: each setting's default, limits and where it may be set.

Every field names its environment variable, its ``openenv serve`` flag and its ``openenv.yaml``
key (:data:`KEYS`); :mod:`openenv_runtime.server.config.settings` resolves the layers into one
``ServerSettings`` and says where each value came from.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from openenv_runtime.mcp.code_slots import SLOT_WAIT_S

Source = Literal["flag", "env", "openenv.yaml", "create_app()", "default"]
FLAGS_VARIABLE = "OPENENV_SERVER_FLAGS"
MANIFEST_VARIABLE = "OPENENV_MANIFEST"
MANIFEST_FILE = "openenv.yaml"
SPACE_VARIABLE = "SPACE_ID"
"""Set by Hugging Face on every Space: the server is reachable from the internet."""
PUBLIC_SESSIONS_PER_CLIENT = 16
"""The per-client session cap of a public server, unless set."""
SECRET_SETTINGS = frozenset({"api_key", "checkpoint_key"})
"""Settings whose values are never shown (in errors, logs or the serve summary)."""
CHECKPOINT_BUDGET_FACTOR = 16
"""Checkpoints kept in all take at most this many times ``max_checkpoint_bytes``, unless set."""
CLIENT_SHARE_DIVISOR = 4
"""A public server's client keeps at most this fraction of the checkpoints, unless set."""


def _setting(
    default: Any,
    *,
    env: str,
    description: str,
    flag: str | None = None,
    yaml: str | None = None,
    **constraints: Any,
) -> Any:
    """A field with its environment variable, flag and ``openenv.yaml`` key."""
    return Field(
        default,
        validation_alias=env,
        description=description,
        json_schema_extra={"env": env, "flag": flag, "yaml": yaml},
        **constraints,
    )


class ServerSettings(BaseSettings):
    """Everything one server program (the launcher and each of its workers) is told.

    A server resolves it once with :func:`~openenv_runtime.server.config.settings.load_settings`
    (flag, environment variable, ``openenv.yaml``, the app's settings, default), which also
    says where each value came from. An app gives its own defaults as
    ``create_app(MyEnv, settings=ServerSettings(max_concurrent_envs=4))``: the fields given
    there replace the defaults written here, and nothing else.
    """

    model_config = SettingsConfigDict(
        populate_by_name=True, env_ignore_empty=True, extra="forbid", frozen=True
    )

    # -- where and how uvicorn listens --------------------------------------------------------
    host: str = _setting("127.0.0.1", env="HOST", flag="--host", description="Interface to bind.")
    port: int = _setting(
        8000, env="PORT", flag="--port", yaml="port", ge=1, le=65535, description="Port to bind."
    )
    workers: int = _setting(
        1, env="WORKERS", flag="--workers", yaml="server.workers", ge=1,
        description="Worker processes; capacity is per worker.",
    )  # fmt: skip
    log_level: Literal["critical", "error", "warning", "info", "debug", "trace"] = _setting(
        "info", env="LOG_LEVEL", flag="--log-level", description="uvicorn's log level."
    )
    ws_ping_interval: float | None = _setting(
        20.0, env="WS_PING_INTERVAL", flag="--ws-ping-interval",
        description="Seconds between keepalive pings (0: none).",
    )  # fmt: skip
    ws_ping_timeout: float | None = _setting(
        20.0, env="WS_PING_TIMEOUT", flag="--ws-ping-timeout",
        description="Seconds a ping may go unanswered before the connection is dropped (0: forever).",
    )  # fmt: skip
    forwarded_allow_ips: str = _setting(
        "127.0.0.1,::1", env="FORWARDED_ALLOW_IPS", flag="--forwarded-allow-ips",
        yaml="server.forwarded_allow_ips",
        description="Proxies whose X-Forwarded-For/-Proto headers are believed (comma-separated, '*': any).",
    )  # fmt: skip
    limit_concurrency: int | None = _setting(
        None, env="LIMIT_CONCURRENCY", flag="--limit-concurrency", yaml="server.limit_concurrency",
        ge=1,
        description="Open connections per worker before new ones get 503 "
        "(default: 2 × max_concurrent_envs + 64).",
    )  # fmt: skip
    header_timeout: float = _setting(
        10.0, env="HEADER_TIMEOUT", flag="--header-timeout", yaml="server.header_timeout", gt=0,
        description="Seconds a connection gets to send each request's headers (from its start, "
        "then from a later request's first byte; between requests TIMEOUT_KEEP_ALIVE applies).",
    )  # fmt: skip
    max_connections_per_address: int | None = _setting(
        None, env="MAX_CONNECTIONS_PER_ADDRESS", flag="--max-connections-per-address",
        yaml="server.max_connections_per_address", ge=0,
        description="Open connections one client address may hold per worker "
        "(default: max_concurrent_envs + 32; 0: no cap).",
    )  # fmt: skip
    timeout_keep_alive: float = _setting(
        5.0, env="TIMEOUT_KEEP_ALIVE", flag="--timeout-keep-alive", gt=0,
        description="Seconds an idle HTTP keep-alive connection is kept.",
    )  # fmt: skip
    gc_tuning: bool = _setting(
        True, env="OPENENV_GC_TUNING", description="Freeze start-up objects out of the collector's sight."
    )  # fmt: skip
    inline_frames: bool = _setting(
        True, env="OPENENV_INLINE_FRAMES",
        description="Answer a cheap plain step in the WebSocket protocol, below ASGI "
        "(0: every frame takes the ASGI trip).",
    )  # fmt: skip

    # -- sessions ------------------------------------------------------------------------------
    max_vector_envs: int = _setting(
        256, env="OPENENV_MAX_VECTOR_ENVS", yaml="server.max_vector_envs", ge=0,
        description="Environments one vector session (one WebSocket, one message a batch: "
        "make_vec) may hold; each counts as a session (0: no vector sessions).",
    )  # fmt: skip
    max_concurrent_envs: int = _setting(
        100, env="MAX_CONCURRENT_ENVS", flag="--max-concurrent-envs",
        yaml="server.max_concurrent_envs", ge=1,
        description="Sessions (WebSocket and HTTP) one worker holds at once.",
    )  # fmt: skip
    session_timeout: float | None = _setting(
        600.0, env="SESSION_TIMEOUT", flag="--session-timeout", yaml="server.session_timeout",
        description="Idle seconds before a session is closed (0: never).",
    )  # fmt: skip
    step_timeout: float | None = _setting(
        None, env="STEP_TIMEOUT", flag="--step-timeout", yaml="server.step_timeout",
        description="Seconds a reset or step may run before its session is ended with "
        "STEP_TIMEOUT (0 or unset: no limit).",
    )  # fmt: skip
    max_sessions_per_client: int | None = _setting(
        None, env="MAX_SESSIONS_PER_CLIENT", flag="--max-sessions-per-client",
        yaml="server.max_sessions_per_client", ge=0,
        description="Sessions one client (its token with auth on, else its address) may hold "
        "(0: no cap; unset: no cap on a local server, 16 or half the capacity when the server "
        "is public: auth on, or on a Hugging Face Space).",
    )  # fmt: skip
    unused_session_timeout: float | None = _setting(
        60.0, env="UNUSED_SESSION_TIMEOUT", flag="--unused-session-timeout",
        yaml="server.unused_session_timeout",
        description="Idle seconds before an HTTP session opened but never stepped is closed "
        "(0: session_timeout applies).",
    )  # fmt: skip
    resume_grace: float = _setting(
        30.0, env="SESSION_RESUME_GRACE", flag="--resume-grace", yaml="server.resume_grace", ge=0,
        description="Seconds a dropped session waits to be resumed.",
    )  # fmt: skip
    drain_timeout: float = _setting(
        30.0, env="DRAIN_TIMEOUT", flag="--drain-timeout", yaml="server.drain_timeout", ge=0,
        description="Seconds running sessions get to finish on shutdown.",
    )  # fmt: skip
    warm_pool: int = _setting(
        0, env="WARM_POOL", flag="--warm-pool", yaml="server.warm_pool", ge=0,
        description="Environment instances created ahead of demand.",
    )  # fmt: skip
    capacity_refusal: Literal["auto", "http", "message"] = _setting(
        "auto", env="OPENENV_CAPACITY_REFUSAL", flag="--capacity-refusal",
        yaml="server.capacity_refusal",
        description="How a full server refuses a new WebSocket session: 'http' (HTTP 503 with "
        "Retry-After before the upgrade: a load balancer tries another replica), 'message' "
        "(accept, send CAPACITY_REACHED, close 1013), 'auto' (http when the handshake carries "
        "X-OpenEnv-Balancer, as the fronts `openenv deploy` renders add, else message).",
    )  # fmt: skip

    # -- checkpoints ---------------------------------------------------------------------------
    checkpoint_dir: str | None = _setting(
        None, env="CHECKPOINT_DIR", flag="--checkpoint-dir", yaml="server.checkpoint_dir",
        description="Folder that keeps checkpoints (shared by replicas); unset: memory.",
    )  # fmt: skip
    max_checkpoint_bytes: int = _setting(
        16 << 20, env="MAX_CHECKPOINT_BYTES", flag="--max-checkpoint-bytes",
        yaml="server.max_checkpoint_bytes", ge=1,
        description="Largest exported state a checkpoint may hold.",
    )  # fmt: skip
    checkpoint_ttl: float | None = _setting(
        3600.0, env="CHECKPOINT_TTL", flag="--checkpoint-ttl", yaml="server.checkpoint_ttl",
        description="Seconds a checkpoint is kept after it was taken (0: forever).",
    )  # fmt: skip
    max_checkpoints: int = _setting(
        1024, env="MAX_CHECKPOINTS", flag="--max-checkpoints", yaml="server.max_checkpoints",
        ge=1,
        description="Checkpoints kept in all (the folder's, or this worker's memory); past it "
        "the oldest are removed first.",
    )  # fmt: skip
    max_checkpoint_total_bytes: int | None = _setting(
        None, env="MAX_CHECKPOINT_TOTAL_BYTES", flag="--max-checkpoint-total-bytes",
        yaml="server.max_checkpoint_total_bytes", ge=1,
        description="Bytes of checkpoints kept in all; past it the oldest are removed first "
        f"(default: {CHECKPOINT_BUDGET_FACTOR} × max_checkpoint_bytes).",
    )  # fmt: skip
    max_checkpoints_per_client: int | None = _setting(
        None, env="MAX_CHECKPOINTS_PER_CLIENT", flag="--max-checkpoints-per-client",
        yaml="server.max_checkpoints_per_client", ge=0,
        description="Checkpoints one client (its token with auth on, else its address) may "
        "keep; past it taking one is refused (0: no cap; unset: no cap on a local server, "
        f"1/{CLIENT_SHARE_DIVISOR} of max_checkpoints when the server is public).",
    )  # fmt: skip
    max_checkpoint_bytes_per_client: int | None = _setting(
        None, env="MAX_CHECKPOINT_BYTES_PER_CLIENT", flag="--max-checkpoint-bytes-per-client",
        yaml="server.max_checkpoint_bytes_per_client", ge=0,
        description="Bytes of checkpoints one client may keep; past it taking one is refused "
        "(0: no cap; unset: no cap on a local server, "
        f"1/{CLIENT_SHARE_DIVISOR} of the total when the server is public).",
    )  # fmt: skip
    checkpoint_key: SecretStr | None = _setting(
        None, env="CHECKPOINT_KEY",
        description="Key that signs checkpoints (HMAC-SHA256), the same for every server "
        "sharing a CHECKPOINT_DIR; unset: one generated and kept in the folder (0600), or "
        "per process in memory.",
    )  # fmt: skip

    # -- code mode -----------------------------------------------------------------------------
    code_wait_timeout: float = _setting(
        SLOT_WAIT_S, env="CODE_WAIT_TIMEOUT", flag="--code-wait-timeout",
        yaml="server.code_wait_timeout", gt=0,
        description="Seconds a code-mode run waits for a worker slot before it is refused "
        "with CAPACITY_REACHED.",
    )  # fmt: skip
    code_slots_per_client: int | None = _setting(
        None, env="CODE_SLOTS_PER_CLIENT", flag="--code-slots-per-client",
        yaml="server.code_slots_per_client", ge=0,
        description="Code-mode worker slots one client may hold at once (0: no cap; unset: "
        "no cap on a local server, half of them when the server is public).",
    )  # fmt: skip

    # -- the app -------------------------------------------------------------------------------
    web_interface: bool = _setting(
        True, env="ENABLE_WEB_INTERFACE", flag="--web/--no-web", yaml="server.web_interface",
        description="Serve the interactive page at /web.",
    )  # fmt: skip
    api_key: SecretStr | None = _setting(
        None, env="OPENENV_API_KEY",
        description="When set, every route but the public ones needs `Authorization: Bearer <key>`.",
    )  # fmt: skip
    sync_pool_size: int = _setting(
        64, env="OPENENV_SYNC_POOL_SIZE", flag="--sync-pool-size", yaml="server.sync_pool_size",
        ge=1, description="Threads that run plain (non-async) environment methods.",
    )  # fmt: skip
    metrics: bool = _setting(
        True, env="OPENENV_METRICS", flag="--metrics/--no-metrics", yaml="server.metrics",
        description="Serve /metrics (Prometheus text format) and count every step for it.",
    )  # fmt: skip
    public_metrics: bool = _setting(
        False, env="OPENENV_PUBLIC_METRICS", flag="--public-metrics/--no-public-metrics",
        yaml="server.public_metrics",
        description="Serve /metrics without the API key when auth is on (for a scraper "
        "inside the cluster that holds no token).",
    )  # fmt: skip
    max_message_bytes: int = _setting(
        1 << 20, env="OPENENV_MAX_MESSAGE_BYTES", flag="--max-message-bytes",
        yaml="server.max_message_bytes", ge=1024,
        description="Largest WebSocket message or HTTP body accepted (larger: close 1009 / 413).",
    )  # fmt: skip

    @field_validator(
        "session_timeout",
        "step_timeout",
        "ws_ping_interval",
        "ws_ping_timeout",
        "unused_session_timeout",
        "checkpoint_ttl",
        mode="after",
    )
    @classmethod
    def _zero_is_off(cls, value: float | None) -> float | None:
        return None if value is None or value <= 0 else value

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # load_settings merges the layers itself (to know each value's source); the model
        # only validates what it is given.
        return (init_settings,)

    @property
    def connection_limit(self) -> int:
        """Open connections per worker: ``limit_concurrency``, or room for every session and then some."""
        return self.limit_concurrency or 2 * self.max_concurrent_envs + 64

    @property
    def connections_per_address(self) -> int | None:
        """Open connections one address may hold: the setting, else room for every session."""
        if self.max_connections_per_address is None:
            return self.max_concurrent_envs + 32
        return self.max_connections_per_address or None

    def is_public(self, environ: Mapping[str, str] | None = None) -> bool:
        """Whether strangers may reach the server: auth on, or it runs on a Hugging Face Space.
        Per-client caps left unset are on only then (locally every session is one client)."""
        environ = os.environ if environ is None else environ
        return self.api_key is not None or bool(environ.get(SPACE_VARIABLE))

    def sessions_per_client(
        self, capacity: int, environ: Mapping[str, str] | None = None
    ) -> int | None:
        """The per-client session cap: the setting (0: none), else on only when the server is
        public: 16, or half of ``capacity``."""
        if self.max_sessions_per_client is not None:
            return self.max_sessions_per_client or None
        if not self.is_public(environ):
            return None
        return max(1, min(PUBLIC_SESSIONS_PER_CLIENT, capacity // 2))

    def code_slots_for_client(
        self, slots: int, environ: Mapping[str, str] | None = None
    ) -> int | None:
        """Code-mode slots one client may hold: the setting (0: no cap), else half of ``slots``
        when the server is public."""
        if self.code_slots_per_client is not None:
            return self.code_slots_per_client or None
        return max(1, slots // 2) if self.is_public(environ) else None

    @property
    def checkpoint_total_bytes(self) -> int:
        """Bytes of checkpoints kept in all: the setting, else a multiple of the largest one."""
        return (
            self.max_checkpoint_total_bytes or CHECKPOINT_BUDGET_FACTOR * self.max_checkpoint_bytes
        )

    def checkpoint_client_bounds(
        self, environ: Mapping[str, str] | None = None
    ) -> tuple[int | None, int | None]:
        """Checkpoints and bytes one client may keep (None: no cap): the settings (0: no cap),
        else a share of the totals when the server is public."""
        public = self.is_public(environ)
        count, size = self.max_checkpoints_per_client, self.max_checkpoint_bytes_per_client
        if count is None:
            count = max(1, self.max_checkpoints // CLIENT_SHARE_DIVISOR) if public else 0
        if size is None:
            size = max(1, self.checkpoint_total_bytes // CLIENT_SHARE_DIVISOR) if public else 0
        return count or None, size or None

    @property
    def api_key_value(self) -> str | None:
        return self.api_key.get_secret_value() if self.api_key else None


@dataclass(frozen=True, slots=True)
class Key:
    """Where a setting can be given."""

    name: str
    env: str
    flag: str | None
    yaml: str | None
    description: str


def _key(name: str, info: FieldInfo) -> Key:
    extra = info.json_schema_extra
    assert isinstance(extra, dict)
    return Key(
        name,
        str(extra["env"]),
        extra["flag"] if isinstance(extra["flag"], str) else None,
        extra["yaml"] if isinstance(extra["yaml"], str) else None,
        info.description or "",
    )


KEYS: dict[str, Key] = {name: _key(name, f) for name, f in ServerSettings.model_fields.items()}
"""Each setting's environment variable, flag and ``openenv.yaml`` key, by field name."""

"""``create_app``: the FastAPI application that serves one environment."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.routing import WebSocketRoute

from .._version import __version__
from ..environment import Environment, overrides
from ..mcp import code_mode
from ..models import Action, Observation, State
from ..observability.tracing import tracer
from ..redaction import install_redaction
from ..wire import ConcurrencyConfig, ServerMode
from . import drain
from .actions import action_validator
from .adapter import ClassAdapter, EnvRunner
from .app_inputs import check_env, check_model, declared_models, first_line, readme_text
from .auth import BearerAuthMiddleware, public_paths
from .checkpoint_ops import Checkpointer, build_checkpoint_router
from .checkpoints import CheckpointBounds, CheckpointStore
from .docs_pages import install_docs
from .drain import install_lifecycle_routes
from .gc_cycles import CYCLE_COLLECTION_EVERY, collect_connection_cycles
from .http_api import build_http_router
from .http_step import HttpStep
from .lifecycle import LifecycleSettings
from .limits import EXTRA_FIELDS_ALLOWED, BodyLimitMiddleware, client_identity
from .mcp import MCPHandler, build_mcp_router, serve_attached
from .metrics import CONTENT_TYPE, MULTIPROC_VARIABLE, Exporter
from .options import GRADIO_OPTIONS, resolve_reference_options
from .sessions import NoCapacity, SessionManager
from .settings import load_settings
from .tasks import build_task_router
from .websocket import WebSocketEndpoint

logger = logging.getLogger("openenv_runtime.server")

__all__ = [
    "CYCLE_COLLECTION_EVERY",
    "PROTOCOL_VERSION",
    "EnvironmentApp",
    "collect_connection_cycles",
    "create_app",
]

# The protocol version published as OpenAPI ``info.version``, where the reference's
# ``openenv validate --url`` reads it; the environment's own version is in /metadata.
PROTOCOL_VERSION = "1.0.0"


class EnvironmentApp(FastAPI):
    """The FastAPI app of an environment. ``/ws`` skips the HTTP middleware stack.

    Starlette's middleware wraps every ``send`` of a WebSocket; on the path that carries
    each step that is pure overhead, so ``/ws`` goes straight to its endpoint (through the
    token check when one is configured). The route is also registered normally, so the
    app still works when mounted inside another one.
    """

    ws_endpoint: Any = None
    http_step: Any = None  # POST /step of HTTP sessions, raw (server/http_step.py)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket" and scope["path"] == "/ws" and self.ws_endpoint is not None:
            await self.ws_endpoint(scope, receive, send)
            return
        if (
            scope["type"] == "http"
            and scope["path"] == "/step"
            and scope["method"] == "POST"
            and self.http_step is not None
        ):
            await self.http_step(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def create_app(
    env: type[Environment[Any, Any, Any]] | Callable[[], Any],
    action_cls: type[Action] | None = None,
    observation_cls: type[Observation] | None = None,
    state_cls: type[State] | str = State,
    *,
    env_name: str | None = None,
    name: str | None = None,
    description: str | None = None,
    version: str | None = None,
    readme: str | Path | None = None,
    author: str | None = None,
    documentation_url: str | None = None,
    max_concurrent_envs: int | None = None,
    session_timeout: float | None = None,
    api_key: str | None = None,
    enable_web_interface: bool | None = None,
    sync_pool_size: int | None = None,
    max_message_bytes: int | None = None,
    step_timeout: float | None = None,
    max_sessions_per_client: int | None = None,
    resume_grace: float | None = None,
    drain_timeout: float | None = None,
    warm_pool: int | None = None,
    concurrency_config: ConcurrencyConfig | None = None,
    reset_observation_cls: type[Observation] | None = None,
    mode: ServerMode | str | None = None,
    gradio_builder: Callable[..., Any] | None = None,
    custom_tab_name: str = "Custom",
    custom_tab_primary: bool = False,
    show_default_tab: bool = True,
    title_override: str | None = None,
) -> FastAPI:
    """Build the server for an environment.

    Args:
        env: the ``Environment`` subclass, or a zero-argument factory (function, lambda or
            ``async def``) that returns a new instance. Never an instance: every session
            gets its own.
        action_cls: the action model (a subclass of ``Action``). Left out, it is read from
            the class's declaration ``class MyEnv(Environment[MyAction, MyObservation,
            MyState])``; so are the next two.
        observation_cls: the observation model (a subclass of ``Observation``).
        state_cls: the state model (a subclass of ``State``).
        name: what ``/metadata`` reports as the name (default: the class's name); likewise
            ``description``, ``version``, ``author`` and ``documentation_url``.
        readme: a path or the text itself; by default a README.md beside the environment's
            module (or up to two folders above).
        max_concurrent_envs: this app's default for the server setting of the same name;
            likewise ``session_timeout``, ``api_key``, ``enable_web_interface``,
            ``sync_pool_size``, ``max_message_bytes``, ``step_timeout``,
            ``max_sessions_per_client``, ``resume_grace``, ``drain_timeout`` and
            ``warm_pool`` (the settings table of ``openenv serve`` in docs/cli.md). An
            explicit argument replaces the built-in default only: a command-line flag, an
            environment variable (``MAX_CONCURRENT_ENVS``, ``SESSION_TIMEOUT``, ...) or
            ``openenv.yaml``'s ``server:`` section still wins, so whoever runs the server has the
            last word; the server logs when it overrides an argument. An environment with
            ``SUPPORTS_CONCURRENT_SESSIONS = False`` gets one session at a time whatever is set.
        reset_observation_cls: the observation ``reset`` returns, when it differs (``/schema``).
        env_name: the reference OpenEnv's option, mapped to ours (see
            ``openenv_runtime.server.options``); likewise ``concurrency_config``, ``mode``,
            ``gradio_builder``, ``custom_tab_name``, ``custom_tab_primary``,
            ``show_default_tab`` and ``title_override``.
    """
    gradio = (gradio_builder, custom_tab_name, custom_tab_primary, show_default_tab)
    ref = resolve_reference_options(
        state_cls,
        env_name,
        max_concurrent_envs,
        concurrency_config,
        mode,
        title_override,
        dict(zip(GRADIO_OPTIONS, gradio, strict=True)),
    )
    state_cls, name, max_concurrent_envs = (
        ref.state_cls,
        name or ref.env_name,
        ref.max_concurrent_envs,
    )
    if session_timeout is None and ref.session_timeout is not None:
        session_timeout = ref.session_timeout
    factory, env_cls = check_env(env)
    declared = declared_models(env_cls)
    # Neither given nor declared: the base classes, as the reference allows for tool-only
    # (MCP) servers.
    action_cls = action_cls or declared[0] or Action
    observation_cls = observation_cls or declared[1] or Observation
    if state_cls is State and declared[2] is not None:
        state_cls = declared[2]
    check_model(action_cls, Action, "action_cls")
    check_model(observation_cls, Observation, "observation_cls")
    check_model(state_cls, State, "state_cls")
    resolved = load_settings(
        code={
            "max_concurrent_envs": max_concurrent_envs,
            "session_timeout": session_timeout,
            "api_key": api_key,
            "web_interface": enable_web_interface,
            "sync_pool_size": sync_pool_size,
            "max_message_bytes": max_message_bytes,
            "step_timeout": step_timeout,
            "max_sessions_per_client": max_sessions_per_client,
            "resume_grace": resume_grace,
            "drain_timeout": drain_timeout,
            "warm_pool": warm_pool,
        }
    )
    config = resolved.values
    capacity = config.max_concurrent_envs
    if (
        env_cls is not None
        and not ClassAdapter(env_cls).supports_concurrent_sessions
        and capacity > 1
    ):
        logger.warning(
            "%s sets SUPPORTS_CONCURRENT_SESSIONS = False: serving one session at a time "
            "(set it to True if instances are independent).",
            env_cls.__qualname__,
        )
        capacity = 1

    runner = EnvRunner(factory, config.sync_pool_size, observation_cls, config.step_timeout)
    lifecycle = LifecycleSettings(
        resume_grace=config.resume_grace,
        drain_timeout=config.drain_timeout,
        warm_pool=config.warm_pool,
    )
    manager = SessionManager(
        runner,
        capacity,
        config.session_timeout,
        config.sessions_per_client(capacity),
        lifecycle=lifecycle,
        unused_timeout=config.unused_session_timeout,
    )
    api_key = config.api_key_value
    # several workers: every worker's totals, through the folder the launcher made (serve.py)
    exporter = Exporter(manager.tally, manager, os.environ.get(MULTIPROC_VARIABLE) or None)
    install_redaction()
    code_mode.slots.configure(
        config.code_slots_for_client(code_mode.slots.total), config.code_wait_timeout
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        install_redaction()  # again: the server may have configured logging since
        manager.start()
        drain.register(manager)
        loop = asyncio.get_running_loop()
        collector = loop.create_task(collect_connection_cycles(manager), name="openenv-gc")
        flusher = None
        if config.metrics and exporter.folder is not None:
            flusher = loop.create_task(exporter.flush_forever(), name="openenv-metrics")
        try:
            yield
        finally:
            collector.cancel()
            if flusher is not None:
                flusher.cancel()
            drain.unregister(manager)
            await manager.shutdown()
            runner.shutdown()
            if flusher is not None:
                exporter.flush()  # the last counts, sessions closed included
                exporter.close()

    env_name = name or (
        env_cls.__name__ if env_cls is not None else getattr(factory, "__name__", "environment")
    )
    metadata = {
        "name": env_name,
        # the class's own docstring only (inspect.getdoc would inherit Environment's)
        "description": description
        or first_line(env_cls.__doc__ if env_cls else None)
        or f"The {env_name} environment",
        "version": version or "0.0.0",
        "readme_content": readme_text(readme, env_cls or factory),
        "author": author,
        "documentation_url": documentation_url,
    }
    schema = {
        "action": action_cls.model_json_schema(),
        "observation": observation_cls.model_json_schema(),
        "reset_observation": (reset_observation_cls or observation_cls).model_json_schema(),
        "state": state_cls.model_json_schema(),
    }

    app = EnvironmentApp(
        title=ref.title or f"{env_name} (OpenEnv environment)",
        version=PROTOCOL_VERSION,
        lifespan=lifespan,
        description=str(metadata["description"]),
        docs_url=None,
        redoc_url=None,
    )
    install_docs(app)  # the same pages, with the title escaped and a CSP
    traced = tracer(str(env_name))  # None unless OTEL_* variables turn tracing on
    manager.tracer = traced  # HTTP sessions' spans (http_api.py)
    ws_endpoint = WebSocketEndpoint(
        manager,
        action_cls,
        config.max_message_bytes,
        auth_required=bool(api_key),
        capacity_refusal=config.capacity_refusal,
        inline_frames=config.inline_frames,
        tracer=traced,
    )
    ws_endpoint.validate_action = action_validator(action_cls)
    if not config.metrics:
        ws_endpoint.tally = None  # no per-step counting on the hot path
    checkpointer = Checkpointer(
        manager,
        CheckpointStore(
            f"{env_name}:{env_cls.__qualname__ if env_cls is not None else ''}",
            config.checkpoint_dir,
            config.max_checkpoint_bytes,
            config.checkpoint_ttl,
            bounds=CheckpointBounds.from_settings(config),
            key=config.checkpoint_key.get_secret_value() if config.checkpoint_key else None,
        ),
    )
    ws_endpoint.checkpoints = checkpointer
    app.state.openenv_checkpoints = checkpointer
    mcp_handler = MCPHandler(manager, auth_required=bool(api_key))
    ws_endpoint.mcp, ws_endpoint.attach = mcp_handler.handle, serve_attached
    app.router.routes.insert(0, WebSocketRoute("/ws", ws_endpoint))
    app.ws_endpoint = BearerAuthMiddleware(ws_endpoint, api_key) if api_key else ws_endpoint
    app.state.openenv_settings = resolved
    app.state.openenv_sessions = manager
    app.state.openenv_models = {
        "action": action_cls,
        "observation": observation_cls,
        "state": state_cls,
    }

    @app.get("/health", tags=["info"])
    async def health() -> dict[str, Any]:
        return {
            "status": "draining" if manager.draining else "healthy",
            "active_sessions": manager.active,
            "detached_sessions": manager.detached,
            "warm_instances": len(manager.warm),
            "max_sessions": manager.capacity,  # of this worker
            "workers": config.workers,
            "ws_sessions": manager.count("ws"),
            "http_sessions": manager.count("http"),
            "sessions_opened": manager.total_opened,
            "abandoned_sessions": manager.abandoned,
            "stuck_threads": runner.stuck_threads,
            "runtime_version": __version__,
            "auth_required": bool(api_key),
            "pid": os.getpid(),
        }

    install_lifecycle_routes(app, manager)

    if config.metrics:

        @app.get("/metrics", tags=["info"], response_class=Response)
        async def metrics() -> Response:
            """Sessions, steps, latencies and refusals in the Prometheus text format (every
            worker's totals); behind the API key unless the server runs with --public-metrics."""
            return Response(exporter.render(), media_type=CONTENT_TYPE)

    @app.get("/schema", tags=["info"])
    async def get_schema() -> dict[str, Any]:
        return schema

    own_metadata = env_cls is not None and overrides(env_cls, "get_metadata")

    @app.get("/metadata", tags=["info"])
    async def get_metadata(request: Request) -> Any:
        if own_metadata and "custom" not in metadata:
            # The environment describes itself: ask a short-lived instance (in a slot) once.
            client = client_identity(request.scope, bool(api_key))
            try:
                async with manager.borrow(client) as instance:
                    custom = await runner.bounded(instance, instance.get_metadata)
            except NoCapacity as refused:
                return JSONResponse({"detail": refused.message}, status_code=refused.status)
            given = custom.model_dump() if hasattr(custom, "model_dump") else dict(custom)
            metadata.update({k: v for k, v in given.items() if v is not None}, custom=True)
        return {k: v for k, v in metadata.items() if k != "custom"}

    http_step = None
    if not ref.production:  # POST /step: answered by http_step, declared by the route
        http_step = HttpStep(
            manager,
            action_validator(action_cls),
            len(action_cls.model_fields) + EXTRA_FIELDS_ALLOWED,
            partial(FastAPI.__call__, app),
        )
        _add_routes(app, build_http_router(manager, http_step.answer, bool(api_key)))
    _add_routes(app, build_checkpoint_router(checkpointer, auth_required=bool(api_key)))
    _add_routes(app, build_mcp_router(mcp_handler))
    # Last: its /{env_name}/... patterns must not shadow the routes above.
    _add_routes(app, build_task_router(manager, str(env_name), bool(api_key)))

    public = frozenset({"/health"})
    if config.web_interface:
        from ..web import STATIC_DIR, mount_web

        mount_web(app)
        public = public_paths(STATIC_DIR)
    if config.metrics and config.public_metrics:
        public = public | {"/metrics"}

    app.add_middleware(BodyLimitMiddleware, max_bytes=config.max_message_bytes)
    if api_key:
        app.add_middleware(BearerAuthMiddleware, api_key=api_key, public=public)
    if http_step is not None:  # the same middlewares around the raw POST /step
        fast: Any = BodyLimitMiddleware(http_step, max_bytes=config.max_message_bytes)
        app.http_step = BearerAuthMiddleware(fast, api_key, public) if api_key else fast
    return app


def _add_routes(app: FastAPI, router: APIRouter) -> None:
    # The routes themselves, not a nested router: code that lists app.routes sees every path.
    app.router.routes.extend(router.routes)

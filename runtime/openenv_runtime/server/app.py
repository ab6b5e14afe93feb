"""``create_app``: the FastAPI application that serves one environment."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11+; the runtime also supports 3.10

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.routing import WebSocketRoute

from openenv_runtime._version import __version__
from openenv_runtime.environment import Environment, overrides
from openenv_runtime.mcp import code_mode
from openenv_runtime.models import Action, Observation, State
from openenv_runtime.observability.tracing import tracer
from openenv_runtime.redaction import install_redaction
from openenv_runtime.server.app_inputs import (
    check_env,
    check_model,
    declared_models,
    first_line,
    readme_text,
)
from openenv_runtime.server.config.fields import ServerSettings
from openenv_runtime.server.config.lifecycle import LifecycleSettings
from openenv_runtime.server.config.reference_options import (
    ReferenceKeywords,
    resolve_reference_options,
)
from openenv_runtime.server.config.settings import load_settings
from openenv_runtime.server.guards.auth import BearerAuthMiddleware, public_paths
from openenv_runtime.server.guards.limits import (
    EXTRA_FIELDS_ALLOWED,
    BodyLimitMiddleware,
    client_identity,
)
from openenv_runtime.server.http.docs_pages import install_docs
from openenv_runtime.server.http.routes import build_http_router
from openenv_runtime.server.http.step import HttpStep
from openenv_runtime.server.http.tasks import build_task_router
from openenv_runtime.server.mcp import MCPHandler, build_mcp_router, serve_attached
from openenv_runtime.server.metrics import CONTENT_TYPE, MULTIPROC_VARIABLE, Exporter
from openenv_runtime.server.running.actions import action_validator
from openenv_runtime.server.running.adapter import EnvRunner
from openenv_runtime.server.running.env_class import ClassAdapter
from openenv_runtime.server.sessions import drain
from openenv_runtime.server.sessions.checkpoint_ops import Checkpointer, build_checkpoint_router
from openenv_runtime.server.sessions.checkpoints import CheckpointBounds, CheckpointStore
from openenv_runtime.server.sessions.drain import install_lifecycle_routes
from openenv_runtime.server.sessions.gc_cycles import (
    CYCLE_COLLECTION_EVERY,
    collect_connection_cycles,
)
from openenv_runtime.server.sessions.registry import NoCapacity, SessionManager
from openenv_runtime.server.ws.endpoint import WebSocketEndpoint
from openenv_runtime.wire import EnvironmentMetadata

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
    http_step: Any = None  # POST /step of HTTP sessions, raw (server/http/step.py)

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
    settings: ServerSettings | None = None,
    metadata: EnvironmentMetadata | None = None,
    reset_observation_cls: type[Observation] | None = None,
    **reference: Unpack[ReferenceKeywords],
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
        settings: this app's defaults for the server settings
            (``ServerSettings(max_concurrent_envs=4, web_interface=False)``; the settings table
            of ``openenv serve`` in docs/cli.md). Only the fields given count, and each
            replaces the built-in default only: a command-line flag, an environment variable
            (``MAX_CONCURRENT_ENVS``, ...) or ``openenv.yaml``'s ``server:`` section still
            wins, so whoever runs the server has the last word; the server logs when it
            overrides one. An environment with ``SUPPORTS_CONCURRENT_SESSIONS = False`` gets
            one session at a time whatever is set.
        metadata: what ``/metadata`` reports (``EnvironmentMetadata(name=..., description=...,
            version=...)``). Left out: the class's name and docstring, version 0.0.0, and a
            README.md beside the environment's module (or up to two folders above);
            ``readme_content`` may also name a ``.md`` file.
        reset_observation_cls: the observation ``reset`` returns, when it differs (``/schema``).
        **reference: the reference OpenEnv's keywords, accepted so its apps run unchanged:
            ``env_name`` (the name when ``metadata`` gives none), ``max_concurrent_envs`` and
            ``concurrency_config`` (defaults for the settings of the same names, like
            ``settings=``), ``mode`` (``"production"`` leaves out the HTTP session routes)
            and its Gradio page's options, which have no effect here but for
            ``title_override`` (see ``openenv_runtime.server.config.reference_options``).
    """
    ref = resolve_reference_options(state_cls, reference, settings)
    state_cls = ref.state_cls
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
    resolved = load_settings(code=ref.code)
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

    given = metadata.model_dump() if metadata is not None else {}
    env_name = (
        given.get("name")
        or ref.env_name
        or (
            env_cls.__name__ if env_cls is not None else getattr(factory, "__name__", "environment")
        )
    )
    described = {
        "name": env_name,
        # the class's own docstring only (inspect.getdoc would inherit Environment's)
        "description": given.get("description")
        or first_line(env_cls.__doc__ if env_cls else None)
        or f"The {env_name} environment",
        "version": given.get("version") or "0.0.0",
        "readme_content": readme_text(given.get("readme_content"), env_cls or factory),
        "author": given.get("author"),
        "documentation_url": given.get("documentation_url"),
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
        description=str(described["description"]),
        docs_url=None,
        redoc_url=None,
    )
    install_docs(app)  # the same pages, with the title escaped and a CSP
    traced = tracer(str(env_name))  # None unless OTEL_* variables turn tracing on
    manager.tracer = traced  # HTTP sessions' spans (http_api.py)
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
    app.state.openenv_checkpoints = checkpointer
    step_tally = manager.tally if config.metrics else None  # off: no per-step counting
    mcp_handler = MCPHandler(manager, auth_required=bool(api_key), tally=step_tally)
    ws_endpoint = WebSocketEndpoint(
        manager,
        action_cls,
        config.max_message_bytes,
        auth_required=bool(api_key),
        capacity_refusal=config.capacity_refusal,
        inline_frames=config.inline_frames,
        tracer=traced,
        validate_action=action_validator(action_cls),
        tally=step_tally,
        checkpoints=checkpointer,
        mcp=mcp_handler.handle,
        attach=serve_attached,
        max_vector_envs=config.max_vector_envs,
    )
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
            "max_vector_envs": config.max_vector_envs,  # 0: no vector sessions (server/ws/vector.py)
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
        if own_metadata and "custom" not in described:
            # The environment describes itself: ask a short-lived instance (in a slot) once.
            client = client_identity(request.scope, bool(api_key))
            try:
                async with manager.borrow(client) as instance:
                    custom = await runner.bounded(instance, instance.get_metadata)
            except NoCapacity as refused:
                return JSONResponse({"detail": refused.message}, status_code=refused.status)
            told = custom.model_dump() if hasattr(custom, "model_dump") else dict(custom)
            described.update({k: v for k, v in told.items() if v is not None}, custom=True)
        return {k: v for k, v in described.items() if k != "custom"}

    http_step = None
    if not ref.production:  # POST /step: answered by http_step, declared by the route
        http_step = HttpStep(
            manager,
            action_validator(action_cls),
            len(action_cls.model_fields) + EXTRA_FIELDS_ALLOWED,
            partial(FastAPI.__call__, app),
            step_tally,
        )
        _add_routes(app, build_http_router(manager, http_step.answer, bool(api_key)))
    _add_routes(app, build_checkpoint_router(checkpointer, auth_required=bool(api_key)))
    _add_routes(app, build_mcp_router(mcp_handler))
    # Last: its /{env_name}/... patterns must not shadow the routes above.
    _add_routes(app, build_task_router(manager, str(env_name), bool(api_key)))

    public = frozenset({"/health"})
    if config.web_interface:
        from openenv_runtime.web import STATIC_DIR, mount_web

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

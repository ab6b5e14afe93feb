"""The reference's ``create_app`` options, mapped onto ours, and its ``HTTPEnvServer`` face.

Every keyword the reference's ``create_app`` takes is accepted (none refused):

* ``env_name`` names the environment (``/metadata``, the Task API routes); the reference
  passes it positionally in the slot where ours takes ``state_cls``, and both work.
* ``max_concurrent_envs`` and ``concurrency_config`` (its ``session_timeout`` too) set
  capacity and the idle timeout; giving both is an error, as in the reference.
* ``mode="production"`` (or ``OPENENV_MODE=production``) leaves out the HTTP
  ``/reset``, ``/step``, ``/state``, ``/close`` routes.
* ``gradio_builder``, ``custom_tab_name``, ``custom_tab_primary``, ``show_default_tab`` and
  ``title_override`` shape the reference's Gradio page; ours is a static page built from
  the schemas, so they are accepted and ignored (logged once), and ``title_override``
  becomes the page title.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI

from ..models import Action, Observation, State
from ..wire import ConcurrencyConfig, ServerCapacityStatus, ServerMode

logger = logging.getLogger("openenv_runtime.server")

MCP_ACTION_TYPES = ("list_tools", "call_tool")
GRADIO_OPTIONS = ("gradio_builder", "custom_tab_name", "custom_tab_primary", "show_default_tab")


@dataclass(frozen=True)
class ReferenceOptions:
    env_name: str | None
    state_cls: type[State]
    max_concurrent_envs: int | None
    session_timeout: float | None
    production: bool
    title: str | None


def resolve_reference_options(
    state_cls: Any,
    env_name: str | None,
    max_concurrent_envs: int | None,
    concurrency_config: ConcurrencyConfig | None,
    mode: ServerMode | str | None,
    title_override: str | None,
    ignored: dict[str, Any],
) -> ReferenceOptions:
    if isinstance(state_cls, str):  # create_app(Env, Act, Obs, "my_env") as reference apps write it
        env_name, state_cls = env_name or state_cls, State
    if max_concurrent_envs is not None and concurrency_config is not None:
        raise ValueError(
            "create_app() got both max_concurrent_envs and concurrency_config; pass one of them."
        )
    session_timeout = None
    if concurrency_config is not None:
        max_concurrent_envs = concurrency_config.max_concurrent_envs
        session_timeout = concurrency_config.session_timeout
    mode_value = mode if mode is not None else os.environ.get("OPENENV_MODE", "simulation")
    try:
        production = (
            ServerMode(str(getattr(mode_value, "value", mode_value)).lower())
            is ServerMode.PRODUCTION
        )
    except ValueError:
        raise ValueError(f"mode must be 'simulation' or 'production', got {mode_value!r}") from None
    used = sorted(k for k, v in ignored.items() if v not in (None, False, True, "Custom"))
    if used:
        logger.info(
            "create_app(): %s shape the reference's Gradio page; this server's web page is built "
            "from your schemas, so they have no effect.",
            ", ".join(used),
        )
    return ReferenceOptions(
        env_name=env_name,
        state_cls=state_cls,
        max_concurrent_envs=max_concurrent_envs,
        session_timeout=session_timeout,
        production=production,
        title=title_override,
    )


def action_validator(action_cls: type[Action]) -> Callable[[Any], Any]:
    """Validate step data into ``action_cls``.

    MCP ``list_tools`` / ``call_tool`` data is recognised by its ``type`` when the server
    hosts tools, that is when ``action_cls`` is the base ``Action`` or an MCP action class
    (as in the reference); an environment with an action class of its own validates
    everything itself, so ``type: call_tool`` cannot slip past its validation.
    """
    validate = action_cls.__pydantic_validator__.validate_python
    from ..mcp.types import CallToolAction, ListToolsAction

    if action_cls not in (Action, CallToolAction, ListToolsAction):
        return validate

    def validate_with_tools(data: Any) -> Any:
        if type(data) is dict:
            kind = data.get("type")
            if kind == "list_tools":
                return ListToolsAction.model_validate(data)
            if kind == "call_tool":
                return CallToolAction.model_validate(data)
        return validate(data)

    return validate_with_tools


class HTTPEnvServer:
    """The reference's server object, as a thin face over :func:`openenv_runtime.create_app`.

    ``HTTPEnvServer(Env, Act, Obs, ...).register_routes(app)`` adds this server's routes,
    its session lifecycle and its token check to an existing FastAPI app.
    """

    def __init__(
        self,
        env: Callable[[], Any],
        action_cls: type[Action],
        observation_cls: type[Observation],
        max_concurrent_envs: int | None = None,
        concurrency_config: ConcurrencyConfig | None = None,
        env_name: str | None = None,
        state_cls: type[State] = State,
        *,
        reset_observation_cls: type[Observation] | None = None,
    ) -> None:
        if not callable(env):
            raise TypeError(
                f"env must be the environment class or a factory, got an instance of {type(env).__name__}"
            )
        self._env_factory = env
        # None is allowed for tool-only (MCP) servers: any action with a known type is accepted.
        self.action_cls = action_cls or Action
        self.observation_cls = observation_cls or Observation
        self.reset_observation_cls = reset_observation_cls or observation_cls
        self.state_cls = state_cls
        self.env_name = env_name or getattr(env, "__name__", "environment")
        if max_concurrent_envs is not None and concurrency_config is not None:
            raise ValueError("pass max_concurrent_envs or concurrency_config, not both")
        self._concurrency_config = concurrency_config or ConcurrencyConfig(
            max_concurrent_envs=max_concurrent_envs or 1
        )
        self._app: FastAPI | None = None

    def _build(self, mode: ServerMode | str | None) -> FastAPI:
        from .app import create_app

        return create_app(
            self._env_factory,
            self.action_cls,
            self.observation_cls,
            self.state_cls,
            env_name=self.env_name,
            concurrency_config=self._concurrency_config,
            reset_observation_cls=self.reset_observation_cls,
            mode=mode,
            enable_web_interface=False,
        )

    def register_routes(self, app: FastAPI, mode: ServerMode | str = ServerMode.SIMULATION) -> None:
        """Add the environment's routes to ``app``; its sessions start and stop with ``app``."""
        inner = self._app = self._build(mode)
        app.router.routes.extend(inner.router.routes)
        outer_lifespan = app.router.lifespan_context
        inner_lifespan = inner.router.lifespan_context

        @asynccontextmanager
        async def lifespan(a: Any) -> AsyncIterator[Any]:
            async with inner_lifespan(inner), outer_lifespan(a) as state:
                yield state

        app.router.lifespan_context = lifespan
        api_key = inner.state.openenv_settings.values.api_key_value
        if api_key:
            from .auth import BearerAuthMiddleware

            app.add_middleware(BearerAuthMiddleware, api_key=api_key)
        app.state.openenv_sessions = inner.state.openenv_sessions

    @property
    def _manager(self) -> Any:
        if self._app is None:
            raise RuntimeError("call register_routes(app) first")
        return self._app.state.openenv_sessions

    @property
    def active_sessions(self) -> int:
        return int(self._manager.active) if self._app is not None else 0

    @property
    def max_concurrent_envs(self) -> int:
        if self._app is not None:
            return int(self._manager.capacity)
        return self._concurrency_config.max_concurrent_envs

    @property
    def concurrency_config(self) -> ConcurrencyConfig:
        return self._concurrency_config

    @property
    def is_concurrency_safe(self) -> bool:
        return bool(getattr(self._env_factory, "SUPPORTS_CONCURRENT_SESSIONS", False))

    def get_capacity_status(self) -> ServerCapacityStatus:
        return ServerCapacityStatus.from_counts(self.active_sessions, self.max_concurrent_envs)


def create_fastapi_app(
    env: Callable[[], Any],
    action_cls: type[Action],
    observation_cls: type[Observation],
    max_concurrent_envs: int | None = None,
    concurrency_config: ConcurrencyConfig | None = None,
    env_name: str | None = None,
    state_cls: type[State] = State,
    *,
    mode: ServerMode | str | None = None,
    reset_observation_cls: type[Observation] | None = None,
) -> FastAPI:
    """The reference's app factory without a web page: ``create_app`` with the web page off."""
    from .app import create_app

    return create_app(
        env,
        action_cls,
        observation_cls,
        state_cls,
        env_name=env_name,
        max_concurrent_envs=max_concurrent_envs,
        concurrency_config=concurrency_config,
        mode=mode,
        reset_observation_cls=reset_observation_cls,
        enable_web_interface=False,
    )


def create_web_interface_app(
    env: Callable[[], Any],
    action_cls: type[Action],
    observation_cls: type[Observation],
    env_name: str | None = None,
    max_concurrent_envs: int | None = None,
    concurrency_config: ConcurrencyConfig | None = None,
    state_cls: type[State] = State,
    **options: Any,
) -> FastAPI:
    """The reference's app factory with its web page: ``create_app`` with the web page on."""
    from .app import create_app

    return create_app(
        env,
        action_cls,
        observation_cls,
        state_cls,
        env_name=env_name,
        max_concurrent_envs=max_concurrent_envs,
        concurrency_config=concurrency_config,
        enable_web_interface=True,
        **options,
    )


class WebInterfaceManager:
    """The reference's Gradio page manager; this runtime's page needs none."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            "WebInterfaceManager drives the reference's Gradio page. Here the web page at /web is "
            "built from your schemas: create_app(..., enable_web_interface=True) serves it."
        )

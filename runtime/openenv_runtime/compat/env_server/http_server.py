"""The reference's ``openenv.core.env_server.http_server``: ``HTTPEnvServer`` and
``create_fastapi_app`` as thin faces over :func:`openenv_runtime.create_app` (which takes
every option of the reference's ``create_app``; see :mod:`openenv_runtime.server.config.reference_options`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from openenv_runtime.server.app import create_app
from openenv_runtime.server.config.fields import ServerSettings
from openenv_runtime.server.guards.auth import BearerAuthMiddleware

from ...environment import Environment
from ...models import Action, Observation, State
from ...wire import ConcurrencyConfig, ServerCapacityStatus, ServerMode


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
        return create_app(
            self._env_factory,
            self.action_cls,
            self.observation_cls,
            self.state_cls,
            env_name=self.env_name,
            concurrency_config=self._concurrency_config,
            reset_observation_cls=self.reset_observation_cls,
            mode=mode,
            settings=ServerSettings(web_interface=False),
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
        settings=ServerSettings(web_interface=False),
    )


__all__ = [
    "Action",
    "ConcurrencyConfig",
    "Environment",
    "HTTPEnvServer",
    "Observation",
    "ServerMode",
    "State",
    "create_app",
    "create_fastapi_app",
]

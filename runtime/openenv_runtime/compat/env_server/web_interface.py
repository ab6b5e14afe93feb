"""Alias of the reference's ``openenv.core.env_server.web_interface``.

The reference serves a Gradio page; this runtime serves a static page built from the
schemas (``/web``). The app factories and the metadata loader work; the Gradio manager
says what to use instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from openenv_runtime.server.app import create_app
from openenv_runtime.server.config.fields import ServerSettings

from ...models import Action, Observation, State
from ...wire import ConcurrencyConfig, EnvironmentMetadata


def load_environment_metadata(env: object, env_name: str | None = None) -> EnvironmentMetadata:
    """``env.get_metadata()`` when it has one, else a description from its class name."""
    getter = getattr(env, "get_metadata", None)
    if callable(getter):
        found = getter()
        if isinstance(found, EnvironmentMetadata):
            return found
    name = str(env_name or getattr(env, "__name__", type(env).__name__))
    return EnvironmentMetadata(name=name, description=f"{name} environment")


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
    return create_app(
        env,
        action_cls,
        observation_cls,
        state_cls,
        env_name=env_name,
        max_concurrent_envs=max_concurrent_envs,
        concurrency_config=concurrency_config,
        settings=ServerSettings(web_interface=True),
        **options,
    )


class WebInterfaceManager:
    """The reference's Gradio page manager; this runtime's page needs none."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            "WebInterfaceManager drives the reference's Gradio page. Here the web page at /web is "
            "built from your schemas: create_app(..., settings=ServerSettings(web_interface=True)) serves it."
        )


__all__ = ["WebInterfaceManager", "create_web_interface_app", "load_environment_metadata"]

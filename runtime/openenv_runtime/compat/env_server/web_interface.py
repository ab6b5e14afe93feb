"""Alias of the reference's ``openenv.core.env_server.web_interface``.

The reference serves a Gradio page; this runtime serves a static page built from the
schemas (``/web``). The app factories and the metadata loader work; the Gradio manager
says what to use instead.
"""

from __future__ import annotations

from ...server.compat import WebInterfaceManager, create_web_interface_app
from ...wire import EnvironmentMetadata


def load_environment_metadata(env: object, env_name: str | None = None) -> EnvironmentMetadata:
    """``env.get_metadata()`` when it has one, else a description from its class name."""
    getter = getattr(env, "get_metadata", None)
    if callable(getter):
        found = getter()
        if isinstance(found, EnvironmentMetadata):
            return found
    name = str(env_name or getattr(env, "__name__", type(env).__name__))
    return EnvironmentMetadata(name=name, description=f"{name} environment")


__all__ = ["WebInterfaceManager", "create_web_interface_app", "load_environment_metadata"]

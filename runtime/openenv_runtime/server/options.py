"""The reference's ``create_app`` options, mapped onto ours.

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
from dataclasses import dataclass
from typing import Any

from ..models import State
from ..wire import ConcurrencyConfig, ServerMode

logger = logging.getLogger("openenv_runtime.server")

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

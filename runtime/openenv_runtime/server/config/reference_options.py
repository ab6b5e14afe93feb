"""The reference's ``create_app`` keywords, mapped onto ours.

Every keyword the reference's ``create_app`` takes is accepted (none refused):

* ``env_name`` names the environment (``/metadata``, the Task API routes); the reference
  passes it positionally in the slot where ours takes ``state_cls``, and both work.
* ``max_concurrent_envs`` and ``concurrency_config`` (its ``session_timeout`` too) are the
  app's defaults for the server settings of the same names, as ``settings=`` fields are;
  giving both is an error, as in the reference, and so is giving one of them in
  ``settings=`` too.
* ``mode="production"`` (or ``OPENENV_MODE=production``) leaves out the HTTP
  ``/reset``, ``/step``, ``/state``, ``/close`` routes.
* ``gradio_builder``, ``custom_tab_name``, ``custom_tab_primary``, ``show_default_tab`` and
  ``title_override`` shape the reference's Gradio page; ours is a static page built from
  the schemas, so they are accepted and ignored (logged once), and ``title_override``
  becomes the page title.

This module is the one place where they meet the settings: :func:`resolve_reference_options`
turns them and ``create_app``'s ``settings=`` into the ``create_app()`` layer of
:func:`~openenv_runtime.server.config.settings.load_settings`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from openenv_runtime.models import State
from openenv_runtime.server.config.fields import KEYS, ServerSettings
from openenv_runtime.wire import ConcurrencyConfig, ServerMode

logger = logging.getLogger("openenv_runtime.server")

GRADIO_OPTIONS = ("gradio_builder", "custom_tab_name", "custom_tab_primary", "show_default_tab")
METADATA_KEYWORDS = ("name", "description", "version", "readme", "author", "documentation_url")
"""Keywords of ``EnvironmentMetadata`` (``readme``: its ``readme_content``), for the hint below."""


class ReferenceKeywords(TypedDict, total=False):
    """The reference's ``create_app`` keywords (see the module)."""

    env_name: str | None
    max_concurrent_envs: int | None
    concurrency_config: ConcurrencyConfig | None
    mode: ServerMode | str | None
    gradio_builder: Callable[..., Any] | None
    custom_tab_name: str
    custom_tab_primary: bool
    show_default_tab: bool
    title_override: str | None


@dataclass(frozen=True)
class ReferenceOptions:
    env_name: str | None
    state_cls: type[State]
    code: dict[str, Any]
    """The ``create_app()`` layer of the settings: each setting the app gave, by field name."""
    production: bool
    title: str | None


def resolve_reference_options(
    state_cls: Any, keywords: Mapping[str, Any], settings: ServerSettings | None
) -> ReferenceOptions:
    """Check ``create_app``'s keywords and map them, with ``settings``, onto ours."""
    unknown = sorted(set(keywords) - set(ReferenceKeywords.__annotations__))
    if unknown:
        raise TypeError(_unknown_keywords(unknown))
    env_name = keywords.get("env_name")
    if isinstance(state_cls, str):  # create_app(Env, Act, Obs, "my_env") as reference apps write it
        env_name, state_cls = env_name or state_cls, State
    given = {} if settings is None else {k: getattr(settings, k) for k in settings.model_fields_set}
    max_envs, concurrency = keywords.get("max_concurrent_envs"), keywords.get("concurrency_config")
    if max_envs is not None and concurrency is not None:
        raise ValueError(
            "create_app() got both max_concurrent_envs and concurrency_config; pass one of them."
        )
    from_keywords: dict[str, Any] = {}
    if concurrency is not None:
        from_keywords = {"max_concurrent_envs": concurrency.max_concurrent_envs}
        if concurrency.session_timeout is not None:
            from_keywords["session_timeout"] = concurrency.session_timeout
    elif max_envs is not None:
        from_keywords = {"max_concurrent_envs": max_envs}
    twice = sorted(set(from_keywords) & set(given))
    if twice:
        raise ValueError(
            f"create_app() got {', '.join(twice)} both as a keyword and in settings=; pass it once."
        )
    mode = keywords.get("mode")
    mode_value = mode if mode is not None else os.environ.get("OPENENV_MODE", "simulation")
    try:
        production = (
            ServerMode(str(getattr(mode_value, "value", mode_value)).lower())
            is ServerMode.PRODUCTION
        )
    except ValueError:
        raise ValueError(f"mode must be 'simulation' or 'production', got {mode_value!r}") from None
    used = sorted(k for k in GRADIO_OPTIONS if keywords.get(k) not in (None, False, True, "Custom"))
    if used:
        logger.info(
            "create_app(): %s shape the reference's Gradio page; this server's web page is built "
            "from your schemas, so they have no effect.",
            ", ".join(used),
        )
    return ReferenceOptions(
        env_name=env_name,
        state_cls=state_cls,
        code={**given, **from_keywords},
        production=production,
        title=keywords.get("title_override"),
    )


def _unknown_keywords(names: list[str]) -> str:
    hints = []
    for name in names:
        field = "web_interface" if name == "enable_web_interface" else name
        if field in KEYS:
            hints.append(f"{name}: settings=ServerSettings({field}=...)")
        elif name in METADATA_KEYWORDS:
            attribute = "readme_content" if name == "readme" else name
            hints.append(f"{name}: metadata=EnvironmentMetadata({attribute}=...)")
    where = (
        " Pass " + "; ".join(hints) + " (ServerSettings from openenv_runtime.server, "
        "EnvironmentMetadata from openenv_runtime.wire)."
        if hints
        else ""
    )
    return f"create_app() got unexpected keyword arguments: {', '.join(names)}.{where}"

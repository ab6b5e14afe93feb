"""The settings of one server program, resolved once, each with where it came from.

Every setting has one default (written here) and may be set, from strongest to weakest, by

1. a command-line flag of ``openenv serve`` or ``python -m openenv_runtime.serve``;
2. an environment variable;
3. ``openenv.yaml`` (the file named by ``OPENENV_MANIFEST``, else ``./openenv.yaml``);
4. a field given in :func:`~openenv_runtime.create_app`'s ``settings=`` (or its reference
   keywords ``max_concurrent_envs``, ``concurrency_config``) — the app author's default;
5. the default written on the field.

``create_app(Env, settings=ServerSettings(max_concurrent_envs=4))`` therefore replaces the
built-in default for that app, and an operator's flag, environment variable or
``openenv.yaml`` still overrides it (the server logs when it does). Launchers hand their flags to every worker process through
the ``OPENENV_SERVER_FLAGS`` environment variable (JSON), set before the app is imported, so
a setting acts the same with one worker or many.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings import EnvSettingsSource

from openenv_runtime.errors import EnvironmentContractError
from openenv_runtime.server.config.fields import (
    FLAGS_VARIABLE,
    KEYS,
    MANIFEST_FILE,
    MANIFEST_VARIABLE,
    SECRET_SETTINGS,
    Key,
    ServerSettings,
    Source,
)

logger = logging.getLogger("openenv_runtime.server")


@dataclass(frozen=True, slots=True)
class Origin:
    """Where one value came from: the layer, and the name it had there."""

    source: Source
    name: str  # "--port", "PORT", "openenv.yaml: server.workers", "create_app(settings=...)", "default"

    def __str__(self) -> str:
        return self.name


SUMMARY = (
    "host",
    "port",
    "workers",
    "max_concurrent_envs",
    "session_timeout",
    "step_timeout",
    "max_sessions_per_client",
    "web_interface",
    "max_message_bytes",
    "forwarded_allow_ips",
    "inline_frames",
    "checkpoint_dir",
    "checkpoint_ttl",
    "max_checkpoints",
    "max_checkpoint_total_bytes",
)
"""The settings a server states when it starts (``openenv serve``'s table, the server's log)."""
_DERIVED = {"max_checkpoint_total_bytes": "checkpoint_total_bytes"}
"""A setting whose unset value is worked out from others: the property that says what it is."""


@dataclass(frozen=True, slots=True)
class ResolvedSettings:
    """The settings and, for each, where its value came from."""

    values: ServerSettings
    origins: dict[str, Origin]
    code: dict[str, Any] = field(default_factory=dict)  # the settings create_app was given

    def origin(self, name: str) -> Origin:
        return self.origins[name]

    def summary(self) -> list[tuple[str, str, str]]:
        """``(setting, value, from)`` for each of :data:`SUMMARY` (None reads "off")."""
        rows = []
        for name in SUMMARY:
            value = getattr(self.values, name)
            if value is None and name in _DERIVED:
                value = getattr(self.values, _DERIVED[name])
            text = (
                "off"
                if value is None
                else str(value).lower()
                if isinstance(value, bool)
                else str(value)
            )
            rows.append((name, text, str(self.origins[name])))
        return rows

    def overrides(self) -> list[str]:
        """One line per setting given to ``create_app`` that a flag, variable or ``openenv.yaml``
        replaced."""
        return [
            f"{self.origins[name]} overrides create_app's {name}="
            f"{'<hidden>' if name in SECRET_SETTINGS else repr(value)}"
            for name, value in self.code.items()
            if name in self.origins and self.origins[name].source != "create_app()"
        ]


def app_settings(app: Any) -> ResolvedSettings | None:
    """The settings an app made by ``create_app`` resolved (its ``create_app`` arguments
    included), or None for any other ASGI app."""
    resolved = getattr(getattr(app, "state", None), "openenv_settings", None)
    return resolved if isinstance(resolved, ResolvedSettings) else None


class _Environ(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping (``os.environ`` by default)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._given = environ
        super().__init__(ServerSettings)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {k.lower(): v for k, v in self._given.items() if v.strip() != ""}


def _manifest_path(manifest: str | Path | None, environ: Mapping[str, str]) -> Path | None:
    if manifest is not None:
        return Path(manifest)
    named = environ.get(MANIFEST_VARIABLE)
    if named:
        return Path(named)
    here = Path(MANIFEST_FILE)
    return here if here.is_file() else None


def _yaml_layer(path: Path | None) -> dict[str, Any]:
    if path is None or not path.is_file():
        return {}
    import yaml  # uvicorn[standard] brings PyYAML

    from openenv_runtime.bounded_yaml import read_bounded

    try:
        data = read_bounded(path)  # size, depth and aliases bounded
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise EnvironmentContractError(f"Cannot read {path}: {exc}") from None
    found: dict[str, Any] = {}
    for name, key in KEYS.items():
        if key.yaml is None:
            continue
        current: Any = data
        for part in key.yaml.split("."):
            current = current.get(part) if isinstance(current, dict) else None
        if current is not None:
            found[name] = current
    return found


def _flags_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    raw = environ.get(FLAGS_VARIABLE)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        raise EnvironmentContractError(f"{FLAGS_VARIABLE} is not JSON: {raw[:80]!r}") from None
    if not isinstance(data, dict):
        raise EnvironmentContractError(f"{FLAGS_VARIABLE} must be a JSON object.")
    return {k: v for k, v in data.items() if k in KEYS and v is not None}


def flags_variable(flags: Mapping[str, Any]) -> str:
    """The value of ``OPENENV_SERVER_FLAGS`` that hands ``flags`` (field name → value) to workers."""
    return json.dumps({k: v for k, v in flags.items() if v is not None and k in KEYS})


def load_settings(
    *,
    flags: Mapping[str, Any] | None = None,
    code: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    manifest: str | Path | None = None,
) -> ResolvedSettings:
    """Resolve every setting: flag, environment variable, ``openenv.yaml``, ``create_app()``, default.

    ``flags`` are this process's own command-line values (field name → value, None: not
    given), merged over those in ``OPENENV_SERVER_FLAGS``; ``code`` are the settings
    ``create_app`` was given (each one given, None included: None is a value, e.g. no
    timeout). Raises :class:`EnvironmentContractError` naming the bad value's source.
    """
    environ = os.environ if environ is None else environ
    flag_values = {
        **_flags_layer(environ),
        **{k: v for k, v in (flags or {}).items() if v is not None},
    }
    unknown = set(flag_values) - set(KEYS)
    if unknown:
        raise EnvironmentContractError(f"Unknown server settings: {', '.join(sorted(unknown))}.")
    env_values = {
        name: value
        for alias, value in _Environ(environ)().items()
        if (name := _field_for_env(alias)) is not None
    }
    yaml_path = _manifest_path(manifest, environ)
    layers: list[tuple[Source, dict[str, Any]]] = [
        ("flag", flag_values),
        ("env", env_values),
        ("openenv.yaml", _yaml_layer(yaml_path)),
        ("create_app()", dict(code or {})),
    ]
    merged: dict[str, Any] = {}
    origins: dict[str, Origin] = {}
    for name, key in KEYS.items():
        origins[name] = Origin("default", "default")
        for source, layer in layers:
            if name in layer:
                merged[name] = layer[name]
                origins[name] = Origin(source, _origin_name(source, key))
                break
    try:
        values = ServerSettings(**merged)
    except ValidationError as exc:
        raise EnvironmentContractError(_explain(exc, merged, origins)) from None
    resolved = ResolvedSettings(
        values, origins, {k: v for k, v in (code or {}).items() if k in KEYS}
    )
    for line in resolved.overrides():
        logger.info("setting %s", line)
    return resolved


def _field_for_env(alias: str) -> str | None:
    for name, key in KEYS.items():
        if key.env.lower() == alias.lower():
            return name
    return None


def _origin_name(source: Source, key: Key) -> str:
    if source == "flag":
        return key.flag.split("/")[0] if key.flag else f"--{key.name.replace('_', '-')}"
    if source == "env":
        return key.env
    if source == "openenv.yaml":
        return f"openenv.yaml: {key.yaml}"
    return "create_app(settings=...)"


def _explain(exc: ValidationError, merged: Mapping[str, Any], origins: Mapping[str, Origin]) -> str:
    lines = []
    for error in exc.errors(include_url=False)[:5]:
        name = str(error["loc"][0]) if error["loc"] else ""
        origin = origins.get(name)
        shown = "<hidden>" if name in SECRET_SETTINGS else repr(merged.get(name))
        where = f" (from {origin})" if origin else ""
        lines.append(f"{name}={shown}{where}: {error['msg']}")
    fix = "; ".join(
        f"{KEYS[n].env} / {KEYS[n].flag or 'no flag'} / {KEYS[n].yaml or 'not in openenv.yaml'}"
        for n in dict.fromkeys(str(e["loc"][0]) for e in exc.errors() if e["loc"])
        if n in KEYS
    )
    return "Invalid server setting: " + "; ".join(lines) + f". Set it via {fix}."

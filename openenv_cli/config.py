"""Resolve a setting the same way in every command: flag, then environment variable,
then ``openenv.yaml``, then the default.

Commands declare their settings once and resolve them into a typed object::

    PORT = Setting("port", env="PORT", manifest_key="port", default=8000, parse=parse_int)
    port = PORT.resolve(flag=port_option, manifest=manifest)   # Resolved(value=8000, source="default")

``Resolved.describe()`` tells the user where a value came from (for ``--debug`` output and
error messages).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from openenv_cli.errors import UsageError

if TYPE_CHECKING:
    from pydantic import TypeAdapter

T = TypeVar("T")
ConfigSource = Literal["flag", "env", "manifest", "default"]


@cache
def _bool_adapter() -> TypeAdapter[bool]:
    from pydantic import TypeAdapter  # 50 ms: loaded when a boolean is parsed, not for --help

    return TypeAdapter(bool)


def parse_bool(raw: str) -> bool:
    """pydantic's boolean rules, the same the runtime's settings use (1/0, true/false, yes/no, on/off)."""
    from pydantic import ValidationError

    try:
        return _bool_adapter().validate_strings(raw.strip())
    except ValidationError:
        raise ValueError("expected one of 1/0, true/false, yes/no, on/off") from None


def parse_int(raw: str) -> int:
    return int(raw.strip())


def parse_float(raw: str) -> float:
    return float(raw.strip())


def parse_str(raw: str) -> str:
    return raw


@dataclass(frozen=True)
class Resolved(Generic[T]):
    """A resolved value and where it came from."""

    value: T
    source: ConfigSource
    origin: str | None = None  # "--port", "PORT", "openenv.yaml: server.workers"

    def describe(self) -> str:
        return f"{self.value!r} (from {self.origin or self.source})"


def manifest_lookup(manifest: Any, dotted_key: str) -> Any:
    """Read ``server.workers`` from a manifest model or a plain mapping; None when unset."""
    current = manifest
    for part in dotted_key.split("."):
        if current is None:
            return None
        if isinstance(current, Mapping):
            current = current.get(part)
        else:
            current = getattr(current, part, None)
    return current


def resolve(
    name: str,
    *,
    flag: T | None = None,
    env: str | None = None,
    manifest: Any = None,
    manifest_key: str | None = None,
    default: T | None = None,
    parse: Callable[[str], T] | None = None,
    environ: Mapping[str, str] | None = None,
    flag_name: str | None = None,
) -> Resolved[T]:
    """Resolve one setting: ``flag`` (when not None), then ``$env`` (when set and not empty),
    then ``manifest_key`` in ``manifest`` (when not None), then ``default``.

    An environment value that ``parse`` rejects is a usage error naming the variable.
    """
    if flag is not None:
        return Resolved(flag, "flag", flag_name or f"--{name.replace('_', '-')}")
    environ = os.environ if environ is None else environ
    if env is not None:
        raw = environ.get(env)
        if raw is not None and raw.strip() != "":
            try:
                value = (parse or parse_str)(raw)
            except ValueError as exc:
                raise UsageError(
                    f"Environment variable {env}={raw!r} is not valid for {name}: {exc}.",
                    hint=f"Fix or unset {env} (e.g. `unset {env}`).",
                ) from None
            return Resolved(value, "env", env)  # type: ignore[arg-type]
    if manifest is not None and manifest_key is not None:
        value = manifest_lookup(manifest, manifest_key)
        if value is not None:
            return Resolved(value, "manifest", f"openenv.yaml: {manifest_key}")
    return Resolved(default, "default", "default")  # type: ignore[arg-type]


@dataclass(frozen=True)
class Setting(Generic[T]):
    """A declared setting: its name, environment variable, manifest key, default and parser."""

    name: str
    env: str | None = None
    manifest_key: str | None = None
    default: T | None = None
    parse: Callable[[str], T] | None = None

    def resolve(
        self, flag: T | None = None, manifest: Any = None, environ: Mapping[str, str] | None = None
    ) -> Resolved[T]:
        return resolve(
            self.name,
            flag=flag,
            env=self.env,
            manifest=manifest,
            manifest_key=self.manifest_key,
            default=self.default,
            parse=self.parse,
            environ=environ,
        )


_ASSIGNMENT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# A bare --secret entry shaped like an environment variable name is named in errors; anything
# else (lower case, long, mixed) could be the secret value typed by mistake and is not.
_SHOWN_SECRET_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,63}")


def parse_assignments(
    values: Iterable[str],
    option: str,
    *,
    environ: Mapping[str, str] | None = None,
    bare_from_env: bool = False,
    secret: bool = False,
) -> dict[str, str]:
    """``["K=V", ...]`` → ``{"K": "V"}`` for options like ``--build-arg``, ``-e``, ``--secret``.

    Later entries win. With ``bare_from_env`` (always for ``secret``), a bare ``K`` takes the
    value of the environment variable ``K``. With ``secret``, errors quote no part of the
    entry (a mistyped entry may be the secret itself). Raises :class:`UsageError` naming ``option``.
    """
    environ = os.environ if environ is None else environ
    parsed: dict[str, str] = {}
    for number, raw in enumerate(values, start=1):
        key, sep, value = raw.partition("=")
        key = key.strip()
        which = f"{option} #{number}" if secret else f"{option} {key or repr(raw)}"
        shown = "KEY" if secret else (key or "NAME")
        if not _ASSIGNMENT_NAME.match(key):
            raise UsageError(
                f"{which} is not NAME=VALUE (a NAME of letters, digits and underscores).",
                hint=f"For example: {option} API_KEY=...",
            )
        if not sep:
            if secret and _SHOWN_SECRET_NAME.fullmatch(key):
                # an environment variable's name (upper case), not a mistyped value: name it
                which, shown = f"{option} {key}", key
            if not (bare_from_env or secret):
                raise UsageError(f"{which} has no value.", hint=f"Write {option} {shown}=VALUE.")
            if key not in environ:
                raise UsageError(
                    f"{which} has no value and names no environment variable that is set.",
                    hint=f"Write {option} {shown}=VALUE, or export {shown} and pass {option} {shown}.",
                )
            value = environ[key]
        parsed[key] = value
    return parsed

"""The ``openenv.yaml`` manifest: loading it with useful errors (the schema is in ``manifest_schema``).

Required keys are ``name`` and ``app``; everything else has a default (without ``app:``,
the layout ``openenv init`` writes is assumed: ``<name>.server.app:app``). Unknown keys are
warnings (with a "did you mean" when one is close), never errors, so a manifest written for a
newer CLI or by ``openenv-core`` (``type: space``, ``runtime: fastapi``) still loads.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from openenv_cli.errors import OpenEnvError

# The schema, defined in manifest_schema, is part of this module's face.
from openenv_cli.manifest_schema import (
    MANIFEST_FILE,
    SPEC_VERSION,
    Manifest,
    Section,
)
from openenv_runtime.bounded_yaml import MAX_BYTES, YamlRefused, load_bounded


@dataclass(frozen=True)
class ManifestIssue:
    """One problem with the manifest: the key (dotted), what is wrong and how to fix it."""

    key: str
    message: str
    fix: str


@dataclass
class ManifestReport:
    """The outcome of reading a manifest: the model (None when it has errors) and the issues."""

    path: Path
    manifest: Manifest | None = None
    errors: list[ManifestIssue] = field(default_factory=list)
    warnings: list[ManifestIssue] = field(default_factory=list)


def _fix_for(key: str, project_dir: Path) -> str:
    guess = project_dir.resolve().name if project_dir.name not in {"", "."} else "my_env"
    guess = re.sub(r"\W", "_", guess) or "my_env"
    fixes = {
        "name": f"Add `name: {guess}` to {MANIFEST_FILE} (the project and package name).",
        "app": f"Add `app: {guess}.server.app:app` to {MANIFEST_FILE} (the import path of the ASGI app).",
        "spec_version": f"Set `spec_version: {SPEC_VERSION}` in {MANIFEST_FILE}.",
        "port": f"Set `port:` to a number between 1 and 65535 in {MANIFEST_FILE}, e.g. `port: 8000`.",
    }
    return fixes.get(key, f"Correct `{key}` in {MANIFEST_FILE}.")


def _unknown_keys(model: BaseModel, prefix: str = "") -> list[tuple[str, list[str]]]:
    found = [(prefix + key, list(type(model).model_fields)) for key in model.model_extra or {}]
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, Section):
            found.extend(_unknown_keys(value, f"{prefix}{name}."))
    return found


def parse_manifest(data: Any, project_dir: Path, path: Path | None = None) -> ManifestReport:
    """Validate already-parsed YAML ``data``; never raises."""
    path = path or project_dir / MANIFEST_FILE
    report = ManifestReport(path=path)
    if data is None:
        report.errors.append(
            ManifestIssue(
                "",
                f"{MANIFEST_FILE} is empty.",
                _fix_for("name", project_dir) + " " + _fix_for("app", project_dir),
            )
        )
        return report
    if not isinstance(data, dict):
        report.errors.append(
            ManifestIssue(
                "",
                f"{MANIFEST_FILE} must be a mapping of keys to values, not a {type(data).__name__}.",
                f"Rewrite {MANIFEST_FILE} as `key: value` lines (see `openenv init`).",
            )
        )
        return report
    inferred = conventional_app(data.get("name")) if "app" not in data else None
    if inferred is not None:
        data = {**data, "app": inferred}  # the layout `openenv init` writes
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            if err["type"] == "missing":
                message = f"{MANIFEST_FILE}: missing required key `{key}`."
            else:
                got = err.get("input")
                shown = f" (got {got!r})" if not isinstance(got, (dict, list)) else ""
                message = f"{MANIFEST_FILE}: `{key}`: {err['msg']}{shown}."
            report.errors.append(ManifestIssue(key, message, _fix_for(key, project_dir)))
        return report
    for key, known in _unknown_keys(manifest):
        leaf = key.rsplit(".", 1)[-1]
        close = difflib.get_close_matches(leaf, known, n=1)
        hint = (
            f"Did you mean `{key[: len(key) - len(leaf)]}{close[0]}`?"
            if close
            else (f"Remove it, or check the spelling (known keys here: {', '.join(known)}).")
        )
        report.warnings.append(
            ManifestIssue(key, f"{MANIFEST_FILE}: unknown key `{key}` is ignored.", hint)
        )
    report.manifest = manifest
    return report


def conventional_app(name: Any) -> str | None:
    """``<name>.server.app:app``, the app of a project laid out as ``openenv init`` does
    (used when ``openenv.yaml`` has no ``app:``); None when ``name`` cannot be a package."""
    if not isinstance(name, str) or not name.strip():
        return None
    package = re.sub(r"\W", "_", name.strip())
    return f"{package}.server.app:app" if package.isidentifier() else None


def inspect_manifest(project_dir: Path) -> ManifestReport:
    """Read and validate ``project_dir/openenv.yaml``; never raises."""
    path = project_dir / MANIFEST_FILE
    report = ManifestReport(path=path)
    if not path.is_file():
        report.errors.append(
            ManifestIssue(
                "",
                f"No {MANIFEST_FILE} in {project_dir}.",
                "Run this in an environment project, or create one with `openenv init NAME`.",
            )
        )
        return report
    try:
        if path.stat().st_size > MAX_BYTES:
            raise YamlRefused(f"it is {path.stat().st_size} bytes; at most {MAX_BYTES} are read")
        text = path.read_text(encoding="utf-8")
    except YamlRefused as exc:
        report.errors.append(
            ManifestIssue("", f"{MANIFEST_FILE} is refused: {exc}.", "Keep only settings in it.")
        )
        return report
    except (OSError, UnicodeDecodeError) as exc:
        report.errors.append(
            ManifestIssue(
                "", f"Cannot read {path}: {exc}.", f"Make {MANIFEST_FILE} a readable UTF-8 file."
            )
        )
        return report
    try:
        data = load_bounded(text)  # size, depth and aliases bounded
    except YamlRefused as exc:
        report.errors.append(
            ManifestIssue("", f"{MANIFEST_FILE} is refused: {exc}", f"Fix {path}.")
        )
        return report
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        report.errors.append(
            ManifestIssue(
                "",
                f"{MANIFEST_FILE} is not valid YAML{where}: {problem}.",
                f"Fix the YAML syntax in {path}{where}.",
            )
        )
        return report
    return parse_manifest(data, project_dir, path)


def load_manifest(
    project_dir: str | Path, on_warning: Callable[[ManifestIssue], None] | None = None
) -> Manifest:
    """Load ``openenv.yaml`` from ``project_dir`` for a command.

    Unknown keys are passed to ``on_warning`` (by default printed to stderr); any error raises
    :class:`OpenEnvError` naming the file and the fix.
    """
    report = inspect_manifest(Path(project_dir))
    if report.errors or report.manifest is None:
        first = report.errors[0]
        message = (
            first.message
            if len(report.errors) == 1
            else (
                f"{report.path} has {len(report.errors)} problems:\n"
                + "\n".join(f"  - {e.message}" for e in report.errors)
            )
        )
        if len(report.errors) == 1 and str(report.path) not in message:
            message = f"{message} ({report.path})"
        hint = " ".join(dict.fromkeys(e.fix for e in report.errors))
        raise OpenEnvError(message, hint=hint)
    for warning in report.warnings:
        if on_warning is not None:
            on_warning(warning)
        else:
            from rich.markup import escape

            from openenv_cli.console import err_console

            err_console.print(
                f"[yellow]Warning:[/] {escape(warning.message)} {escape(warning.fix)}",
                highlight=False,
            )
    return report.manifest

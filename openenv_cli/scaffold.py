"""Render a new environment project from its templates (the logic behind ``openenv init``).

``render_project`` is pure: template files + context in, ``{relative path: text}`` out.
The name rules live in :mod:`openenv_cli.project_names` and the atomic writer in
:mod:`openenv_cli.project_writer`; both are re-exported here, where callers import them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, TemplateError

from openenv_cli import __version__
from openenv_cli.errors import OpenEnvError
from openenv_cli.licenses import DEFAULT_LICENSE
from openenv_cli.project_names import (
    NAME_RULES,
    RESERVED_NAMES,
    ClassNames,
    class_names,
    validate_project_name,
)
from openenv_cli.project_writer import write_project
from openenv_cli.template_cache import bytecode_cache

__all__ = [
    "NAME_RULES",
    "RESERVED_NAMES",
    "RUNTIME_REQUIREMENT",
    "TEMPLATE_SUFFIX",
    "ClassNames",
    "FamilyFacts",
    "class_names",
    "family_project_name",
    "project_context",
    "render_family_project",
    "render_project",
    "template_root",
    "validate_project_name",
    "write_project",
]

# The runtime this CLI comes with (both share one version), or any later one.
RUNTIME_REQUIREMENT = f"openenv-runtime>={__version__}"

TEMPLATE_SUFFIX = ".jinja"
_EMOJIS = ("🤖", "🎮", "🧩", "🚀", "🧪", "🎯", "🕹️", "🌱", "🛰️", "🧠")
_COLORS = ("red", "yellow", "green", "blue", "indigo", "purple", "pink", "gray")


def template_root() -> Path:
    """The templates folder: ``openenv_cli/templates`` in a wheel, ``templates/`` in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "templates", here.parent / "templates"):
        if (candidate / "project").is_dir():
            return candidate
    raise OpenEnvError(
        "The project templates are missing from this installation of openenv.",
        hint="Reinstall the CLI the way you installed it: `pip install -e .` in your openenv "
        "checkout, or `pip install --force-reinstall` of its wheel.",
    )


def project_context(name: str, **overrides: Any) -> dict[str, Any]:
    """The template variables for project ``name`` (``overrides`` replace any of them)."""
    digest = int(hashlib.sha256(name.encode()).hexdigest(), 16)
    context: dict[str, Any] = {
        "name": name,
        "title": " ".join(word.capitalize() for word in name.split("_") if word),
        "description": f"{' '.join(w for w in name.split('_') if w).capitalize()}: an OpenEnv-compatible RL environment.",
        "version": "0.1.0",
        "port": 8000,
        "base_image": "python:3.11-slim",
        "runtime_requirement": RUNTIME_REQUIREMENT,
        "requires_python": ">=3.10",  # what openenv-runtime supports
        "license": DEFAULT_LICENSE,
        "license_file": True,
        "emoji": _EMOJIS[digest % len(_EMOJIS)],
        "color_from": _COLORS[digest % len(_COLORS)],
        "color_to": _COLORS[(digest // len(_COLORS) + 1) % len(_COLORS)],
        "classes": asdict(class_names(name)),
        "app": f"{name}.server.app:app",
    }
    context.update(overrides)
    return context


def _quoted(value: Any) -> str:
    """A double-quoted string valid in YAML, TOML, JSON and Python alike."""
    return json.dumps(str(value), ensure_ascii=False)


def _docstring(value: Any) -> str:
    """Text safe inside a triple-double-quoted Python docstring (quotes and backslashes escaped)."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"')


def _template_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if (
            path.is_file()
            and "__pycache__" not in path.parts
            and path.suffix not in {".pyc", ".pyo"}
        ):
            yield path


def render_project(
    name: str,
    context: Mapping[str, Any] | None = None,
    *,
    template: str = "project",
    root: Path | None = None,
) -> dict[str, str]:
    """Render template set ``template`` for project ``name``: ``{relative posix path: text}``.

    File and folder names are templates too (``server/{{name}}_environment.py.jinja``, written
    without spaces so shells and tools take them whole); a ``.jinja`` suffix is dropped. Pure:
    reads only the templates.
    """
    source = (root or template_root()) / template
    ctx = project_context(name, **dict(context or {}))
    env = Environment(
        loader=FileSystemLoader(str(source)),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        bytecode_cache=bytecode_cache(),
    )
    env.filters["quoted"] = _quoted
    env.filters["docstring"] = _docstring
    files: dict[str, str] = {}
    for path in _template_files(source):
        relative = path.relative_to(source).as_posix()
        try:
            # Most names are plain: compiling them as templates would take longer than the rest.
            target = env.from_string(relative).render(ctx) if "{" in relative else relative
            text = env.get_template(relative).render(ctx)
        except TemplateError as exc:
            raise OpenEnvError(
                f"Template {relative} failed to render: {exc}",
                hint="This is a bug in openenv; please report it.",
            ) from exc
        if target.endswith(TEMPLATE_SUFFIX):
            target = target[: -len(TEMPLATE_SUFFIX)]
        files[target] = text
    return files


@dataclass(frozen=True)
class FamilyFacts:
    """What ``openenv import`` learned from the library: the target and its adapted environment."""

    target: str  # e.g. "gymnasium:CartPole-v1" (options included)
    family: str  # e.g. "gymnasium", "reasoning_gym"
    extra: str  # the openenv-runtime extra of the family, e.g. "reasoning-gym"
    package: str  # the library's distribution, e.g. "gymnasium"
    package_version: str
    description: str
    example_action: dict[str, Any]


def family_project_name(environment: str) -> str:
    """A project name for a library's environment: ``CartPole-v1`` → ``cart_pole_v1``,
    ``ALE/Pong-v5`` → ``pong_v5``; empty when nothing usable is left."""
    base = environment.rsplit("/", 1)[-1]
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", base).lower()
    name = re.sub(r"[^a-z0-9]+", "_", snake).strip("_")
    return name if name[:1].isalpha() else ""


def render_family_project(
    name: str, facts: FamilyFacts, context: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """The files of a project serving ``facts.target``: an ``openenv init`` project whose
    models and app are the library's adapted environment (``templates/family`` over
    ``templates/project``), pinning the library's version. Pure, like :func:`render_project`."""
    example = facts.example_action
    ctx: dict[str, Any] = {
        "description": facts.description,
        "target": facts.target,
        "family": facts.family,
        "package": facts.package,
        "package_version": facts.package_version,
        "runtime_requirement": f"openenv-runtime[{facts.extra}]>={__version__}",
        "example_json": json.dumps(example, ensure_ascii=False),
        "example_literal": repr(example),
        **dict(context or {}),
    }
    files = render_project(name, ctx)
    del files[f"server/{name}_environment.py"]  # the library's environment replaces it
    files.update(render_project(name, ctx, template="family"))
    if facts.family == "harbor":
        # The task runs in the server's own container: its models and image are the task's.
        files.update(render_project(name, ctx, template="harbor"))
    return files

"""Project names: the rules a name must pass, and the class names it gives.

``validate_project_name`` refuses (with a suggested name that passes) anything that would
not make a good package: a path, a keyword, a standard-library module, or a package that
environments depend on or commonly import. ``class_names`` turns ``my_env`` into
``MyEnv``, ``MyAction``, ... ``MyEnvironment``.
"""

from __future__ import annotations

import keyword
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from openenv_cli.errors import UsageError

# Packages a project would shadow or clash with: the runtime's and the CLI's dependencies,
# the tools a project is built and tested with, and well-known names users install beside it.
RESERVED_NAMES = frozenset(
    {
        "openenv",
        "openenv_runtime",
        "openenv_cli",
        "openenv_core",
        "openenv_toolkit",
        "fastapi",
        "starlette",
        "pydantic",
        "pydantic_core",
        "uvicorn",
        "websockets",
        "anyio",
        "sniffio",
        "h11",
        "httptools",
        "uvloop",
        "watchfiles",
        "httpx",
        "httpcore",
        "requests",
        "urllib3",
        "idna",
        "certifi",
        "annotated_types",
        "typing_extensions",
        "typing_inspection",
        "typer",
        "click",
        "rich",
        "jinja2",
        "markupsafe",
        "yaml",
        "pathspec",
        "docker",
        "huggingface_hub",
        "pip",
        "setuptools",
        "wheel",
        "pkg_resources",
        "hatchling",
        "packaging",
        "pytest",
        "_pytest",
        "pluggy",
        "iniconfig",
        "numpy",
        "pandas",
        "torch",
        "gym",
        "gymnasium",
        "test",
        "tests",
        "server",
        "client",
        "models",
        "app",
        "env",
        "environment",
        "main",
        "site",
    }
)
# Lowercase words of letters and digits joined by single underscores, starting with a letter.
_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
NAME_RULES = (
    "lowercase letters, digits and single underscores, starting with a letter and not "
    "ending with an underscore, at most 64 characters (it becomes the Python package)"
)
_MAX_NAME_LENGTH = 64


@dataclass(frozen=True)
class ClassNames:
    """The Python class names generated for a project name."""

    client: str
    action: str
    observation: str
    state: str
    environment: str


def class_names(name: str) -> ClassNames:
    """``my_env`` → ``MyEnv``, ``MyAction``, ``MyObservation``, ``MyState``, ``MyEnvironment``.

    A trailing ``_env`` (or ``_environment``) is dropped before the suffixes are added, so names
    never read ``MyEnvAction``; ``echo`` gives ``EchoEnv``, ``EchoAction``, ... in the same way.
    """
    stem = name
    for suffix in ("_environment", "_env"):
        if stem.endswith(suffix) and stem[: -len(suffix)].strip("_"):
            stem = stem[: -len(suffix)]
            break
    pascal = "".join(part[:1].upper() + part[1:] for part in stem.split("_") if part)
    return ClassNames(
        client=f"{pascal}Env",
        action=f"{pascal}Action",
        observation=f"{pascal}Observation",
        state=f"{pascal}State",
        environment=f"{pascal}Environment",
    )


def _is_stdlib(name: str) -> bool:
    """A standard-library module; ``test`` (its regression tests) is one though
    ``sys.stdlib_module_names`` leaves it out."""
    return name in sys.stdlib_module_names or name == "test"


def _taken(name: str) -> bool:
    return (
        name in RESERVED_NAMES
        or _is_stdlib(name)
        or keyword.iskeyword(name)
        or keyword.issoftkeyword(name)
    )


def _unshadowed(name: str) -> str:
    """A free name close to ``name``: ``test`` → ``test_env``, ``env`` → ``my_env``."""
    if name.endswith(("env", "environment")):
        return f"my_{name}"
    return f"{name}_env"


def _suggest(name: str) -> str:
    """The nearest name that passes every rule (never one that is refused in turn)."""
    candidate = re.sub(r"[^a-z0-9_]", "_", name.strip().lower().replace("-", "_"))
    candidate = re.sub(r"_+", "_", candidate).strip("_")[:_MAX_NAME_LENGTH].strip("_")
    if not candidate:
        return "my_env"
    if not candidate[0].isalpha():
        candidate = f"env_{candidate}"
    if _taken(candidate):
        candidate = _unshadowed(candidate)
    return candidate


def validate_project_name(name: str) -> None:
    """Raise :class:`UsageError` (exit code 2) unless ``name`` makes a good package name.

    The rules: see :data:`NAME_RULES`; and not a Python keyword, a standard-library module,
    or a package environments depend on or commonly import (:data:`RESERVED_NAMES`).
    """
    if not name:
        raise UsageError(
            "The project name is empty.", hint="Give a name such as `openenv init my_env`."
        )
    if "/" in name or "\\" in name or name in {".", ".."} or os.sep in name:
        raise UsageError(
            f"The project name {name!r} contains a path.",
            hint=f"Give a bare name and the folder separately: `openenv init {_suggest(Path(name).name or 'my_env')} --output-dir {Path(name).parent}`.",
        )
    if len(name) > _MAX_NAME_LENGTH or not _NAME_PATTERN.match(name):
        raise UsageError(
            f"{name!r} is not a valid project name: use {NAME_RULES}.",
            hint=f"Try `openenv init {_suggest(name)}`.",
        )
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        raise UsageError(
            f"{name!r} is a Python keyword and cannot be a package name.",
            hint=f"Try `openenv init {_unshadowed(name)}`.",
        )
    if _is_stdlib(name):
        raise UsageError(
            f"{name!r} would shadow the standard library module of the same name.",
            hint=f"Try `openenv init {_unshadowed(name)}`.",
        )
    if name in RESERVED_NAMES:
        raise UsageError(
            f"{name!r} would shadow a package that environments depend on or commonly import.",
            hint=f"Try `openenv init {_unshadowed(name)}`.",
        )

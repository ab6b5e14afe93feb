"""Render and write a new environment project (the logic behind ``openenv init``).

``render_project`` is pure: template files + context in, ``{relative path: text}`` out.
``write_project`` is the only function that touches the destination, and it is atomic: the
files are written into a temporary folder beside the target, which is then renamed into
place, so a failure half-way leaves nothing behind.
"""

from __future__ import annotations

import errno
import hashlib
import json
import keyword
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, TemplateError

from openenv_cli import __version__
from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.licenses import DEFAULT_LICENSE
from openenv_cli.template_cache import bytecode_cache

# The runtime this CLI comes with (both share one version), or any later one.
RUNTIME_REQUIREMENT = f"openenv-runtime>={__version__}"

TEMPLATE_SUFFIX = ".jinja"

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
_EMOJIS = ("🤖", "🎮", "🧩", "🚀", "🧪", "🎯", "🕹️", "🌱", "🛰️", "🧠")
_COLORS = ("red", "yellow", "green", "blue", "indigo", "purple", "pink", "gray")


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


def _check_destination(dest: Path, force: bool) -> None:
    if dest.exists() and not dest.is_dir():
        raise UsageError(
            f"{dest} exists and is not a folder.", hint="Choose another name or --output-dir."
        )
    if dest.is_dir() and any(dest.iterdir()) and not force:
        raise UsageError(
            f"{dest} already exists and is not empty.",
            hint="Choose another name or --output-dir, or pass --force to overwrite the generated files in it.",
        )
    for parent in dest.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"{parent} is not a folder.", hint="Choose another --output-dir.")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise UsageError(
                    f"Cannot write to {parent}: permission denied.",
                    hint="Choose a writable --output-dir.",
                )
            break


def _unwritable(exc: OSError, where: Path) -> OpenEnvError:
    if exc.errno in {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR}:
        return UsageError(
            f"Cannot write to {where}: {exc.strerror or exc}.",
            hint="Choose a writable --output-dir.",
        )
    return OpenEnvError(
        f"Writing the project to {where} failed: {exc}. Nothing was written.",
        hint="Fix the cause above and run the command again.",
    )


def write_project(files: Mapping[str, str], dest: str | Path, force: bool = False) -> list[Path]:
    """Write rendered ``files`` under ``dest``, all or nothing; return the paths written.

    ``dest`` must not exist, or be empty, or ``force`` must be set (then generated files
    replace existing ones of the same name and other files are kept).
    """
    dest = Path(dest).absolute()
    _check_destination(dest, force)
    created: list[Path] = []  # parents we made, removed again on failure
    staging: Path | None = None
    try:
        missing = [p for p in reversed(dest.parents) if not p.exists()]
        for parent in missing:
            parent.mkdir()
            created.append(parent)
        staging = Path(
            tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
        )
        umask = os.umask(0)
        os.umask(umask)
        for relative, text in files.items():
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        for folder in [staging, *(p for p in staging.rglob("*") if p.is_dir())]:
            folder.chmod(0o777 & ~umask)
        if dest.is_dir() and any(dest.iterdir()):
            _merge(staging, dest, files)
        else:
            if dest.is_dir():
                dest.rmdir()
            os.rename(staging, dest)
            staging = None
    except OSError as exc:
        for parent in reversed(created):
            shutil.rmtree(parent, ignore_errors=True)
        raise _unwritable(exc, dest) from exc
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return [dest / relative for relative in files]


def _merge(staging: Path, dest: Path, files: Mapping[str, str]) -> None:
    """Move staged files over an existing project; on any failure put everything back."""
    backup = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".backup", dir=dest.parent))
    moved: list[tuple[Path, Path | None]] = []  # (placed file, its backup)
    made_dirs: list[Path] = []
    try:
        for relative in files:
            source, target = staging / relative, dest / relative
            for parent in reversed(target.relative_to(dest).parents):
                folder = dest / parent
                if not folder.exists():
                    folder.mkdir()
                    made_dirs.append(folder)
            saved = None
            if target.exists() or target.is_symlink():
                if target.is_dir() and not target.is_symlink():
                    raise IsADirectoryError(errno.EISDIR, "a folder is in the way", str(target))
                saved = backup / relative
                saved.parent.mkdir(parents=True, exist_ok=True)
                os.replace(target, saved)
            moved.append((target, saved))
            os.replace(source, target)
    except OSError:
        for target, saved in reversed(moved):
            if saved is not None:
                os.replace(saved, target)
            elif target.exists():
                target.unlink()
        for folder in reversed(made_dirs):
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(backup, ignore_errors=True)

"""The runtime bundle: ``_openenv_runtime/`` in every build context and Space.

The runtime is on no package index, so whatever builds the image must carry it: the bundle is
a pip-installable source tree of the exact ``openenv_runtime`` this CLI runs with (its files
plus a generated ``pyproject.toml`` naming its version and dependencies), which the
project's Dockerfile installs.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

import tomlkit
from packaging.requirements import Requirement

from openenv_cli.errors import OpenEnvError
from openenv_cli.image.selection import RUNTIME_DIR
from openenv_cli.safe_files import replacing, write_inside

RUNTIME_DISTRIBUTION = "openenv-runtime"
RUNTIME_PACKAGE = "openenv_runtime"
RUNTIME_BUILD_REQUIREMENT = "setuptools>=64"
_EXTRA = re.compile(r'\bextra == "([^"]+)"')  # in packaging's normal form of a marker
_REINSTALL = "Reinstall the CLI: `pip install --force-reinstall openenv-toolkit`."


def _runtime_source() -> Path:
    """The installed ``openenv_runtime`` package folder, found without importing it (fastapi is slow to import)."""
    spec = importlib.util.find_spec(RUNTIME_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise OpenEnvError(
            "The openenv runtime (openenv_runtime) is not installed.", hint=_REINSTALL
        )
    return Path(locations[0]).resolve()


def runtime_version() -> str:
    """The version of the runtime the bundle carries.

    The package's own ``__version__`` (from ``_version.py``) wins over the distribution
    metadata: it describes the files that are copied even when an editable install's
    metadata is stale.
    """
    try:
        spec = importlib.util.spec_from_file_location(
            "_openenv_runtime_version", _runtime_source() / "_version.py"
        )
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            version = getattr(module, "__version__", None)
            if isinstance(version, str) and version:
                return version
    except (OSError, OpenEnvError, SyntaxError):
        pass
    try:
        return metadata.version(RUNTIME_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise OpenEnvError(
            "Cannot tell which openenv-runtime version is installed.", hint=_REINSTALL
        ) from None


def split_requirements(requirements: Iterable[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Plain dependencies and ``{extra: [requirement]}``, from ``Requires-Dist`` entries.

    ``packaging`` reads each requirement and writes its marker in one normal form; a
    requirement belongs to every extra its marker tests (``extra == "<name>"``) and keeps its
    whole marker (the build backend adds the extra condition again, which is harmless).
    """
    plain: list[str] = []
    optional: dict[str, list[str]] = {}
    for raw in requirements:
        requirement = Requirement(raw)
        marker = str(requirement.marker) if requirement.marker is not None else ""
        owners = list(dict.fromkeys(_EXTRA.findall(marker)))
        if not owners:
            plain.append(str(requirement))
        for name in owners:
            optional.setdefault(name, []).append(str(requirement))
    return plain, optional


def _packages_and_data(package_files: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    def dotted(path: Path) -> str:
        return path.as_posix().replace("/", ".")

    packages = sorted(
        {dotted(Path(f).parent) for f in package_files if Path(f).name == "__init__.py"}
    )
    data: dict[str, list[str]] = {}
    for relative in package_files:
        if relative.endswith(".py") and dotted(Path(relative).parent) in packages:
            continue
        owner = Path(relative).parent
        while dotted(owner) not in packages:
            owner = owner.parent
        data.setdefault(dotted(owner), []).append(Path(relative).relative_to(owner).as_posix())
    return packages, {name: sorted(files) for name, files in sorted(data.items())}


def runtime_pyproject(version: str, package_files: list[str]) -> str:
    """The ``pyproject.toml`` of the bundle (TOML written by ``tomlkit``)."""
    try:
        requirements = metadata.requires(RUNTIME_DISTRIBUTION) or []
        meta = metadata.metadata(RUNTIME_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise OpenEnvError(
            "The openenv-runtime distribution metadata is missing, so its dependencies are unknown.",
            hint=_REINSTALL,
        ) from None
    plain, extras = split_requirements(requirements)
    packages, package_data = _packages_and_data(package_files)

    doc = tomlkit.document()
    doc.add(
        tomlkit.comment(
            f"The {RUNTIME_DISTRIBUTION} {version} that the openenv CLI runs with, carried in the build"
        )
    )
    doc.add(
        tomlkit.comment(
            "context because no package index serves it. Generated by openenv; do not edit."
        )
    )
    doc["build-system"] = {
        "requires": [RUNTIME_BUILD_REQUIREMENT],
        "build-backend": "setuptools.build_meta",
    }
    project = tomlkit.table()
    project["name"] = RUNTIME_DISTRIBUTION
    project["version"] = version
    summary = meta.get_all("Summary") or ["The openenv runtime."]
    project["description"] = summary[0]
    requires_python = meta.get_all("Requires-Python")
    if requires_python:
        project["requires-python"] = requires_python[0]
    project["dependencies"] = _multiline(plain)
    if extras:
        project["optional-dependencies"] = {
            name: _multiline(reqs) for name, reqs in sorted(extras.items())
        }
    doc["project"] = project
    setuptools: dict[str, object] = {
        "packages": _multiline(packages),
        "include-package-data": False,
    }
    if package_data:
        setuptools["package-data"] = {
            name: _multiline(files) for name, files in package_data.items()
        }
    doc["tool"] = {"setuptools": setuptools}
    return tomlkit.dumps(doc)


def _multiline(values: list[str]) -> tomlkit.items.Array:
    array = tomlkit.array()
    array.extend(values)
    return array.multiline(bool(values))


def write_runtime_bundle(dest_dir: str | Path) -> Path:
    """Write ``dest_dir/_openenv_runtime/``: the installed ``openenv_runtime`` package (its
    files, without caches) and a generated ``pyproject.toml`` naming its version and
    dependencies, so ``pip install ./_openenv_runtime`` installs exactly this runtime.

    Works for wheel and editable installs alike; replaces an existing bundle. Returns the
    bundle folder.
    """
    source = _runtime_source()
    version = runtime_version()
    dest = Path(dest_dir)
    bundle = dest / RUNTIME_DIR
    if bundle.is_dir() and not bundle.is_symlink():  # a link is refused by the writes below
        shutil.rmtree(bundle)
    copied: list[str] = []
    for current, dirnames, filenames in os.walk(source):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")) or name.startswith("."):
                continue
            path = Path(current) / name
            shipped = (Path(RUNTIME_PACKAGE) / path.relative_to(source)).as_posix()
            with (
                path.open("rb") as original,
                replacing(dest, f"{RUNTIME_DIR}/{shipped}", sync=False) as out,
            ):
                shutil.copyfileobj(original, out)
            copied.append(shipped)
    if not copied:
        raise OpenEnvError(
            f"The openenv runtime at {source} has no files.", hint="Reinstall the CLI."
        )
    write_inside(
        dest, f"{RUNTIME_DIR}/pyproject.toml", runtime_pyproject(version, copied), sync=False
    )
    return bundle

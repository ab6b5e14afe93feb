"""Which optional extra brings a missing package: errors that say what to install.

Read from the installed distributions' own metadata (``Requires-Dist`` with an
``extra == "..."`` marker), so the answer follows pyproject.toml: a package of
``openenv-runtime[llm]`` is named by the toolkit extras that include it (``[collect]``).
"""

from __future__ import annotations

import importlib
from importlib import metadata

from openenv_cli.errors import OpenEnvError

TOOLKIT = "openenv-toolkit"
RUNTIME = "openenv-runtime"
_DISTRIBUTION_OF = {"yaml": "pyyaml", "sklearn": "scikit-learn", "PIL": "pillow"}
_NOT_NAMED = ("ci", "dev", "test")  # everything-extras: never the one to suggest


def _extras(distribution: str, package: str) -> list[str]:
    """The extras of ``distribution`` that require ``package`` (a distribution name)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    try:
        provided = metadata.metadata(distribution).get_all("Provides-Extra") or []
        requirements = metadata.requires(distribution) or []
    except metadata.PackageNotFoundError:
        return []
    wanted = canonicalize_name(package)
    found = []
    for extra in provided:
        if extra in _NOT_NAMED:
            continue
        for line in requirements:
            requirement = Requirement(line)
            if requirement.marker is None or not requirement.marker.evaluate({"extra": extra}):
                continue
            name = canonicalize_name(requirement.name)
            if name == wanted or (
                name == RUNTIME and any(r in requirement.extras for r in _extras(RUNTIME, package))
            ):
                found.append(extra)
                break
    return found


def install_hint(module: str, command: str | None = None) -> str | None:
    """``pip install 'openenv-toolkit[X]'`` for the extra that brings ``module`` (the extra
    named like ``command`` when there are several); None when no extra brings it."""
    top = module.split(".")[0]
    package = _DISTRIBUTION_OF.get(top, top)
    extras = _extras(TOOLKIT, package)
    if extras:
        chosen = command if command in extras else extras[0]
        others = ", ".join(f"[{e}]" for e in extras if e != chosen)
        also = f" (also in {others})" if others else ""
        return f"pip install '{TOOLKIT}[{chosen}]'{also}"
    runtime = _extras(RUNTIME, package)
    if runtime:
        return f"pip install '{RUNTIME}[{runtime[0]}]'"
    return None


def missing_package(error: ModuleNotFoundError, command: str | None = None) -> OpenEnvError:
    """The error for a package that is not installed, naming the extra that brings it."""
    name = error.name or str(error)
    hint = install_hint(name, command)
    if hint is None:
        return OpenEnvError(
            f"The package {name!r} is not installed.",
            hint=f"Install it (pip install {name.split('.')[0]}), or reinstall {TOOLKIT} "
            "with the extra of the command you ran (see the docs' install lines).",
        )
    return OpenEnvError(
        f"This needs the optional package {name.split('.')[0]!r}, which is not installed.",
        hint=f"Install its extra: {hint} (from a checkout: pip install -e '.[extra]').",
    )


def require(command: str, *modules: str) -> None:
    """Raise the :func:`missing_package` error for the first of ``modules`` not installed."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            raise missing_package(error, command) from None

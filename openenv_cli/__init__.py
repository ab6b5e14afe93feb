"""openenv: the CLI (``openenv``) that creates, checks, serves, builds and deploys environments.

``__version__`` is the version of this distribution, openenv-toolkit. Both distributions take
their version from one file, ``runtime/openenv_runtime/_version.py``; a build writes it into
``openenv_cli/_version.py`` (not committed), and a source tree that was never built reads it
from the runtime's file directly.
"""

from __future__ import annotations

from pathlib import Path


def _read_version() -> str:
    try:
        from openenv_cli._version import __version__ as built
    except ImportError:
        source = Path(__file__).resolve().parent.parent / "runtime/openenv_runtime/_version.py"
        scope: dict[str, object] = {}
        exec(source.read_text(encoding="utf-8"), scope)  # one assignment, from this checkout
        return str(scope["__version__"])
    return built


__version__ = _read_version()

"""``openenv validate``: checks of an environment project (or a running server) for CI.

Each check returns :class:`CheckResult` values (pass / warn / fail / skip, a message, and for
problems the fix); :func:`validate_project` and :func:`validate_url` gather them in a
:class:`Report`. The names load on first use, so importing a submodule (``serve`` uses
``validation.isolation``) does not import every check.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openenv_cli.validation.results import CheckResult, Report, Status
    from openenv_cli.validation.runner import (
        DEFAULT_TIMEOUT,
        validate_family,
        validate_project,
        validate_url,
    )

_HOMES = {
    "CheckResult": "results",
    "Report": "results",
    "Status": "results",
    "DEFAULT_TIMEOUT": "runner",
    "validate_family": "runner",
    "validate_project": "runner",
    "validate_url": "runner",
}

__all__ = [
    "DEFAULT_TIMEOUT",
    "CheckResult",
    "Report",
    "Status",
    "validate_family",
    "validate_project",
    "validate_url",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)

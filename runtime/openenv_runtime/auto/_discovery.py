"""Which OpenEnv environments are installed, and what their client classes are called.

An environment package is found two ways:

* an entry point in the group ``openenv.environments`` (``openenv init`` projects declare
  one: ``my_env = "my_env"``, the package to import), or
* a distribution named ``openenv-<name>`` (the reference's convention; the package is
  ``<name>`` with ``-`` → ``_``).

The package's ``openenv.yaml`` (shipped as package data) gives its name, description and,
optionally, its action and observation class names; otherwise they follow the names:
``echo_env`` → ``EchoEnv``, ``EchoAction``, ``EchoObservation`` in ``echo_env.client``.
Results are kept in memory per process (``discover(use_cache=False)`` looks again); nothing
is written to disk, so nothing another user could plant is ever read back and imported.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.resources
import logging
import re
from dataclasses import dataclass
from typing import Any

from ..images import default_image

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "openenv.environments"
# Distributions named openenv-* that are tools, not environments.
NOT_ENVIRONMENTS = frozenset({"openenv-core", "openenv-runtime", "openenv-toolkit"})


@dataclass
class EnvironmentInfo:
    """An installed environment: where its client lives and what its classes are called."""

    env_key: str  # "echo"
    name: str  # "echo_env"
    package_name: str  # the distribution, e.g. "openenv-echo_env"
    version: str
    description: str
    client_module_path: str  # "echo_env.client"
    client_class_name: str  # "EchoEnv"
    action_class_name: str  # "EchoAction"
    observation_class_name: str  # "EchoObservation"
    default_image: str  # "echo_env:latest": images.default_image of the manifest's name
    spec_version: int | None = None
    manifest: dict[str, Any] | None = None

    def _load(self, class_name: str) -> type:
        try:
            module = importlib.import_module(self.client_module_path)
        except ImportError as exc:
            raise ImportError(
                f"Failed to import {class_name} from {self.client_module_path}: {exc}. "
                f"Is the package installed? pip install {self.package_name}"
            ) from exc
        try:
            found = getattr(module, class_name)
        except AttributeError:
            raise ImportError(
                f"Failed to import {class_name}: {self.client_module_path} has none (named after the "
                f"environment, or by `action:` / `observation:` in its openenv.yaml)"
            ) from None
        return found  # type: ignore[no-any-return]

    def get_client_class(self) -> type:
        """The environment's client class (imported now)."""
        return self._load(self.client_class_name)

    def get_action_class(self) -> type:
        """The environment's action class (imported now)."""
        return self._load(self.action_class_name)

    def get_observation_class(self) -> type:
        """The environment's observation class (imported now)."""
        return self._load(self.observation_class_name)


def _normalize_env_name(name: str) -> str:
    """``echo``, ``echo-env``, ``echo_env`` → ``echo_env``."""
    base = re.sub(r"[-_]env$", "", name.strip()).replace("-", "_")
    return f"{base}_env"


def _is_hub_url(name: str) -> bool:
    """Whether ``name`` names a Hub repository (``org/name``) or a Hub URL."""
    return "/" in name or "huggingface.co" in name


def _infer_class_name(env_name: str, class_type: str) -> str:
    """``("echo_env", "client")`` → ``EchoEnv``; also ``action``, ``observation``."""
    suffixes = {"client": "Env", "action": "Action", "observation": "Observation"}
    if class_type not in suffixes:
        raise ValueError(f"class_type must be one of {sorted(suffixes)}, got {class_type!r}")
    base = env_name.removesuffix("_env")
    return "".join(part.capitalize() for part in base.split("_")) + suffixes[class_type]


def _load_manifest_from_package(package_name: str, module_name: str) -> dict[str, Any] | None:
    """The ``openenv.yaml`` shipped inside ``module_name``, parsed; None when there is none."""
    try:
        resource = importlib.resources.files(module_name) / "openenv.yaml"
        if not resource.is_file():
            return None
        text = resource.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError, TypeError):
        return None
    except Exception as exc:  # a broken package must not break discovery of the others
        logger.warning("cannot read openenv.yaml of %s: %s", package_name, exc)
        return None
    import yaml  # PyYAML comes with uvicorn[standard], a runtime dependency

    from ..bounded_yaml import load_bounded

    try:
        loaded = load_bounded(text)  # size, depth and aliases bounded
    except (yaml.YAMLError, ValueError) as exc:
        logger.warning("openenv.yaml of %s is not read: %s", package_name, exc)
        return None
    return loaded if isinstance(loaded, dict) else None


def _create_env_info_from_package(
    package_name: str, module_name: str, version: str
) -> EnvironmentInfo | None:
    """What ``package_name`` (importable as ``module_name``) offers, from its manifest or names."""
    manifest = _load_manifest_from_package(package_name, module_name)
    raw_name = str((manifest or {}).get("name") or module_name)
    env_name = raw_name if raw_name.endswith("_env") else f"{raw_name}_env"
    described = (manifest or {}).get("description")
    return EnvironmentInfo(
        env_key=env_name.removesuffix("_env"),
        name=env_name,
        package_name=package_name,
        version=version,
        description=str(described) if described else f"{env_name} environment",
        client_module_path=f"{module_name}.client",
        client_class_name=_infer_class_name(env_name, "client"),
        action_class_name=str(
            (manifest or {}).get("action") or _infer_class_name(env_name, "action")
        ),
        observation_class_name=str(
            (manifest or {}).get("observation") or _infer_class_name(env_name, "observation")
        ),
        default_image=default_image(raw_name),  # what `openenv build` tags the project
        spec_version=(manifest or {}).get("spec_version"),
        manifest=manifest,
    )


def _candidates() -> dict[str, tuple[str, str]]:
    """distribution name → (module to import, version), in one pass over the installed ones."""
    found: dict[str, tuple[str, str]] = {}
    for dist in importlib.metadata.distributions():
        package = dist.metadata["Name"] or ""
        try:
            points = [p for p in dist.entry_points if p.group == ENTRY_POINT_GROUP]
        except Exception as exc:  # broken metadata must not stop the name-based search
            logger.warning("cannot read the entry points of %s: %s", package, exc)
            points = []
        if points:
            found[package] = (points[0].value.split(":")[0], dist.version)
        elif package.startswith("openenv-") and package not in NOT_ENVIRONMENTS:
            found[package] = (package.removeprefix("openenv-").replace("-", "_"), dist.version)
    return found


class EnvironmentDiscovery:
    """Finds the installed environments (see the module docstring); one per process is enough."""

    def __init__(self) -> None:
        self._cache: dict[str, EnvironmentInfo] | None = None

    def _discover_installed_packages(self) -> dict[str, EnvironmentInfo]:
        importlib.invalidate_caches()
        environments: dict[str, EnvironmentInfo] = {}
        for package, (module, version) in _candidates().items():
            try:
                info = _create_env_info_from_package(package, module, version)
            except Exception as exc:  # one broken package must not hide the others
                logger.warning("skipping %s: %s", package, exc)
                continue
            if info is not None:
                environments[info.env_key] = info
        return environments

    def discover(self, use_cache: bool = True) -> dict[str, EnvironmentInfo]:
        """Every installed environment by key (``echo``), looked up once unless ``use_cache=False``."""
        if not use_cache or self._cache is None:
            self._cache = self._discover_installed_packages()
        return self._cache

    def get_environment(self, env_key: str) -> EnvironmentInfo | None:
        return self.discover().get(env_key)

    def get_environment_by_name(self, name: str) -> EnvironmentInfo | None:
        """By any spelling: ``echo``, ``echo-env``, ``echo_env``."""
        return self.get_environment(_normalize_env_name(name).removesuffix("_env"))

    def list_environments(self) -> None:
        """Print the installed environments."""
        environments = self.discover()
        print("Available OpenEnv Environments:")
        print("-" * 70)
        if not environments:
            print("  No OpenEnv environments found.")
            print("  Install one: pip install openenv-<name> (or any package with an")
            print("  `openenv.environments` entry point, as `openenv init` projects have).")
        for key in sorted(environments):
            env = environments[key]
            print(f"  {key:<15}: {env.description} (v{env.version})")
            print(f"                   Package: {env.package_name}")
        print("-" * 70)
        print(f"Total: {len(environments)} environments")

    def clear_cache(self) -> None:
        """Forget what was found (the next lookup looks again)."""
        self._cache = None


_global: EnvironmentDiscovery | None = None


def get_discovery() -> EnvironmentDiscovery:
    """The process-wide :class:`EnvironmentDiscovery`."""
    global _global
    if _global is None:
        _global = EnvironmentDiscovery()
    return _global


def reset_discovery() -> None:
    """Drop the process-wide discovery (tests; after installing packages)."""
    global _global
    _global = None

"""``AutoEnv``: an environment's client, found by name (see :mod:`openenv_runtime.auto`).

Installing an environment's package from its Hugging Face Space happens only with consent.

The Space's repository is installed with ``pip install git+<endpoint>/spaces/<org>/<name>``
(``uv pip`` when uv is on PATH); the endpoint is ``HF_ENDPOINT`` (default
https://huggingface.co). That runs code from the internet on this machine, so it happens
only when the caller passed ``trust_remote_code=True``, ``OPENENV_TRUST_REMOTE_CODE`` is
``1``/``true``/``yes``, or a person at a terminal answered ``y``. Without a terminal the
answer is no.
"""

from __future__ import annotations

import difflib
import importlib
import logging
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ..client.env_client import EnvClient
from ..client.generic import GenericEnvClient
from ..providers.base import health
from ..providers.space import space_url
from ._discovery import EnvironmentInfo, _is_hub_url, _normalize_env_name, get_discovery

logger = logging.getLogger(__name__)

OPENENV_TRUST_REMOTE_CODE = "OPENENV_TRUST_REMOTE_CODE"
DEFAULT_ENDPOINT = "https://huggingface.co"


def repo_id_of(name: str) -> str:
    """``org/name`` from ``org/name`` or a Hub URL (``https://huggingface.co/spaces/org/name``)."""
    parts = [p for p in name.strip().rstrip("/").split("/") if p]
    return "/".join(parts[-2:])


def hub_git_url(repo_id: str) -> str:
    endpoint = (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
    return f"git+{endpoint}/spaces/{repo_id_of(repo_id)}"


def _has_uv() -> bool:
    return shutil.which("uv") is not None


def _get_pip_command() -> list[str]:
    """``uv pip`` when uv is installed, else this interpreter's pip."""
    return ["uv", "pip"] if _has_uv() else [sys.executable, "-m", "pip"]


def _confirm_remote_install(repo_id: str) -> bool:
    """Whether installing ``repo_id``'s code is allowed (see the module docstring)."""
    if os.environ.get(OPENENV_TRUST_REMOTE_CODE, "").strip().lower() in ("1", "true", "yes"):
        return True
    if not sys.stdin.isatty():
        logger.warning(
            "Not installing %s: no terminal to ask. Pass trust_remote_code=True or set "
            "%s=1 to allow installing code from that Space.",
            repo_id,
            OPENENV_TRUST_REMOTE_CODE,
        )
        return False
    print(
        f"\nInstalling {repo_id} runs code from {hub_git_url(repo_id).removeprefix('git+')} "
        "on this machine.\nOnly go on if you trust it."
    )
    try:
        return input("Install it? [y/N]: ").strip().lower() in ("y", "yes")
    except (EOFError, KeyboardInterrupt):
        return False


def _installed_openenv_package(output: str) -> str | None:
    """The ``openenv-*`` distribution that pip's or uv's install output reports, if any."""
    names: list[str] = []
    for line in output.splitlines():
        line = line.strip()
        if line.startswith("Successfully installed "):  # pip: name-version name-version ...
            names += [item.rsplit("-", 1)[0] for item in line.split()[2:]]
        elif line.startswith("+ "):  # uv: " + name==version"
            names.append(line[2:].split("==", 1)[0].strip())
    return next((n for n in names if n.lower().startswith("openenv-")), None)


def install_from_hub(repo_id: str, trust_remote_code: bool = False) -> str | None:
    """``pip install`` the Space's package (after consent); raises ``ValueError`` otherwise.

    Returns the ``openenv-*`` distribution the installer reports having installed, if any.
    """
    if not trust_remote_code and not _confirm_remote_install(repo_id):
        raise ValueError(
            f"Installation cancelled for {repo_id}: installing a Space's code needs consent. Pass "
            f"trust_remote_code=True or set {OPENENV_TRUST_REMOTE_CODE}=1 (or answer y at the "
            "prompt), or connect without installing: skip_install=True."
        )
    command = [*_get_pip_command(), "install", hub_git_url(repo_id)]
    try:
        done = subprocess.run(command, check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as exc:
        output = (exc.stderr or exc.stdout or "").strip()[-2000:]
        raise ValueError(
            f"Installing {repo_id} failed ({' '.join(command)}):\n{output}\n"
            "Check that the Space exists and is a Python package (a pyproject.toml)."
        ) from None
    importlib.invalidate_caches()
    return _installed_openenv_package(f"{done.stdout or ''}\n{done.stderr or ''}")


def ensure_package_from_hub(name: str, trust_remote_code: bool = False) -> str:
    """The key of the environment ``name`` (a Hub id or URL) names, installing it if needed."""
    repo_id = repo_id_of(name)
    expected = _normalize_env_name(repo_id.split("/")[-1]).removesuffix("_env")
    discovery = get_discovery()
    before = discovery.discover(use_cache=False)
    if expected in before:
        return expected
    install_from_hub(repo_id, trust_remote_code=trust_remote_code)
    after = discovery.discover(use_cache=False)
    new = sorted(set(after) - set(before))
    if expected in after or not new:
        return expected
    return new[0]


def _is_local_url(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    return host in ("localhost", "127.0.0.1", "::1")


def _answers(url: str, timeout: float) -> bool:
    """Whether ``url``/health answers (else the page at ``url`` itself answers 200)."""
    if health(url, timeout=timeout) is not None:
        return True
    # No proxy for a local server: a proxy would answer in its place.
    handlers: list[Any] = [urllib.request.ProxyHandler({})] if _is_local_url(url) else []
    try:
        with urllib.request.build_opener(*handlers).open(url, timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _find(name: str) -> EnvironmentInfo:
    discovery = get_discovery()
    info = discovery.get_environment_by_name(name)
    if info is not None:
        return info
    known = sorted(discovery.discover())
    if not known:
        raise ValueError(
            f"Unknown environment {name!r}: No OpenEnv environments found. Install one "
            "(pip install openenv-<name>), or pass a Hub id 'org/name' to connect to its Space."
        )
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise ValueError(f"Unknown environment {name!r}.{hint} Installed: {', '.join(known)}")


def _import_class(info: EnvironmentInfo, kind: str) -> type:
    """The environment's client or action class; an import failure says how to repair it."""
    try:
        return info.get_client_class() if kind == "client" else info.get_action_class()
    except ImportError as exc:
        raise ImportError(
            f"Failed to import the {kind} class of {info.name}: {exc}. The package "
            f"{info.package_name} may be broken: pip install --force-reinstall {info.package_name}"
        ) from exc


class AutoEnv:
    """Builds an environment's client from its name, like ``transformers``' ``AutoModel``.

    ``AutoEnv.from_env(name, ...)`` takes an installed environment's name (``"echo"``,
    ``"echo-env"``, ``"echo_env"``) or a Hub Space (``"org/echo_env"`` or its URL):

    * ``base_url=``: connect there (a local URL that does not answer starts the image);
    * a Space that runs: connect to it, after installing its package for the typed client
      (with consent: ``trust_remote_code=True`` or ``OPENENV_TRUST_REMOTE_CODE=1``);
    * otherwise: run the environment's Docker image (``docker_image=`` overrides it).

    ``skip_install=True`` never installs anything and returns a :class:`GenericEnvClient`
    (dict actions and observations): at ``base_url``, at the running Space, or on the
    Space's image / ``docker_image`` run locally.
    """

    def __init__(self) -> None:
        raise TypeError(
            "AutoEnv is a factory class: use AutoEnv.from_env() (or AutoEnv.from_hub())"
        )

    @staticmethod
    def _resolve_space_url(name: str) -> str:
        """``org/name`` (or its Hub URL) → ``https://org-name.hf.space``."""
        return space_url(repo_id_of(name))

    _is_local_url = staticmethod(_is_local_url)
    _get_hub_git_url = staticmethod(hub_git_url)
    _install_from_hub = staticmethod(install_from_hub)
    _ensure_package_from_hub = staticmethod(ensure_package_from_hub)

    @classmethod
    def _check_server_availability(cls, base_url: str, timeout: float = 2.0) -> bool:
        return _answers(base_url, timeout)

    @classmethod
    def _check_space_availability(cls, url: str, timeout: float = 5.0) -> bool:
        return _answers(url, timeout)

    @classmethod
    def installed_name(cls, name: str, trust_remote_code: bool = False) -> str:
        """The installed environment ``name`` stands for: a Hub id (``org/name``, or its URL)
        has its Space's package installed first, with consent (as ``from_env`` does); any
        other name is returned as it is."""
        if not _is_hub_url(name):
            return name
        return cls._ensure_package_from_hub(name, trust_remote_code=trust_remote_code)

    @classmethod
    def from_env(
        cls,
        name: str,
        base_url: str | None = None,
        docker_image: str | None = None,
        container_provider: Any = None,
        wait_timeout: float = 30.0,
        env_vars: dict[str, str] | None = None,
        trust_remote_code: bool = False,
        skip_install: bool = False,
        **kwargs: Any,
    ) -> EnvClient[Any, Any, Any]:
        """A client of environment ``name``; see the class docstring."""
        if skip_install:
            return cls._generic(name, base_url, docker_image, container_provider, env_vars, kwargs)
        if _is_hub_url(name):
            url = cls._resolve_space_url(name)
            running = cls._check_space_availability(url)
            env_name = cls._ensure_package_from_hub(name, trust_remote_code=trust_remote_code)
            if running and base_url is None:
                base_url = url
        else:
            env_name = name
        info = _find(env_name)
        client_class: Any = _import_class(info, "client")
        if base_url is not None:
            if cls._check_server_availability(base_url):
                return client_class(base_url=base_url, provider=None, **kwargs)  # type: ignore[no-any-return]
            if not cls._is_local_url(base_url):
                raise ConnectionError(
                    f"Server not available at {base_url}: start it, or leave out base_url to run "
                    f"the image {docker_image or info.default_image} here."
                )
        return client_class.from_docker_image(  # type: ignore[no-any-return]
            docker_image or info.default_image,
            container_provider,
            env_vars=env_vars,
            **kwargs,
        )

    @classmethod
    def _generic(
        cls,
        name: str,
        base_url: str | None,
        docker_image: str | None,
        provider: Any,
        env_vars: dict[str, str] | None,
        kwargs: dict[str, Any],
    ) -> EnvClient[Any, Any, Any]:
        if base_url:
            if not cls._check_server_availability(base_url):
                raise ConnectionError(f"Server not available at {base_url}: start it first.")
            return GenericEnvClient(base_url=base_url, **kwargs)
        if _is_hub_url(name):
            url = cls._resolve_space_url(name)
            if cls._check_space_availability(url):
                return GenericEnvClient(base_url=url, **kwargs)
            return GenericEnvClient.from_env(
                repo_id_of(name), use_docker=True, provider=provider, env_vars=env_vars, **kwargs
            )
        if docker_image:
            return GenericEnvClient.from_docker_image(
                docker_image, provider, env_vars=env_vars, **kwargs
            )
        raise ValueError(
            f"skip_install=True for the local environment {name!r} needs base_url= (a running "
            "server) or docker_image= (to start one); or leave skip_install out to use the "
            "installed package."
        )

    from_hub = from_env

    @classmethod
    def get_env_class(cls, name: str) -> type:
        """The client class of the installed environment ``name``."""
        return _import_class(_find(name), "client")

    @classmethod
    def get_env_info(cls, name: str) -> dict[str, Any]:
        """What is known of the installed environment ``name``."""
        info = _find(name)
        return {
            "env_key": info.env_key,
            "name": info.name,
            "package": info.package_name,
            "version": info.version,
            "description": info.description,
            "env_class": info.client_class_name,
            "action_class": info.action_class_name,
            "observation_class": info.observation_class_name,
            "module": info.client_module_path,
            "default_image": info.default_image,
            "spec_version": info.spec_version,
        }

    @classmethod
    def list_environments(cls) -> None:
        """Print the installed environments."""
        get_discovery().list_environments()

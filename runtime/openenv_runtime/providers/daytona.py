"""``DaytonaProvider``: the server in a Daytona cloud sandbox (extra ``[daytona]``).

Written against the ``daytona`` SDK's interface and tested with the SDK's own parameter and
image objects, but it has never run against Daytona's service: that service cannot be
reached from where this project is built and tested. Treat it as unproven there.

Daytona runs an image's ``ENTRYPOINT`` but not its ``CMD``, so once the sandbox exists the
server is started inside it: with ``cmd`` when given, else from the ``app:`` of the
sandbox's ``openenv.yaml``, else from the ``CMD`` of a Dockerfile registered with
:meth:`DaytonaProvider.image_from_dockerfile`. The URL handed back is a signed preview URL
of port 8000, valid for a day (:meth:`DaytonaProvider.refresh_preview_url` gets a new one).
"""

from __future__ import annotations

import os
import shlex
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from . import dockerfile
from .base import missing_extra, wait_until_healthy
from .interfaces import ContainerProvider

PORT = 8000
URL_LIFETIME_S = 86400
LOG = "/tmp/openenv-server.log"
PID = "/tmp/openenv-server.pid"
MODERN_MANIFEST = "/app/env/openenv.yaml"


def _sdk() -> Any:
    try:
        import daytona
    except ImportError:
        raise missing_extra("daytona", "daytona") from None
    return daytona


def _run(sandbox: Any, command: str) -> str:
    """What ``command`` printed in the sandbox (the SDK answers with ``.result``)."""
    answer = sandbox.process.exec(command, timeout=10)
    out = getattr(answer, "result", answer)
    return "" if out is None else str(out)


class DaytonaProvider(ContainerProvider):
    """Runs an environment image in a Daytona sandbox; see the module docs (never run live here).

    Args:
        api_key: Daytona API key (default: ``DAYTONA_API_KEY``).
        public: make the sandbox's preview public.
        resources: a ``daytona.Resources`` (CPU, memory) for image-based sandboxes.
        auto_stop_interval: minutes idle before Daytona stops the sandbox (0: never).
        target: Daytona region (e.g. ``"us"``).
        on_snapshot_create_logs: called with each line of a snapshot build's log.
        cmd: the shell command that starts the server in the sandbox.
        create_timeout: seconds allowed for creating the sandbox.

    ``start_container(image)`` takes an image name, ``"snapshot:<name>"``, or what
    :meth:`image_from_dockerfile` returned; ``port`` can only be 8000 (what the preview
    proxy serves), a ``cmd=`` keyword overrides the constructor's, and other keywords go to
    ``Daytona.create``.
    """

    _dockerfile_registry: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(
        self,
        *,
        api_key: str | None = None,
        public: bool = False,
        resources: Any = None,
        auto_stop_interval: int = 15,
        target: str | None = None,
        on_snapshot_create_logs: Callable[[str], None] | None = None,
        cmd: str | None = None,
        create_timeout: float = 300,
    ) -> None:
        sdk = _sdk()
        config: dict[str, Any] = {}
        key = api_key or os.environ.get("DAYTONA_API_KEY")
        if key:
            config["api_key"] = key
        if target:
            config["target"] = target
        self._daytona = sdk.Daytona(sdk.DaytonaConfig(**config))
        self._public = public
        self._resources = resources
        self._auto_stop_interval = auto_stop_interval
        self._on_snapshot_create_logs = on_snapshot_create_logs
        self._cmd = cmd
        self._create_timeout = create_timeout
        self._sandbox: Any = None
        self._preview_url: str | None = None

    # -- pure helpers (no SDK, no sandbox) ------------------------------------------------------
    @staticmethod
    def _parse_app_field(yaml_content: str) -> str | None:
        return dockerfile.app_field(yaml_content)

    @staticmethod
    def _parse_dockerfile_cmd(dockerfile_content: str) -> str | None:
        return dockerfile.last_cmd(dockerfile_content)

    @staticmethod
    def strip_buildkit_syntax(dockerfile_content: str) -> str:
        """The Dockerfile without BuildKit ``RUN --mount=...`` flags (Daytona cannot build them)."""
        return dockerfile.strip_mounts(dockerfile_content)

    @classmethod
    def image_from_dockerfile(cls, dockerfile_path: str, context_dir: str | None = None) -> str:
        """Check a Dockerfile now and return the ``"dockerfile:<path>"`` to start it from.

        ``context_dir`` defaults to the Dockerfile's grandparent (``<env>/server/Dockerfile``
        builds from ``<env>/``). Raises ``FileNotFoundError`` for a missing Dockerfile and
        ``ValueError`` for a missing context or ``COPY`` sources the context lacks. The
        image itself is made by :meth:`start_container`.
        """
        path = Path(dockerfile_path).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"Dockerfile not found: {dockerfile_path}")
        if context_dir is not None:
            context = Path(context_dir)
            if not context.is_dir():
                raise ValueError(f"context_dir does not exist: {context_dir}")
        else:
            context = path.parent.parent
        content = path.read_text(encoding="utf-8")
        stripped = dockerfile.strip_mounts(content)
        missing = dockerfile.missing_copy_sources(stripped, context)
        if missing:
            raise ValueError(
                f"Dockerfile COPY source '{missing[0]}' not found under context_dir '{context}'; "
                "the Dockerfile may expect another build context: pass context_dir="
            )
        cls._dockerfile_registry[str(path)] = {
            "stripped_content": stripped,
            "context_dir": str(context),
            "server_cmd": dockerfile.last_cmd(content),
        }
        return f"dockerfile:{path}"

    # -- the sandbox ----------------------------------------------------------------------------
    def _params(self, image: str, env_vars: dict[str, str] | None) -> tuple[Any, str | None]:
        """The SDK's creation parameters for ``image``, and a registered Dockerfile's ``CMD``."""
        sdk = _sdk()
        common: dict[str, Any] = {}
        if env_vars:
            common["env_vars"] = env_vars
        if self._public:
            common["public"] = True
        if self._auto_stop_interval != 15:
            common["auto_stop_interval"] = self._auto_stop_interval
        if image.startswith("snapshot:"):
            return sdk.CreateSandboxFromSnapshotParams(
                snapshot=image.removeprefix("snapshot:"), **common
            ), None
        fallback = None
        source: Any = image
        if image.startswith("dockerfile:"):
            key = image.removeprefix("dockerfile:")
            meta = self._dockerfile_registry.get(key)
            if meta is None:
                raise ValueError(
                    f"No registered Dockerfile metadata for {key}; "
                    "call DaytonaProvider.image_from_dockerfile() first"
                )
            fallback = meta["server_cmd"]
            # The SDK reads the file (and its context) at once; a temporary copy beside the
            # context holds the stripped text.
            copy = Path(meta["context_dir"]) / f".daytona-{uuid.uuid4().hex[:8]}.dockerfile"
            try:
                copy.write_text(meta["stripped_content"], encoding="utf-8")
                source = sdk.Image.from_dockerfile(str(copy))
            finally:
                copy.unlink(missing_ok=True)
        if self._resources is not None:
            common["resources"] = self._resources
        return sdk.CreateSandboxFromImageParams(image=source, **common), fallback

    def _find_openenv_yaml(self, sandbox: Any) -> str | None:
        if "found" in _run(sandbox, f"test -f {MODERN_MANIFEST} && echo found"):
            return MODERN_MANIFEST
        found = _run(sandbox, "find /app -maxdepth 4 -name openenv.yaml -print -quit 2>/dev/null")
        found = found.strip()
        return found if found.startswith("/") else None

    def _discover_server_cmd(self, sandbox: Any, port: int = PORT) -> str:
        """``cd <env root> && python -m uvicorn <app> ...`` from the sandbox's ``openenv.yaml``."""
        manifest = self._find_openenv_yaml(sandbox)
        if manifest is None:
            raise ValueError(
                "Could not find openenv.yaml inside the sandbox; pass cmd= to DaytonaProvider "
                "or start_container()"
            )
        app = dockerfile.app_field(_run(sandbox, f"cat {shlex.quote(manifest)}"))
        if app is None:
            raise ValueError(
                f"openenv.yaml at {manifest} does not contain an 'app' field; pass cmd= to "
                "DaytonaProvider or start_container()"
            )
        root = manifest.rsplit("/", 1)[0]
        return (
            f"cd {shlex.quote(root)} && "
            f"python -m uvicorn {shlex.quote(app)} --host 0.0.0.0 --port {port}"
        )

    def start_container(
        self,
        image: str,
        port: int | None = None,
        env_vars: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> str:
        """Create the sandbox, start the server in it, and return its signed preview URL."""
        if port is not None and port != PORT:
            raise ValueError(
                f"DaytonaProvider only supports port {PORT} (got {port}): the preview proxy "
                f"serves port {PORT} of the sandbox"
            )
        cmd = kwargs.pop("cmd", None) or self._cmd
        params, fallback = self._params(image, env_vars)
        if self._on_snapshot_create_logs is not None:
            kwargs["on_snapshot_create_logs"] = self._on_snapshot_create_logs
        self._sandbox = self._daytona.create(params, timeout=self._create_timeout, **kwargs)
        try:
            if cmd is None:
                try:
                    cmd = self._discover_server_cmd(self._sandbox)
                except ValueError:
                    if not fallback:
                        raise
                    cmd = fallback
            # In the background, its pid kept so wait_for_ready can tell a crash from a slow start.
            _run(
                self._sandbox,
                f"nohup bash -c {shlex.quote(cmd)} > {LOG} 2>&1 & echo $! > {PID}",
            )
            return self.refresh_preview_url()
        except BaseException:
            self.stop_container()
            raise

    def refresh_preview_url(self) -> str:
        """A new signed preview URL of the sandbox (the old one lapses after a day)."""
        if self._sandbox is None:
            raise RuntimeError("No active sandbox: call start_container() first")
        signed = self._sandbox.create_signed_preview_url(PORT, expires_in_seconds=URL_LIFETIME_S)
        self._preview_url = str(signed.url)
        return self._preview_url

    def stop_container(self) -> None:
        """Delete the sandbox; does nothing when none runs."""
        sandbox, self._sandbox, self._preview_url = self._sandbox, None, None
        if sandbox is not None:
            self._daytona.delete(sandbox)

    def wait_for_ready(self, base_url: str, timeout_s: float = 120.0) -> None:
        """Poll ``/health`` (cold starts take a while); ``RuntimeError`` with the server's log
        as soon as its process has died, ``TimeoutError`` after ``timeout_s``."""

        def died() -> str | None:
            if self._sandbox is None:
                return None
            state = _run(
                self._sandbox, f"kill -0 $(cat {PID}) 2>/dev/null && echo RUNNING || echo DEAD"
            )
            if "DEAD" not in state:
                return None
            return f"Server process died; its log:\n{_run(self._sandbox, f'cat {LOG} 2>/dev/null')}"

        wait_until_healthy(
            base_url,
            timeout_s,
            what="Daytona sandbox",
            interval_s=1.0,
            probe_timeout_s=5.0,
            alive=died,
        )


__all__ = ["DaytonaProvider"]

"""Talking to the Docker engine: connect, send the staged context, build, tag.

The image is built through the Docker Engine API (the ``docker`` SDK, legacy builder, so it
works on engines without BuildKit), from a tar of the staged :class:`ContextFolder`.
"""

from __future__ import annotations

import os
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from openenv_cli.errors import OpenEnvError
from openenv_cli.image.context import ContextFolder
from openenv_cli.image.dockerfile import declares_base_image_arg
from openenv_cli.image.plan import BASE_IMAGE_ARG, BuildPlan
from openenv_cli.image.stream import (
    BuildEvent,
    BuildLog,
    BuildStep,
    build_failure,
    engine_unreachable,
    reason,
    request_failure,
)

# Seconds to wait for one read from the engine: a RUN step may be silent for a long time.
ENGINE_TIMEOUT = 3600
CONNECT_TIMEOUT = 15


@dataclass(frozen=True)
class BuildResult:
    """A finished build."""

    image_id: str
    tags: tuple[str, ...]
    size: int
    seconds: float
    steps: tuple[BuildStep, ...]
    warnings: tuple[str, ...]

    @property
    def short_id(self) -> str:
        return self.image_id.split(":", 1)[-1][:12]

    @property
    def cached_steps(self) -> int:
        return sum(1 for step in self.steps if step.cached)


def human_size(size: int) -> str:
    """Bytes in the decimal units ``docker images`` uses: ``215 MB``."""
    value = float(size)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" or value >= 100 else f"{value:.3g} {unit}"
        value /= 1000
    return f"{size} B"  # pragma: no cover


def connect(environ: Mapping[str, str] | None = None) -> Any:
    """A low-level client (``docker.APIClient``) for the engine from the environment (DOCKER_HOST,
    DOCKER_TLS_VERIFY, DOCKER_CERT_PATH), checked with a ping; else the one-line error."""
    import docker
    import docker.errors
    import requests

    environ = os.environ if environ is None else environ
    try:
        # A short timeout while finding out whether anything answers (a DOCKER_HOST pointing
        # nowhere must not hang), the long one for the build's own requests.
        client = docker.APIClient(
            version="auto",
            timeout=CONNECT_TIMEOUT,
            **docker.utils.kwargs_from_env(environment=dict(environ)),
        )
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        raise engine_unreachable(exc, environ) from None
    client.timeout = ENGINE_TIMEOUT
    return client


def context_archive(root: Path) -> IO[bytes]:
    """A tar of the folder ``root`` (the staged build context), in a temporary file.

    Owners and permissions are normalised so identical files give identical layer cache keys
    whoever builds (the engine's cache ignores modification times).
    """
    archive = tempfile.TemporaryFile()  # noqa: SIM115  (handed to the caller, who closes it)

    def normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        if info.isdir():
            info.mode = 0o755
        elif info.isfile():
            info.mode = 0o755 if info.mode & 0o111 else 0o644
        return info

    with tarfile.open(fileobj=archive, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in _walk(root):
            tar.add(
                str(path),
                arcname=path.relative_to(root).as_posix(),
                recursive=False,
                filter=normalise,
            )
    archive.seek(0)
    return archive


def _walk(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        base = Path(folder)
        for name in dirs:
            yield base / name
        for name in sorted(files):
            yield base / name


def build_image(
    plan: BuildPlan,
    client: Any,
    context: ContextFolder,
    on_event: Callable[[BuildEvent], None] = lambda event: None,
) -> BuildResult:
    """Build ``context`` with ``plan`` on the engine behind ``client``, reporting progress to
    ``on_event``; tag the image with every tag of the plan. Raises :class:`OpenEnvError`."""
    import docker.errors
    import requests

    build_args = dict(plan.build_args)
    if declares_base_image_arg(context.dockerfile_text):
        build_args[BASE_IMAGE_ARG] = plan.base_image.value
    log = BuildLog()
    started = time.monotonic()
    try:
        with context_archive(context.root) as archive:
            stream = client.build(
                fileobj=archive,
                custom_context=True,
                dockerfile=context.dockerfile,
                tag=plan.tag,
                buildargs=build_args,
                labels=plan.labels,
                nocache=plan.no_cache,
                pull=False,
                rm=True,
                forcerm=True,
                decode=True,
                platform=plan.platform,
            )
            for chunk in stream:
                for event in log.feed(chunk):
                    on_event(event)
            for event in log.flush():
                on_event(event)
    except docker.errors.APIError as exc:
        raise request_failure(exc, plan.dockerfile) from None
    except (requests.exceptions.RequestException, docker.errors.DockerException, OSError) as exc:
        raise OpenEnvError(
            f"Lost the Docker engine during the build ({reason(exc)}).",
            hint="Check that the engine is still running (`docker info`) and build again.",
        ) from None
    log.finish()
    if log.error is not None:
        raise build_failure(log, plan.dockerfile, plan.base_image.value)
    if log.image_id is None:
        raise OpenEnvError(
            "The engine finished the build without reporting an image.",
            hint="Run the build again; check `docker info`.",
        )
    try:
        for extra in plan.tags[1:]:
            repository, _, tag = _split_tag(extra)
            client.tag(log.image_id, repository, tag or "latest")
        size = int(client.inspect_image(log.image_id).get("Size") or 0)
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise OpenEnvError(
            f"The image was built but tagging or inspecting it failed: {reason(exc)}."
        ) from None
    return BuildResult(
        image_id=log.image_id,
        tags=plan.tags,
        size=size,
        seconds=time.monotonic() - started,
        steps=tuple(log.steps),
        warnings=tuple(log.warnings),
    )


def _split_tag(reference: str) -> tuple[str, str, str]:
    """``host:5000/a/b:tag`` → (``host:5000/a/b``, ``:``, ``tag``)."""
    slash = reference.rfind("/")
    colon = reference.rfind(":")
    if colon > slash:
        return reference[:colon], ":", reference[colon + 1 :]
    return reference, "", ""


def stage_for_build(plan: BuildPlan, dest: Path) -> ContextFolder:
    """Put the project and the runtime bundle in ``dest`` for ``plan``. A Dockerfile that
    declares ``ARG BASE_IMAGE`` is kept as written (the base image goes in as that build
    argument); any other is rewritten onto the plan's base image."""
    from openenv_cli.image.context import read_dockerfile, stage_context

    _, text = read_dockerfile(plan.project_dir, plan.dockerfile)
    return stage_context(
        plan.project_dir,
        dest,
        dockerfile=plan.dockerfile,
        base_image=None if declares_base_image_arg(text) else plan.base_image.value,
        include_secrets=plan.include_secrets,
    )


def export_context(plan: BuildPlan, dest: Path) -> ContextFolder:
    """Write the exact build context of ``plan`` to ``dest`` (missing or empty) for another
    builder: the project, the runtime bundle in ``_openenv_runtime/``, and the Dockerfile at
    the root with the plan's base image written in, so ``docker build DEST`` works as is."""
    from openenv_cli.image.context import stage_context

    return stage_context(
        plan.project_dir,
        dest,
        dockerfile=plan.dockerfile,
        base_image=plan.base_image.value,
        include_secrets=plan.include_secrets,
        dockerfile_at_root=True,
    )


def external_build_command(plan: BuildPlan, context: ContextFolder) -> str:
    """The ``docker build`` line that builds an exported context as ``openenv build`` would."""
    import shlex

    parts = ["docker", "build"]
    for tag in plan.tags:
        parts += ["-t", tag]
    for name, value in plan.build_args.items():
        parts += ["--build-arg", f"{name}={value}"]
    if plan.platform:
        parts += ["--platform", plan.platform]
    if plan.no_cache:
        parts.append("--no-cache")
    parts.append(str(context.root))
    return shlex.join(parts)

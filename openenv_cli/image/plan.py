"""The plan of ``openenv build``: every setting resolved once, before anything is staged.

Settings resolve flag → environment variable → ``openenv.yaml`` → default, once, into
:class:`BuildPlan`: tags, base image, build arguments, the Dockerfile, what the context may
include, and the OCI labels put on the image.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from openenv_cli.config import Resolved, parse_assignments, resolve
from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.image import BASE_IMAGE_ENV, TAG_ENV
from openenv_cli.image.dockerfile import final_env
from openenv_cli.image.runtime_bundle import runtime_version
from openenv_cli.image.selection import typed_includes
from openenv_cli.manifest import load_manifest
from openenv_cli.manifest_schema import Manifest
from openenv_runtime.images import image_name

DEFAULT_BASE_IMAGE = "python:3.11-slim"
BASE_IMAGE_ARG = "BASE_IMAGE"

RUNTIME_LABEL = "io.openenv.runtime.version"
APP_LABEL = "io.openenv.app"
OCI = "org.opencontainers.image"

# Docker image references (https://github.com/distribution/reference grammar, tags only).
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_REFERENCE = re.compile(rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::{_TAG})?$")


# --- the plan -----------------------------------------------------------------------------


@dataclass(frozen=True)
class BuildPlan:
    """Everything ``openenv build`` needs, resolved once."""

    project_dir: Path
    manifest: Manifest
    version: str | None
    dockerfile: str  # relative to the project, POSIX separators
    tags: tuple[str, ...]
    tag_origin: str
    base_image: Resolved[str]
    build_args: dict[str, str]
    labels: dict[str, str]
    no_cache: bool = False
    platform: str | None = None
    include_secrets: tuple[str, ...] = field(default=())

    @property
    def tag(self) -> str:
        """The main tag (the one to ``docker run``)."""
        return self.tags[0]

    def run_command(self) -> str:
        """The ``docker run`` line that reaches the server on ``openenv.yaml``'s port; with
        ``-e PORT`` when the Dockerfile's own ``PORT`` says another (``port:`` changed after
        ``openenv init`` wrote the Dockerfile)."""
        port = self.manifest.port
        path = self.project_dir / self.dockerfile
        text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
        env = "" if final_env(text).get("PORT") == str(port) else f" -e PORT={port}"
        return f"docker run --rm -p {port}:{port}{env} {self.tag}"


def plan_build(
    project_dir: Path,
    *,
    tags: Sequence[str] = (),
    base_image: str | None = None,
    build_args: Sequence[str] = (),
    no_cache: bool = False,
    platform: str | None = None,
    dockerfile: str | None = None,
    include_secrets: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> BuildPlan:
    """Resolve the settings of ``openenv build`` for the project in ``project_dir``."""
    environ = os.environ if environ is None else environ
    project_dir = project_dir.resolve()
    manifest = load_manifest(project_dir)
    version = project_version(project_dir, manifest)
    args = parse_build_args(build_args, environ)
    from_args = args.pop(BASE_IMAGE_ARG, None)
    if from_args is not None and base_image is not None and from_args != base_image:
        raise UsageError(
            f"--base-image {base_image} and --build-arg {BASE_IMAGE_ARG}={from_args} disagree.",
            hint="Pass only --base-image.",
        )
    flag_base = base_image if base_image is not None else from_args
    base = resolve(
        "base_image",
        flag=flag_base,
        env=BASE_IMAGE_ENV,
        manifest=manifest,
        manifest_key="build.base_image",
        default=DEFAULT_BASE_IMAGE,
        environ=environ,
        flag_name="--base-image" if base_image is not None else f"--build-arg {BASE_IMAGE_ARG}",
    )
    base_value = base.value.strip()
    if not base_value:
        raise UsageError(
            f"The base image ({base.origin}) is empty.",
            hint=f"Pass e.g. --base-image {DEFAULT_BASE_IMAGE}.",
        )
    base = Resolved(base_value, base.source, base.origin)
    resolved_tags, tag_origin = resolve_tags(tags, manifest, version, environ)
    origin = "--dockerfile" if dockerfile else "openenv.yaml: build.dockerfile"
    dockerfile = (dockerfile or manifest.build.dockerfile).strip().replace("\\", "/")
    path = project_dir / dockerfile
    if not path.is_file():
        raise OpenEnvError(
            f"No Dockerfile at {path} ({origin} is {dockerfile!r}).",
            hint="Create it (a fresh `openenv init` project has server/Dockerfile) or fix build.dockerfile in openenv.yaml.",
        )
    if Path(os.path.relpath(path.resolve(), project_dir)).parts[:1] == ("..",):
        raise UsageError(
            f"{origin} {dockerfile!r} is outside the project.",
            hint="Keep the Dockerfile inside the project folder.",
        )
    labels = image_labels(
        manifest,
        version,
        source=source_url(project_dir, manifest),
        revision=git_revision(project_dir),
        base_image=base.value,
        runtime_version=runtime_version(),
        created=now or datetime.now(UTC),
    )
    return BuildPlan(
        project_dir=project_dir,
        manifest=manifest,
        version=version,
        dockerfile=Path(dockerfile).as_posix(),
        tags=tuple(resolved_tags),
        tag_origin=tag_origin,
        base_image=base,
        build_args=args,
        labels=labels,
        no_cache=no_cache,
        platform=platform or None,
        include_secrets=typed_includes(manifest.build.include_secret_files, include_secrets),
    )


def parse_build_args(
    values: Iterable[str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``["K=V", "K2"]`` → ``{"K": "V", "K2": <$K2>}``; a bare name takes its value from the
    environment, as ``docker build`` does. Later values win."""
    return parse_assignments(values, "--build-arg", environ=environ, bare_from_env=True)


def is_valid_reference(tag: str) -> bool:
    """True when ``tag`` is a valid image name with an optional tag (``repo/name:tag``)."""
    return len(tag) <= 255 and _REFERENCE.match(tag) is not None


def tag_for_version(version: str) -> str:
    """``1.0+cpu`` → ``1.0-cpu``: a version made valid as a Docker tag."""
    tag = re.sub(r"[^\w.-]", "-", version.strip())
    tag = re.sub(r"^[.-]+", "", tag)[:128]
    return tag or "latest"


def resolve_tags(
    flags: Sequence[str],
    manifest: Manifest,
    version: str | None,
    environ: Mapping[str, str] | None = None,
) -> tuple[list[str], str]:
    """The tags to apply and where they came from: ``-t`` (repeatable), else ``$OPENENV_IMAGE_TAG``,
    else ``build.tag`` in ``openenv.yaml``, else ``<name>:<version>`` and ``<name>:latest``."""
    environ = os.environ if environ is None else environ
    if flags:
        tags, origin = [t.strip() for t in flags], "-t"
    elif (environ.get(TAG_ENV) or "").strip():
        tags, origin = [environ[TAG_ENV].strip()], TAG_ENV
    elif manifest.build.tag:
        tags, origin = [manifest.build.tag.strip()], "openenv.yaml: build.tag"
    else:
        name = image_name(manifest.name)
        tags = [f"{name}:{tag_for_version(version)}"] if version else []
        tags.append(f"{name}:latest")
        return list(dict.fromkeys(tags)), "default"
    for tag in tags:
        if not is_valid_reference(tag):
            raise UsageError(
                f"{tag!r} ({origin}) is not a valid image tag.",
                hint="Use lowercase letters, digits, '.', '_' and '-', e.g. -t my_env:0.1.0 or -t registry.example.com/team/my_env:dev.",
            )
    return list(dict.fromkeys(tags)), origin


def project_version(project_dir: Path, manifest: Manifest) -> str | None:
    """``version`` from ``openenv.yaml``, else ``[project] version`` from ``pyproject.toml``."""
    if manifest.version:
        return manifest.version.strip() or None
    with contextlib.suppress(OSError, tomllib.TOMLDecodeError):
        data = tomllib.loads((project_dir / "pyproject.toml").read_text(encoding="utf-8"))
        version = data.get("project", {}).get("version")
        if isinstance(version, str) and version.strip():
            return version.strip()
    return None


def image_labels(
    manifest: Manifest,
    version: str | None,
    *,
    source: str | None,
    revision: str | None,
    base_image: str,
    runtime_version: str,
    created: datetime,
) -> dict[str, str]:
    """The OCI annotations (and ours) put on the image as build labels."""
    labels = {
        f"{OCI}.title": manifest.name,
        f"{OCI}.description": manifest.description,
        f"{OCI}.version": version or "",
        f"{OCI}.source": source or "",
        f"{OCI}.revision": revision or "",
        f"{OCI}.created": created.astimezone(UTC)
        .replace(microsecond=0)
        .isoformat()
        .replace("+00:00", "Z"),
        f"{OCI}.base.name": base_image,
        APP_LABEL: manifest.app,
        RUNTIME_LABEL: runtime_version,
    }
    return {key: value for key, value in labels.items() if value}


def _git(project_dir: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(project_dir), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def public_url(remote: str) -> str | None:
    """A git remote as a browsable URL without credentials: ``git@host:org/repo.git`` →
    ``https://host/org/repo``. None for local paths."""
    remote = remote.strip()
    scp = re.match(r"^(?:[\w.-]+@)?([\w.-]+):(?!//)(.+)$", remote)
    if scp and "/" not in scp.group(1):
        remote = f"https://{scp.group(1)}/{scp.group(2)}"
    parts = urlsplit(remote)
    if parts.scheme not in {"http", "https", "ssh", "git"} or not parts.hostname:
        return None
    host = parts.hostname + (
        f":{parts.port}" if parts.port and parts.scheme in {"http", "https"} else ""
    )
    path = re.sub(r"\.git/?$", "", parts.path)
    return str(urlunsplit(("https" if parts.scheme != "http" else "http", host, path, "", "")))


def source_url(project_dir: Path, manifest: Manifest) -> str:
    """Where the source lives: the git remote, else the configured Space, else the folder."""
    remote = _git(project_dir, "config", "--get", "remote.origin.url")
    url = public_url(remote) if remote else None
    if url:
        return url
    if manifest.push.repo_id:
        return f"https://huggingface.co/spaces/{manifest.push.repo_id}"
    return project_dir.resolve().as_uri()


def git_revision(project_dir: Path) -> str | None:
    """The commit the project is at (``-dirty`` appended with uncommitted changes)."""
    commit = _git(project_dir, "rev-parse", "HEAD")
    if not commit:
        return None
    status = _git(project_dir, "status", "--porcelain", "--untracked-files=no")
    return f"{commit}-dirty" if status else commit

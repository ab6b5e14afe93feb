"""What ``openenv build`` does, as plain functions: resolve the plan, stage, build, report.

The image is built through the Docker Engine API (the ``docker`` SDK, legacy builder, so it
works on engines without BuildKit). The build context is staged in a temporary folder: the
project's files plus ``_openenv_runtime/``, the runtime this CLI runs with, because no
package index serves it. Settings resolve flag → environment variable → ``openenv.yaml`` →
default, once, into :class:`BuildPlan`.

The engine's JSON stream is turned into :class:`BuildEvent` objects by :class:`BuildLog`
(pure, so it is tested without an engine); a failure becomes one :class:`OpenEnvError`
naming the failing step, with the last lines of its output.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from openenv_cli.config import Resolved, parse_assignments, resolve
from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.manifest import Manifest, load_manifest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_BASE_IMAGE = "python:3.11-slim"
BASE_IMAGE_ENV = "OPENENV_BASE_IMAGE"
TAG_ENV = "OPENENV_IMAGE_TAG"
BASE_IMAGE_ARG = "BASE_IMAGE"
LOG_TAIL_LINES = 15
# Seconds to wait for one read from the engine: a RUN step may be silent for a long time.
ENGINE_TIMEOUT = 3600
CONNECT_TIMEOUT = 15

RUNTIME_LABEL = "io.openenv.runtime.version"
APP_LABEL = "io.openenv.app"
OCI = "org.opencontainers.image"

# Docker image references (https://github.com/distribution/reference grammar, tags only).
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_REFERENCE = re.compile(rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::{_TAG})?$")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
_EXIT_CODE = re.compile(r"returned a non-zero code: (\d+)")
_ARG_BASE_IMAGE = re.compile(rf"^\s*ARG\s+{BASE_IMAGE_ARG}\b", re.IGNORECASE | re.MULTILINE)


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

    @property
    def tag(self) -> str:
        """The main tag (the one to ``docker run``)."""
        return self.tags[0]

    def run_command(self) -> str:
        port = self.manifest.port
        return f"docker run --rm -p {port}:{port} {self.tag}"


def plan_build(
    project_dir: Path,
    *,
    tags: Sequence[str] = (),
    base_image: str | None = None,
    build_args: Sequence[str] = (),
    no_cache: bool = False,
    platform: str | None = None,
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
    dockerfile = manifest.build.dockerfile.strip().replace("\\", "/")
    path = project_dir / dockerfile
    if not path.is_file():
        raise OpenEnvError(
            f"No Dockerfile at {path} (openenv.yaml: build.dockerfile is {dockerfile!r}).",
            hint="Create it (a fresh `openenv init` project has server/Dockerfile) or fix build.dockerfile in openenv.yaml.",
        )
    if Path(os.path.relpath(path.resolve(), project_dir)).parts[:1] == ("..",):
        raise UsageError(
            f"build.dockerfile {dockerfile!r} is outside the project.",
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


def image_name(project_name: str) -> str:
    """The repository part of the default tag: the project name, made valid for Docker."""
    name = re.sub(r"[^a-z0-9._-]+", "-", project_name.lower())
    name = re.sub(r"_{3,}", "__", name)
    name = re.sub(r"^[^a-z0-9]+|[^a-z0-9]+$", "", name)
    return name or "openenv-env"


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


def runtime_version() -> str:
    """The version of the runtime this CLI runs with (and puts in the image)."""
    from openenv_cli import staging

    return staging.runtime_version()


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
    return urlunsplit(("https" if parts.scheme != "http" else "http", host, path, "", ""))


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


def declares_base_image_arg(dockerfile_text: str) -> bool:
    """True when the Dockerfile reads the ``BASE_IMAGE`` build argument."""
    return _ARG_BASE_IMAGE.search(dockerfile_text) is not None


# --- the engine's stream ------------------------------------------------------------------


@dataclass
class BuildStep:
    """One Dockerfile instruction as the engine runs it."""

    number: int
    total: int
    instruction: str
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    cached: bool = False

    @property
    def duration(self) -> float:
        return (self.finished or time.monotonic()) - self.started


EventKind = Literal["step", "cached", "output", "status", "warning"]


@dataclass(frozen=True)
class BuildEvent:
    """Something to show: a new step, "this step comes from the cache", a line of output, pull
    progress or a warning."""

    kind: EventKind
    text: str
    step: BuildStep | None = None


class BuildLog:
    """Reads the engine's decoded build stream (``{"stream": ...}``, ``{"status": ...}``,
    ``{"aux": {"ID": ...}}``, ``{"error": ...}``) into steps, output lines and the outcome."""

    def __init__(self, keep: int = 400) -> None:
        self.steps: list[BuildStep] = []
        self.lines: deque[str] = deque(maxlen=keep)  # output lines, all steps
        self.step_lines: deque[str] = deque(maxlen=keep)  # output lines of the current step
        self.image_id: str | None = None
        self.error: str | None = None
        self.error_code: int | None = None
        self.warnings: list[str] = []
        self._partial = ""

    @property
    def current(self) -> BuildStep | None:
        return self.steps[-1] if self.steps else None

    def feed(self, chunk: Mapping[str, Any]) -> list[BuildEvent]:
        """Take one decoded chunk; return what there is to show."""
        events: list[BuildEvent] = []
        if "stream" in chunk:
            self._partial += _ANSI.sub("", str(chunk["stream"]))
            *complete, self._partial = self._partial.split("\n")
            for line in complete:
                events.extend(self._line(line.rstrip("\r")))
        if "status" in chunk:
            status = str(chunk["status"])
            if chunk.get("id"):
                status = f"{chunk['id']}: {status}"
            if chunk.get("progress"):
                status = f"{status} {chunk['progress']}"
            events.append(BuildEvent("status", status, self.current))
        aux = chunk.get("aux")
        if isinstance(aux, Mapping) and aux.get("ID"):
            self.image_id = str(aux["ID"])
        if chunk.get("error") or chunk.get("errorDetail"):
            events.extend(self.flush())
            detail = chunk.get("errorDetail") or {}
            self.error = _ANSI.sub(
                "", str(chunk.get("error") or detail.get("message") or "unknown error")
            ).strip()
            code = detail.get("code") if isinstance(detail, Mapping) else None
            match = _EXIT_CODE.search(self.error)
            self.error_code = (
                int(match.group(1)) if match else (int(code) if isinstance(code, int) else None)
            )
        return events

    def flush(self) -> list[BuildEvent]:
        """Emit a last line that had no newline."""
        if not self._partial:
            return []
        line, self._partial = self._partial, ""
        return self._line(line)

    def finish(self) -> None:
        """Mark the last step done (at the end of the stream)."""
        self.flush()
        if self.current and self.current.finished is None and self.error is None:
            self.current.finished = time.monotonic()

    def tail(self, count: int = LOG_TAIL_LINES) -> list[str]:
        """The last ``count`` output lines of the current (failing) step, blank lines dropped."""
        lines = [line for line in self.step_lines if line.strip()]
        return lines[-count:]

    def _line(self, line: str) -> list[BuildEvent]:
        match = _STEP.match(line)
        if match:
            if self.current and self.current.finished is None:
                self.current.finished = time.monotonic()
            # Continuation lines arrive joined with their indentation: show one space instead.
            step = BuildStep(
                int(match.group(1)), int(match.group(2)), " ".join(match.group(3).split())
            )
            self.steps.append(step)
            self.step_lines.clear()
            return [BuildEvent("step", step.instruction, step)]
        stripped = line.strip()
        if stripped == "---> Using cache" and self.current:
            self.current.cached = True
            return [BuildEvent("cached", "", self.current)]
        if (
            stripped.startswith("--->")
            or stripped.startswith("Removing intermediate container")
            or stripped.startswith("Successfully built")
            or stripped.startswith("Successfully tagged")
            or (not stripped and not self.step_lines)
        ):
            return []
        if stripped.startswith("[Warning]"):
            self.warnings.append(stripped[len("[Warning]") :].strip())
            return [BuildEvent("warning", self.warnings[-1], self.current)]
        self.lines.append(line)
        self.step_lines.append(line)
        return [BuildEvent("output", line, self.current)]


# --- errors ----------------------------------------------------------------------------------


def _reason(exc: BaseException) -> str:
    """The useful part of a connection error: ``FileNotFoundError(2, 'No such file ...')`` → the text."""
    text = str(exc)
    match = re.search(r"\w+Error\(\d+, '([^']+)'\)", text) or re.search(
        r"\[Errno -?\d+\] ([^'\")]+)", text
    )
    if match:
        return match.group(1).strip()
    match = re.search(
        r"Connection refused|timed out|Name or service not known|certificate verify failed", text
    )
    if match:
        return match.group(0)
    return text.splitlines()[0][:200] if text else type(exc).__name__


def engine_host(environ: Mapping[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ
    return environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def engine_unreachable(
    exc: BaseException, environ: Mapping[str, str] | None = None
) -> OpenEnvError:
    """The one-line error for "no Docker engine answers", saying how to start one."""
    host = engine_host(environ)
    reason = _reason(exc)
    if "Permission denied" in reason or "permission denied" in str(exc):
        return OpenEnvError(
            f"Permission denied talking to the Docker engine at {host}: add yourself to the docker group "
            "(`sudo usermod -aG docker $USER`, then log in again) or run with sudo."
        )
    return OpenEnvError(
        f"No Docker engine answers at {host} ({reason}): start one (`sudo systemctl start docker`, "
        "or `sudo dockerd &`), or set DOCKER_HOST to a running engine."
    )


def _image_of(instruction: str, base_image: str) -> str:
    words = instruction.split()
    image = next((w for w in words[1:] if not w.startswith("--")), base_image)
    return base_image if "$" in image else image


def build_failure(log: BuildLog, plan_dockerfile: str, base_image: str) -> OpenEnvError:
    """The error for a build the engine reported as failed (``log.error`` is set)."""
    error = (log.error or "the build failed").strip()
    step = log.current
    if step is None:
        return OpenEnvError(f"The build failed: {error}.", hint=f"Check {plan_dockerfile}.")
    where = f"Step {step.number}/{step.total} ({step.instruction})"
    keyword = step.instruction.split(None, 1)[0].upper() if step.instruction else ""
    if keyword == "FROM":
        image = _image_of(step.instruction, base_image)
        if "invalid reference format" in error:
            return UsageError(
                f"{image!r} is not a valid image name ({where}: {error}).",
                hint="Pass a valid --base-image, e.g. --base-image python:3.11-slim.",
            )
        return OpenEnvError(
            f"The base image {image} is not on this machine and could not be pulled: {error}",
            hint=(
                f"Pull it first (`docker pull {image}`) where a registry is reachable, or use an image you have "
                f"(`docker images`) with --base-image, ${BASE_IMAGE_ENV} or build.base_image in openenv.yaml."
            ),
        )
    if log.error_code is not None and keyword == "RUN":
        summary = f"{where} failed with exit code {log.error_code}."
    else:
        summary = f"{where} failed: {error}"
    tail = log.tail()
    message = (
        summary
        if not tail
        else summary + "\nLast lines of its output:\n" + "\n".join(f"  {line}" for line in tail)
    )
    hint = f"Fix that step of {plan_dockerfile} (or what it runs) and build again."
    if keyword in {"COPY", "ADD"}:
        hint = f"Check that the file exists in the project and is not excluded by .dockerignore or .gitignore; then fix {plan_dockerfile}."
    return OpenEnvError(message, hint=hint)


def request_failure(exc: BaseException, plan_dockerfile: str) -> OpenEnvError:
    """The error for a build the engine refused before running any step (HTTP 4xx/5xx)."""
    explanation = getattr(exc, "explanation", None) or str(exc)
    text = str(explanation).strip()
    line = re.search(r"(?:parse error )?line (\d+)", text)
    if "parse error" in text or "unknown instruction" in text or "Dockerfile" in text:
        where = f" (line {line.group(1)})" if line else ""
        return OpenEnvError(
            f"{plan_dockerfile} is not a valid Dockerfile{where}: {text}.",
            hint=f"Fix {plan_dockerfile}{where} and build again.",
        )
    return OpenEnvError(
        f"The Docker engine refused the build: {text}.",
        hint=f"Check {plan_dockerfile} and the options given.",
    )


# --- the build ---------------------------------------------------------------------------------


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
    archive = tempfile.TemporaryFile()

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


@dataclass(frozen=True)
class StagedContext:
    """A staged build context: the folder, its Dockerfile (relative), file count and bytes."""

    root: Path
    dockerfile: str
    files: int
    size: int


def stage_context(plan: BuildPlan, dest: Path) -> StagedContext:
    """Put the project and the runtime bundle in ``dest`` (see :mod:`openenv_cli.staging`),
    with the Dockerfile's base image set to the plan's."""
    from openenv_cli import staging

    staged = staging.stage(
        plan.project_dir, dest, dockerfile=plan.dockerfile, base_image=plan.base_image.value
    )
    size = sum((staged.root / name).stat().st_size for name in staged.files)
    return StagedContext(staged.root, staged.dockerfile, len(staged.files), size)


def build_image(
    plan: BuildPlan,
    client: Any,
    context: StagedContext,
    on_event: Callable[[BuildEvent], None] = lambda event: None,
) -> BuildResult:
    """Build ``context`` with ``plan`` on the engine behind ``client``, reporting progress to
    ``on_event``; tag the image with every tag of the plan. Raises :class:`OpenEnvError`."""
    import docker.errors
    import requests

    dockerfile_text = (context.root / context.dockerfile).read_text(
        encoding="utf-8", errors="replace"
    )
    build_args = dict(plan.build_args)
    if declares_base_image_arg(dockerfile_text):
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
            f"Lost the Docker engine during the build ({_reason(exc)}).",
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
            f"The image was built but tagging or inspecting it failed: {_reason(exc)}."
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

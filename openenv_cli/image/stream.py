"""The engine's build stream, read into steps and output (:class:`BuildLog`, pure, so it is
tested without an engine), and every way a build can fail, as one :class:`OpenEnvError` that
names the failing step with the last lines of its output."""

from __future__ import annotations

import os
import re
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.image import BASE_IMAGE_ENV

LOG_TAIL_LINES = 15
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
_EXIT_CODE = re.compile(r"returned a non-zero code: (\d+)")


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
        noise = (
            "--->",
            "Removing intermediate container",
            "Successfully built",
            "Successfully tagged",
        )
        if stripped.startswith(noise) or (not stripped and not self.step_lines):
            return []
        if stripped.startswith("[Warning]"):
            self.warnings.append(stripped[len("[Warning]") :].strip())
            return [BuildEvent("warning", self.warnings[-1], self.current)]
        self.lines.append(line)
        self.step_lines.append(line)
        return [BuildEvent("output", line, self.current)]


# --- errors ----------------------------------------------------------------------------------


def reason(exc: BaseException) -> str:
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
    why = reason(exc)
    if "Permission denied" in why or "permission denied" in str(exc):
        return OpenEnvError(
            f"Permission denied talking to the Docker engine at {host}: add yourself to the docker group "
            "(`sudo usermod -aG docker $USER`, then log in again) or run with sudo."
        )
    return OpenEnvError(
        f"No Docker engine answers at {host} ({why}): start one (`sudo systemctl start docker`, "
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

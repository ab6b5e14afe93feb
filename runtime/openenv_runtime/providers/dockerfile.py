"""Reading a Dockerfile and an ``openenv.yaml`` without building anything.

What ``DaytonaProvider`` needs to start a server where the image's ``CMD`` is not run: the
last ``CMD``, the ``app:`` of a manifest, a Dockerfile without BuildKit ``--mount`` flags
(which Daytona's builder refuses), and the ``COPY`` sources a build context must hold.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

_CMD = re.compile(r"CMD\s+(.+)", re.IGNORECASE)
_RUN = re.compile(r"(\s*RUN\s+)(.*)$", re.IGNORECASE)
_MOUNT = re.compile(r"--mount=\S+\s*")
_COPY = re.compile(r"\s*COPY\s+(.+)$", re.IGNORECASE)


def last_cmd(dockerfile: str) -> str | None:
    """The last ``CMD`` as one command line (exec form joined by spaces), or None."""
    found: str | None = None
    for line in dockerfile.splitlines():
        text = line.strip()
        if text.startswith("#"):
            continue
        match = _CMD.match(text)
        if match:
            found = match.group(1).strip()
    if not found:
        return None
    if found.startswith("["):
        try:
            parts = json.loads(found)
        except ValueError:
            return found
        if isinstance(parts, list) and all(isinstance(part, str) for part in parts):
            return " ".join(parts)
    return found


def strip_mounts(dockerfile: str) -> str:
    """``dockerfile`` with the ``--mount=...`` flags of its ``RUN`` instructions removed.

    Flags are removed only before the command starts, also on continuation lines; every
    other line is kept as it is.
    """
    out: list[str] = []
    continued = False  # the previous line ended with a backslash
    in_flags = False  # inside a RUN whose command has not started yet
    for line in dockerfile.split("\n"):
        run = None if continued else _RUN.match(line)
        if run is not None:
            head, rest, in_flags = run.group(1), run.group(2), True
        elif in_flags:
            rest = line.lstrip()
            head = line[: len(line) - len(rest)]
        if in_flags:
            while (mount := _MOUNT.match(rest)) is not None:
                rest = rest[mount.end() :]
            if rest.strip() not in ("", "\\"):
                in_flags = False
            line = head + rest
        continued = line.rstrip().endswith("\\")
        if not continued:
            in_flags = False
        out.append(line)
    return "\n".join(out)


def missing_copy_sources(dockerfile: str, context: Path) -> list[str]:
    """The relative ``COPY`` sources (not ``--from=`` a stage) that ``context`` lacks."""
    missing = []
    for line in dockerfile.splitlines():
        match = _COPY.match(line)
        if match is None:
            continue
        try:
            words = shlex.split(match.group(1))
        except ValueError:
            continue
        if any(word.startswith("--from=") for word in words):
            continue
        args = [word for word in words if not word.startswith("--")]
        for source in args[:-1]:
            if source.startswith("/"):
                continue
            if not (context / source).exists() and not any(context.glob(source)):
                missing.append(source)
    return missing


def app_field(manifest: str) -> str | None:
    """The top-level ``app:`` of an ``openenv.yaml`` text, or None (also when it is not YAML)."""
    try:
        import yaml
    except ImportError:
        from .base import missing_extra

        raise missing_extra("pyyaml", "daytona") from None
    from ..bounded_yaml import load_bounded

    try:
        data = load_bounded(manifest)  # size, depth and aliases bounded
    except (yaml.YAMLError, ValueError):
        return None
    value = data.get("app") if isinstance(data, dict) else None
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None

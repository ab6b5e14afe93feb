"""Render ``templates/deploy/<target>/`` (pure) and write the result (the only side effect).

Every target's files are its own templates plus Envoy's configuration in ``envoy/envoy.yaml``,
rendered from ``templates/deploy/envoy/`` with the discovery that target uses.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from openenv_cli.deploy.backends import Backend
from openenv_cli.deploy.settings import DeploySettings
from openenv_cli.deploy.sizing import front_session_budget
from openenv_cli.errors import UsageError
from openenv_cli.safe_files import links_on_the_way, write_inside
from openenv_cli.scaffold import render_project, write_project

Discovery = Literal["STATIC", "STRICT_DNS", "EDS"]
HEALTH_INTERVAL = "5s"
REPLICA_BACKLOG = 4096  # a replica's listen queue (the runtime's backlog; somaxconn caps it)
IDLE_MARGIN_S = 60  # Envoy's idle limits stay this far above the server's session timeout
GRACE_MARGIN_S = 15  # the termination grace period stays this far above the drain timeout

# Envoy's counters for Prometheus: a listener serving only GET /stats/prometheus from the admin
# page (which itself stays on the loopback), where a front has a fixed admin port.
ENVOY_STATS_PORT = 9902
ENVOY_STATS_PATH = "/stats/prometheus"

# Where the shared checkpoint volume is mounted in each replica (the image creates it).
CHECKPOINT_MOUNT = "/var/lib/openenv/checkpoints"


def idle_timeout(settings: DeploySettings) -> str:
    """Envoy's idle limits: above the server's session timeout, or off (0s) when it has none."""
    if settings.session_timeout <= 0:
        return "0s"
    return f"{math.ceil(settings.session_timeout) + IDLE_MARGIN_S}s"


def connection_limit(settings: DeploySettings) -> int:
    """One front's connection and request ceilings: its share of the capacity plus a quarter,
    never more sessions than its open files hold (past that Envoy refuses, not fails)."""
    share = settings.sessions_per_front
    return min(max(1024, share + share // 4), front_session_budget(settings.front_nofile))


def burst_limits(settings: DeploySettings) -> dict[str, Any]:
    """Upstream timeouts and thresholds that survive every session of a replica connecting at once.

    A replica's listen backlog holds 4,096 connections; a burst past that is answered by SYN
    retransmission (after 1, 3, 7, 15 s), and a busy replica answers /health late. Envoy must
    not take those for a dead replica (5 s connect timeout, two failures eject it): that ejects
    every replica in turn and answers the burst with 503s. A dead replica refuses connections
    at once, so a higher threshold still ejects it within milliseconds under load.
    """
    burst = settings.capacity_per_replica > REPLICA_BACKLOG
    return {
        "connect_timeout": "30s" if burst else "5s",
        "health_timeout": "5s" if burst else "2s",
        "unhealthy_threshold": 3 if burst else 2,
        "ejection_threshold": max(2, min(100, settings.capacity_per_replica // 1024)),
        # Every session of a burst may need one retry; Envoy's default budget is 3 at once.
        "max_retries": connection_limit(settings),
    }


def base_context(settings: DeploySettings) -> dict[str, Any]:
    """The variables every deploy template may use."""
    return {
        "target": settings.target,
        "image": settings.image,
        "envoy_image": settings.envoy_image,
        "port": settings.port,
        "front_port": settings.front_port,
        "replicas": settings.replicas,
        "workers": settings.workers,
        "sessions_per_worker": settings.sessions_per_worker,
        "capacity_per_replica": settings.capacity_per_replica,
        "capacity": settings.capacity,
        "fronts": settings.fronts,
        "front_nofile": settings.front_nofile,
        "sessions_per_front": settings.sessions_per_front,
        "session_timeout": _number(settings.session_timeout),
        "drain_timeout": _number(settings.drain_timeout),
        "grace_period": math.ceil(settings.drain_timeout) + GRACE_MARGIN_S,
        "token": settings.token,
        "access_log": settings.access_log,
        "balancing": settings.balancing,
        "checkpoints": settings.checkpoints,
        "checkpoint_dir": CHECKPOINT_MOUNT,
        "metrics_path": "/metrics",
        "stats_port": ENVOY_STATS_PORT,
        "stats_path": ENVOY_STATS_PATH,
    }


def envoy_files(
    settings: DeploySettings,
    *,
    discovery: Discovery,
    backends: Sequence[Backend] = (),
    eds_path: str = "",
    admin_port: int = 0,
    stats: bool = False,
    path: str = "envoy/envoy.yaml",
) -> dict[str, str]:
    """Envoy's configuration for ``settings``: ``{path: text}``; ``stats``: serve its counters
    to Prometheus on :data:`ENVOY_STATS_PORT` (needs a fixed ``admin_port``)."""
    context = (
        base_context(settings)
        | burst_limits(settings)
        | {
            "discovery": discovery,
            "backends": list(backends),
            "eds_path": eds_path,
            "admin_address": "127.0.0.1",
            "admin_port": admin_port,
            "stats_port": ENVOY_STATS_PORT if stats and admin_port else 0,
            "listen_address": "0.0.0.0",
            "max_connections": connection_limit(settings),
            "backlog": max(4096, min(settings.sessions_per_front, 65535)),
            "idle_timeout": idle_timeout(settings),
            "session_timeout_label": (
                f"{_number(settings.session_timeout)} s" if settings.session_timeout > 0 else "none"
            ),
            "health_interval": HEALTH_INTERVAL,
            "replicas_label": (
                f"{settings.replicas} replicas"
                if not backends
                else ", ".join(str(b) for b in backends)
            ),
        }
    )
    rendered = render_project(settings.name, context, template="deploy/envoy")
    return {path: rendered["envoy.yaml"]}


def render_target(settings: DeploySettings, extra: Mapping[str, Any]) -> dict[str, str]:
    """Render ``templates/deploy/<target>/`` with the base context and ``extra``."""
    return render_project(
        settings.name, base_context(settings) | dict(extra), template=f"deploy/{settings.target}"
    )


@dataclass(frozen=True)
class WriteOutcome:
    """What ``write_files`` did: the files written, or that the folder already matched."""

    written: list[Path]
    unchanged: bool = False
    kept_edits: bool = False


RECORD = ".openenv-deploy.json"  # what the last run wrote: {relative path: sha256}


def write_files(
    files: Mapping[str, str],
    out: Path,
    *,
    force: bool,
    keep_edits: bool = False,
    later: Iterable[str] = (),
) -> WriteOutcome:
    """Write ``files`` under ``out``, all or nothing (``later``: files the caller writes
    afterwards, whose path is checked for links now too).

    A file already there with other contents is replaced when it is still what an earlier
    run wrote (the options changed; ``out/.openenv-deploy.json`` records what was written);
    otherwise it is someone's edit: replaced only with ``force``, and with ``keep_edits``
    (``--apply``) kept and used as it is.
    """
    linked = _links_in_the_way([*files, RECORD, *later], out)
    if linked:
        raise UsageError(
            f"Symbolic links are on the way to the deploy files: {', '.join(linked)}. "
            "openenv deploy never writes through a link (it could point outside the project).",
            hint="Remove the links, or pass --out with another folder.",
        )
    record = _load_record(out)
    differing = [
        relative
        for relative, text in files.items()
        if (out / relative).is_file() and _read(out / relative) != text
    ]
    edited = [r for r in differing if record.get(r) != _digest(_read(out / r))]
    missing = [relative for relative in files if not (out / relative).is_file()]
    if not differing and not missing:
        return WriteOutcome([], unchanged=True)
    if edited and not force:
        if keep_edits and not missing and len(edited) == len(differing):
            return WriteOutcome([], kept_edits=True)
        raise UsageError(
            f"{out} holds edited files ({', '.join(sorted(edited))}) that these options would "
            "replace.",
            hint="Pass --force to replace them, --out DIR for another folder, or --apply to "
            "apply the edited files as they are.",
        )
    written = write_project(dict(files), out, force=True)
    _save_record(
        out, {**record, **{r: hashlib.sha256(t.encode()).hexdigest() for r, t in files.items()}}
    )
    return WriteOutcome(written)


def _digest(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def _load_record(out: Path) -> dict[str, str]:
    path = out / RECORD
    if path.is_symlink():  # not ours: no record, every differing file counts as edited
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _save_record(out: Path, record: Mapping[str, str]) -> None:
    """Write the record, never through a link."""
    write_inside(out, RECORD, json.dumps(dict(sorted(record.items())), indent=1) + "\n")


def _links_in_the_way(files: Iterable[str], out: Path) -> list[str]:
    """The symbolic links among ``out``'s own components (when it is relative: the folder it
    names inside the current one) and every existing path from ``out`` to each file."""
    found: list[Path] = []
    if not out.is_absolute():
        found += [p for p in [*reversed(out.parents), out] if p.parts and p.is_symlink()]
    found += links_on_the_way(out, files)
    return sorted({str(p) for p in found})


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)

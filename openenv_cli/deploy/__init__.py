"""``openenv deploy``: render the files that run a project past one machine (Kubernetes,
Docker Swarm, Slurm, or Envoy alone), and for Swarm and Slurm apply them.

``plan_deploy`` resolves the settings and renders (pure); ``run_deploy`` writes the files
and applies or removes. One module per target renders ``templates/deploy/<target>/``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from openenv_cli.config import resolve
from openenv_cli.deploy import envoy, kubernetes, slurm, swarm
from openenv_cli.deploy.render import WriteOutcome, write_files
from openenv_cli.deploy.settings import TARGETS, DeploySettings, Target, resolve_settings
from openenv_cli.errors import UsageError
from openenv_cli.image import BASE_IMAGE_ENV
from openenv_cli.image.plan import DEFAULT_BASE_IMAGE, is_valid_reference
from openenv_cli.manifest import load_manifest
from openenv_cli.manifest_schema import MANIFEST_FILE
from openenv_cli.safe_files import write_inside
from openenv_runtime.client.endpoints import ENDPOINTS_FILE, Endpoints

TOKEN_ENV = "OPENENV_API_KEY"


@dataclass(frozen=True)
class DeployPlan:
    """What ``openenv deploy`` will write, and where."""

    settings: DeploySettings
    out: Path
    files: dict[str, str]
    stack: str
    base_image: str


@dataclass
class DeployResult:
    """What ``openenv deploy`` did (printed as a table or as one JSON object)."""

    target: str
    out: str
    files: list[str]
    written: bool  # the files in ``out`` are these options' (written now, or already so)
    kept_edits: bool = False
    changed: bool = False  # this run wrote or replaced files
    url: str | None = None
    stack: str | None = None
    job_id: str | None = None
    endpoints: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    fronts: int | None = None
    sessions_per_front: int | None = None


def plan_deploy(
    target: str,
    path: Path,
    *,
    replicas: int | None = None,
    image: str | None = None,
    out: Path | None = None,
    front_port: int | None = None,
    backends: list[str] | None = None,
    token: bool | None = None,
    stack: str | None = None,
    balancing: str | None = None,
    fronts: int | None = None,
    front_nofile: int | None = None,
) -> DeployPlan:
    """Resolve the settings of ``openenv deploy TARGET`` and render its files (no side effect)."""
    if target not in TARGETS:
        raise UsageError(
            f"Unknown deploy target {target!r}.", hint=f"Choose one of: {', '.join(TARGETS)}."
        )
    chosen: Target = target
    project: Path | None = path
    if chosen == "envoy" and not (path / MANIFEST_FILE).is_file():
        project = None
    manifest = load_manifest(project) if project is not None else None  # read once
    settings = resolve_settings(
        chosen,
        project,
        replicas=replicas,
        image=image,
        front_port=front_port,
        token=token,
        backends=backends,
        balancing=balancing,
        fronts=fronts,
        front_nofile=front_nofile,
        manifest=manifest,
    )
    base_image = resolve(
        "base_image",
        env=BASE_IMAGE_ENV,
        manifest=manifest,
        manifest_key="build.base_image",
        default=DEFAULT_BASE_IMAGE,
    ).value
    if not is_valid_reference(str(base_image)):
        raise UsageError(
            f"The base image {base_image!r} is not a valid image reference.",
            hint="Fix OPENENV_BASE_IMAGE or build.base_image, e.g. python:3.11-slim.",
        )
    out = out or Path("deploy") / chosen
    stack_name = stack or settings.name
    app = manifest.app if manifest is not None else ""
    if chosen == "envoy":
        files = envoy.render(settings)
    elif chosen == "kubernetes":
        files = kubernetes.render(settings)
    elif chosen == "swarm":
        files = swarm.render(settings, stack=stack_name, app=app, base_image=str(base_image))
    else:
        files = slurm.render(settings, out, app=app)
    return DeployPlan(settings, out, files, stack_name, str(base_image))


def run_deploy(
    plan: DeployPlan,
    *,
    apply: bool,
    force: bool,
    timeout: float,
    progress: Callable[[str], None] = lambda line: None,
) -> DeployResult:
    """Write the plan's files; with ``apply`` start them (Swarm, Slurm), telling ``progress``."""
    target = plan.settings.target
    if apply and target not in ("swarm", "slurm"):
        raise UsageError(
            f"--apply is for swarm and slurm; `{target}` files are applied by their own tool.",
            hint="kubernetes: kubectl apply -k DIR; envoy: envoy -c DIR/envoy.yaml",
        )
    if apply and target == "slurm" and plan.settings.token and not os.environ.get(TOKEN_ENV):
        raise UsageError(
            f"These replicas require an access token, and {TOKEN_ENV} is not set.",
            hint=f"export {TOKEN_ENV}=... (sbatch passes it to the job; no file holds it), "
            "or pass --no-token.",
        )
    outcome: WriteOutcome = write_files(
        plan.files, plan.out, force=force, keep_edits=apply, later=[ENDPOINTS_FILE]
    )
    result = DeployResult(
        target=target,
        out=str(plan.out),
        files=sorted(plan.files),
        written=not outcome.kept_edits,
        kept_edits=outcome.kept_edits,
        fronts=plan.settings.fronts,
        sessions_per_front=plan.settings.sessions_per_front,
        changed=bool(outcome.written),
    )
    if apply and target == "swarm":
        run = swarm.apply(plan.out, plan.stack, base_image=plan.base_image, timeout=timeout)
        result.url, result.stack, result.endpoints = run.url, run.stack, run.endpoints
    elif apply and target == "slurm":
        job = slurm.apply(plan.out, plan.settings.replicas, timeout=timeout, progress=progress)
        result.url, result.job_id, result.endpoints = job.url, job.job_id, job.endpoints
    write_inside(plan.out, ENDPOINTS_FILE, known_endpoints(plan, result).to_json())
    result.files = sorted([*result.files, ENDPOINTS_FILE])
    return result


def known_endpoints(plan: DeployPlan, result: DeployResult) -> Endpoints:
    """What ``endpoints.json`` records (``EnvPool.from_deploy`` reads it): the front, and the
    replicas where this machine reaches each one (Slurm's, checked by --apply; the servers
    given to the envoy target). Swarm's replicas answer on the stack's network only."""
    settings = plan.settings
    if settings.target == "kubernetes":  # in the cluster, through the Envoy Service
        host = f"{settings.name}-envoy" + (f".{settings.namespace}" if settings.namespace else "")
        return Endpoints("kubernetes", front=f"http://{host}:{settings.front_port}")
    if settings.target == "envoy":
        return Endpoints("envoy", replicas=[f"http://{b.netloc}" for b in settings.backends])
    if settings.target == "swarm":
        return Endpoints("swarm", front=result.url or f"http://127.0.0.1:{settings.front_port}")
    return Endpoints("slurm", front=result.url, replicas=[f"http://{e}" for e in result.endpoints])


def remove_deployment(target: str, *, stack: str | None, job_id: str | None) -> DeployResult:
    """``--remove``: take a Swarm stack down, or cancel a Slurm job."""
    if target == "swarm" and stack:
        return DeployResult(target, "", [], written=False, stack=stack, removed=swarm.remove(stack))
    if target == "slurm" and job_id:
        slurm.cancel(job_id)
        return DeployResult(target, "", [], written=False, job_id=job_id, removed=[job_id])
    raise UsageError(
        "--remove takes down a Swarm stack or a Slurm job.",
        hint="openenv deploy swarm --remove [--stack NAME], or openenv deploy slurm --remove --job-id ID (or scancel ID).",
    )

"""``openenv deploy``: run a project past one machine, behind Envoy."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from openenv_cli.console import console, err_console
from openenv_cli.deploy import DeployResult, plan_deploy, remove_deployment, run_deploy


def command(
    target: Annotated[
        str,
        typer.Argument(help="kubernetes, swarm, slurm or envoy.", show_default=False),
    ],
    path: Annotated[
        Path,
        typer.Argument(help="The project folder (with openenv.yaml).", file_okay=False),
    ] = Path("."),
    replicas: Annotated[
        int | None,
        typer.Option(
            "--replicas",
            "-n",
            min=1,
            help="Server replicas (env OPENENV_DEPLOY_REPLICAS; deploy.replicas; default 2).",
        ),
    ] = None,
    image: Annotated[
        str | None,
        typer.Option(
            "--image",
            help="Image the replicas run (env OPENENV_IMAGE_TAG; deploy.image; build.tag; default what `openenv build` tags).",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Folder for the files (default: deploy/TARGET).", file_okay=False
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            min=1,
            max=65535,
            help="Port of the Envoy front (env OPENENV_DEPLOY_PORT; deploy.port; default 8080).",
        ),
    ] = None,
    backend: Annotated[
        list[str] | None,
        typer.Option(
            "--backend",
            help="envoy target: a server as host:port (repeatable), or a file with one a line.",
        ),
    ] = None,
    token: Annotated[
        bool | None,
        typer.Option(
            "--token/--no-token",
            help="Replicas require the access token OPENENV_API_KEY, from a Secret (env OPENENV_DEPLOY_TOKEN; deploy.token; default: on when OPENENV_API_KEY is set).",
            show_default=False,
        ),
    ] = None,
    balancing: Annotated[
        str | None,
        typer.Option(
            "--balancing",
            help="Envoy: least_request (fewest open sessions) or session (hash of X-OpenEnv-Session: resumed sessions reach their replica) (env OPENENV_DEPLOY_BALANCING; deploy.balancing; default least_request).",
        ),
    ] = None,
    fronts: Annotated[
        int | None,
        typer.Option(
            "--fronts",
            min=1,
            help="Envoy fronts sharing the sessions: processes on one port (Slurm, Swarm, envoy) or pods (Kubernetes) (env OPENENV_DEPLOY_FRONTS; deploy.fronts; default: as many as the capacity needs at two open files a session).",
        ),
    ] = None,
    front_nofile: Annotated[
        int | None,
        typer.Option(
            "--front-nofile",
            min=1026,
            help="Open files one front may hold (env OPENENV_DEPLOY_FRONT_NOFILE; deploy.front_nofile; default: this machine's ulimit -Hn).",
        ),
    ] = None,
    apply: Annotated[
        bool,
        typer.Option(
            "--apply",
            help="swarm, slurm: start it, wait until every replica is healthy, print the URL.",
        ),
    ] = False,
    remove: Annotated[
        bool,
        typer.Option("--remove", help="swarm: remove the stack; slurm: cancel --job-id."),
    ] = False,
    stack: Annotated[
        str | None,
        typer.Option("--stack", help="swarm: stack name \\[default: the project name]."),
    ] = None,
    job_id: Annotated[
        str | None, typer.Option("--job-id", help="slurm --remove: the job to cancel.")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", "-f", help="Replace files in --out that were edited.")
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", help="--apply: seconds to wait for healthy replicas.")
    ] = 180.0,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object (url, stack / job_id, files).")
    ] = False,
) -> None:
    """Run the project on several machines behind Envoy: Kubernetes, Docker Swarm, Slurm.

    Writes the files for TARGET into --out (default deploy/TARGET). They come from templates,
    are meant to be committed and edited, and say so at the top; a second run never
    overwrites your edits without [bold]--force[/] ([bold]--apply[/] uses the files as they
    are). Settings: flag, then environment variable, then openenv.yaml ([bold]server:[/] and
    [bold]deploy:[/]), then default.

    [bold]Targets[/], one example each:

      [bold]kubernetes[/]  a Kustomize folder (Deployment, Services, HPA, PDB, Envoy):
      openenv deploy kubernetes --image registry.example.com/my_env:0.1.0 && kubectl apply -k deploy/kubernetes

      [bold]swarm[/]  a stack file; --apply deploys it and waits until healthy, --remove takes it down:
      openenv deploy swarm --replicas 2 --apply --json

      [bold]slurm[/]  a batch script, one server per task, Envoy on the first node; scancel stops it:
      openenv deploy slurm --replicas 8 --apply

      [bold]envoy[/]  Envoy's config alone, for servers you start yourself:
      openenv deploy envoy --backend 10.0.0.5:8000 --backend servers.txt --port 8080
    """
    if remove:
        plan_stack = stack
        if target == "swarm" and stack is None:
            plan_stack = plan_deploy(target, path).stack
        result = remove_deployment(target, stack=plan_stack, job_id=job_id)
        _print(result, as_json)
        return
    plan = plan_deploy(
        target,
        path,
        replicas=replicas,
        image=image,
        out=out,
        front_port=port,
        backends=backend,
        token=token,
        stack=stack,
        balancing=balancing,
        fronts=fronts,
        front_nofile=front_nofile,
    )
    result = run_deploy(plan, apply=apply, force=force, timeout=timeout, progress=_progress)
    _print(result, as_json)


def _progress(line: str) -> None:
    """What a long --apply is doing, on stderr (stdout stays one JSON object with --json)."""
    err_console.print(escape(line), style="dim", highlight=False, soft_wrap=True)


def _print(result: DeployResult, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(asdict(result)))
        return
    if result.removed or (not result.files and (result.stack or result.job_id)):
        console.print(
            f"[green]Removed[/] {escape(', '.join(result.removed) or 'nothing (already gone)')}",
            highlight=False,
        )
        return
    if result.kept_edits:
        state = "kept as edited"
    elif result.changed:
        state = "written"
    else:
        state = "unchanged"
    console.print(
        f"[green]{result.target}[/]: {len(result.files)} files in {escape(result.out)}/ ({state})",
        highlight=False,
    )
    for relative in result.files:
        console.print(f"  {escape(relative)}", style="dim", highlight=False)
    if result.fronts and result.sessions_per_front:
        console.print(
            f"Envoy: {result.fronts} front(s) × {result.sessions_per_front:,} sessions",
            highlight=False,
        )
    if result.url:
        console.print(
            f"\nFront: [bold]{escape(result.url)}[/]  (WebSocket: {escape(result.url.replace('http', 'ws', 1))}/ws)",
            highlight=False,
        )
    if result.stack:
        console.print(
            f"Stop:  openenv deploy swarm --remove --stack {escape(result.stack)}", highlight=False
        )
    if result.job_id:
        console.print(
            f"Job {escape(result.job_id)}; stop: scancel {escape(result.job_id)}", highlight=False
        )

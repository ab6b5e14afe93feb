"""Spaces made by the real `openenv push` code (in-process) on the local test Hub, for the tests
of commands that read or copy them (`openenv fork`, `openenv discover`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from openenv_cli.hub.deploy import PushResult, deploy
from openenv_cli.hub.upload import prepare_push
from openenv_cli.manifest import load_manifest
from openenv_cli.scaffold import render_project, write_project
from tests.support.hub_server import HubHandle

CLI = [sys.executable, "-c", "from openenv_cli.main import main; main()"]


def pushed_space(
    hub: HubHandle,
    work: Path,
    name: str,
    token: str,
    *,
    repo_id: str | None = None,
    version: str = "0.1.0",
    private: bool | None = None,
    variables: dict[str, str] | None = None,
    secrets: dict[str, str] | None = None,
    hardware: str | None = None,
) -> PushResult:
    """`openenv init NAME` with that version in openenv.yaml, deployed as `openenv push` does."""
    project = work / f"{name}-{version}"
    write_project(render_project(name), project)
    manifest_file = project / "openenv.yaml"
    text = manifest_file.read_text()
    manifest_file.write_text(text.replace("version: 0.1.0", f"version: {version}", 1))
    manifest = load_manifest(project)
    plan = prepare_push(
        project,
        work / f"staged-{name}-{version}",
        manifest=manifest,
        repo_id=repo_id,
        variables=variables,
        secrets=secrets,
        private=private,
        hardware=hardware,
    )
    return deploy(plan, token, endpoint=hub.url)


def run_cli(
    hub: HubHandle, work: Path, *args: str, token: str | None, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    """`openenv ARGS` in a subprocess that sees this Hub only (and `token` as HF_TOKEN)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "OPENENV_DEBUG"}
    }
    env.update(hub.client_env(work / "cli_hf_home", token))
    env["COLUMNS"] = "200"
    env.update(extra_env)
    return subprocess.run(
        [*CLI, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )

"""`openenv push` never uploads anything from outside the project, nor a secret file.

The real CLI in a subprocess, the real `huggingface_hub` client, the local Hub-compatible test
server: a project holding links to /proc/self/environ (the CLI's own environment, HF_TOKEN
included) and /etc/passwd, links inside linked folders and chains, and the usual secret files
(each holding a canary), with ignore files that try to re-include them. Nothing of it may reach
the Hub; `--dry-run` names each left-out path with its reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_cli.scaffold import render_project, write_project
from tests.support.hub_server import ALICE_TOKEN, HubHandle, isolated_hub

NAME = "leaky_env"
CANARY = "canary-b41d-never-on-the-hub"
CLI = [sys.executable, "-c", "from openenv_cli.main import main; main()"]
SECRET_FILES = [
    ".env",
    ".env.production",
    ".envrc",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".aws/credentials",
    ".ssh/id_rsa",
    ".hf/token",
    ".docker/config.json",
    ".kube/config",
    "credentials.json",
    "certs/server.pem",
    "certs/server.key",
    "id_rsa",
    "id_ed25519.pub",
    ".bash_history",
    ".zsh_history",
    "sub/.python_history",
]


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubHandle]:
    with isolated_hub(monkeypatch, tmp_path / "hf_home") as handle:
        yield handle


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / NAME
    write_project(render_project(NAME), root)
    for relative in SECRET_FILES:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"TOKEN={CANARY}\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text(f"{CANARY}\n")
    (outside / "passwd_again").symlink_to("/etc/passwd")
    (root / "environ.txt").symlink_to("/proc/self/environ")
    (root / "passwd").symlink_to("/etc/passwd")
    (root / "linked_folder").symlink_to(outside, target_is_directory=True)
    (root / "hop2").symlink_to("/proc/self/environ")
    (root / "hop1").symlink_to("hop2")
    (root / "innocent.txt").symlink_to(".env")
    # Ignore files that try to bring everything back.
    (root / ".gitignore").write_text("!*\n" + "".join(f"!{p}\n" for p in SECRET_FILES))
    (root / ".dockerignore").write_text("!**\n!.env\n!certs/server.pem\n")
    return root


def push(
    hub: HubHandle, tmp_path: Path, project: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"}
    }
    env.update(hub.client_env(tmp_path / "cli_hf_home", ALICE_TOKEN))
    env.update(COLUMNS="250", OPENENV_TEST_CANARY=CANARY)
    return subprocess.run(
        [*CLI, "push", str(project), *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_nothing_from_outside_and_no_secret_reaches_the_hub(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    done = push(hub, tmp_path, project)
    assert done.returncode == 0, done.stdout + done.stderr
    repo = hub.state.repo(f"alice/{NAME}")
    for path in repo.files:
        data = repo.files[path]
        assert CANARY.encode() not in data, path
        assert ALICE_TOKEN.encode() not in data, path  # /proc/self/environ holds HF_TOKEN
        assert b"root:x:0:0" not in data, path  # /etc/passwd
    names = set(repo.files)
    assert not names & {*SECRET_FILES, "environ.txt", "passwd", "hop1", "hop2", "innocent.txt"}
    assert not any(name.startswith(("linked_folder/", ".aws/", ".ssh/", ".hf/")) for name in names)
    assert {"Dockerfile", "README.md", "server/app.py"} <= names
    # Even a normal push says which secrets and links it left out.
    assert "environ.txt" in done.stdout and ".env " in done.stdout


def test_dry_run_names_what_is_left_out_and_why(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    done = push(hub, tmp_path, project, "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert hub.state.requests == []
    lines = {
        line.split()[0]: line
        for line in done.stdout.splitlines()
        if line.startswith("  ") and line.split()
    }
    assert "symbolic link points outside the project (/proc/" in lines["environ.txt"]
    assert "outside the project (/etc/passwd)" in lines["passwd"]
    assert "outside the project" in lines["hop1"]
    assert "link" in lines["linked_folder/"]
    assert "secret: symbolic link to .env" in lines["innocent.txt"]
    for secret in (
        ".env",
        ".netrc",
        ".aws/",
        ".ssh/",
        "certs/server.pem",
        "id_rsa",
        ".bash_history",
    ):
        assert "secret: may hold credentials" in lines[secret], secret
    assert CANARY not in done.stdout and CANARY not in done.stderr


def test_a_secret_named_explicitly_is_uploaded(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    done = push(hub, tmp_path, project, "--include-secret", "certs/server.pem")
    assert done.returncode == 0, done.stdout + done.stderr
    files = hub.state.repo(f"alice/{NAME}").files
    assert "certs/server.pem" in files
    assert not {"certs/server.key", ".env", "environ.txt"} & set(files)

"""A hostile project pushed for real: no secret reaches the Space.

The project is what a cloned repository could hold: every credential file the deny list names
(at the root, deep down, in other cases, as backups), private keys and tokens saved under
innocent names, a hard link, and an ``openenv.yaml`` that asks to ship ``.env``, ``.aws/`` and
``.ssh/`` and to use ``.netrc`` as the Dockerfile. The real CLI pushes it (a subprocess, the real
``huggingface_hub`` client) to the local Hub-compatible test server; the Space's files are then
read back through the Hub's API and searched for every planted value.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import hf_hub_download

from openenv_cli.scaffold import render_project, write_project
from tests.support.hub_server import ALICE_TOKEN, HubHandle, isolated_hub

pytestmark = [pytest.mark.integration, pytest.mark.hub]

NAME = "hostile_env"
REPO = f"alice/{NAME}"
CLI = [sys.executable, "-c", "from openenv_cli.main import main; main()"]
CANARY = "canary-5e0c-must-stay-home"
# Values with the shapes of real credentials, built up so no source file holds one whole.
PRIVATE_KEY = (
    "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0canary\n-----END RSA PRIVATE KEY-----\n"
)
AWS_KEY_ID = "AKIA" + "Z7XQ2LMN5OPR3EGJ"
HF_TOKEN = "hf_" + "ZxCvBnMaSdFgHjKlQwErTyUiOpZxCvBnMa"
GITHUB_TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"

DENIED = [
    ".env",
    ".env~",
    ".ENV",
    ".Env",
    ".netrc",
    ".netrc.bak",
    ".git-credentials.old",
    ".aws/credentials",
    ".ssh/id_ed25519",
    "terraform.tfstate",
    "terraform.tfstate.backup",
    "infra/prod.tfvars",
    ".terraform/terraform.tfstate",
    "kubeconfig",
    "deploy/kubeconfig",
    ".kube/config",
    ".config/gh/hosts.yml",
    ".pgpass",
    ".my.cnf",
    ".vault-token",
    ".s3cfg",
    ".boto",
    ".htpasswd",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings.xml",
    ".yarnrc.yml",
    "keys/deploy.ppk",
    "keys/release.jks",
    "keys/app.keystore",
    "keys/client.p12",
    "keys/client.pfx",
    "service-account-prod.json",
    "secrets.yaml",
    "helm/secrets.yml",
    ".password-store/github.gpg",
    ".ipynb_checkpoints/train-checkpoint.ipynb",
    "nested/deeper/.docker/config.json",
    "nested/.config/gcloud/application_default_credentials.json",
    "nested/.cache/huggingface/token",
]
INNOCENT = {
    "notes.txt": PRIVATE_KEY,
    "server/config.py": f'AWS_ACCESS_KEY_ID = "{AWS_KEY_ID}"\n',
    "server/constants.py": f'HUB = "{HF_TOKEN}"\n',
    "scripts/release.sh": f"#!/bin/sh\nexport GH={GITHUB_TOKEN}\n",
}
VALUES = [CANARY, PRIVATE_KEY.splitlines()[1], AWS_KEY_ID, HF_TOKEN, GITHUB_TOKEN]


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubHandle]:
    with isolated_hub(monkeypatch, tmp_path / "hf_home") as handle:
        yield handle


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / NAME
    write_project(render_project(NAME), root)
    for relative in DENIED:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"password={CANARY}\n")
    for relative, text in INNOCENT.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    outside = tmp_path / "home_netrc"
    outside.write_text(f"machine example.com login me password {CANARY}\n")
    os.link(outside, root / "server" / "defaults.cfg")  # a hard link to a file outside
    (root / ".gitignore").write_text("!*\n" + "".join(f"!{p}\n" for p in [*DENIED, *INNOCENT]))
    return root


def _ask_in_manifest(project: Path, lines: str) -> None:
    manifest = project / "openenv.yaml"
    manifest.write_text(manifest.read_text().replace("build:\n", "build:\n" + lines, 1))


def push(
    hub: HubHandle, tmp_path: Path, project: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"}
    }
    env.update(hub.client_env(tmp_path / "cli_hf_home", ALICE_TOKEN), COLUMNS="250")
    return subprocess.run(
        [*CLI, "push", str(project), *args], env=env, capture_output=True, text=True, timeout=180
    )


def _space_files(hub: HubHandle, tmp_path: Path) -> dict[str, bytes]:
    """Every file of the Space, read back through the Hub's API with the real client."""
    api = hub.api()
    files = {}
    for name in api.list_repo_files(REPO, repo_type="space"):
        local = hf_hub_download(
            REPO,
            name,
            repo_type="space",
            endpoint=hub.url,
            token=ALICE_TOKEN,
            cache_dir=tmp_path / "readback",
        )
        files[name] = Path(local).read_bytes()
    return files


def test_the_manifest_cannot_opt_secrets_in(hub: HubHandle, tmp_path: Path, project: Path) -> None:
    _ask_in_manifest(project, "  include_secret_files: [.env, .aws/, .ssh/]\n")
    done = push(hub, tmp_path, project)
    assert done.returncode != 0
    said = " ".join((done.stdout + done.stderr).split())
    for path in (".env", ".aws", ".ssh"):
        assert f"--include-secret {path}" in said, said
    assert hub.state.calls("POST", "/commit/") == []
    assert CANARY not in done.stdout + done.stderr


def test_the_manifest_cannot_ship_netrc_as_the_dockerfile(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    manifest = project / "openenv.yaml"
    text = manifest.read_text()
    assert "dockerfile: server/Dockerfile" in text
    manifest.write_text(text.replace("dockerfile: server/Dockerfile", "dockerfile: .netrc"))
    done = push(hub, tmp_path, project)
    assert done.returncode != 0
    assert ".netrc" in done.stderr and "secret rule" in " ".join(done.stderr.split())
    assert hub.state.calls("POST", "/commit/") == []


def test_a_secret_named_variable_is_refused(hub: HubHandle, tmp_path: Path, project: Path) -> None:
    done = push(hub, tmp_path, project, "-e", f"HF_TOKEN={HF_TOKEN}")
    assert done.returncode != 0
    said = " ".join(done.stderr.split())
    assert "--secret HF_TOKEN" in said and HF_TOKEN not in done.stdout + done.stderr
    assert hub.state.requests == []


def test_the_hostile_project_pushes_without_a_single_secret(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    done = push(hub, tmp_path, project)
    assert done.returncode == 0, done.stdout + done.stderr
    files = _space_files(hub, tmp_path)
    assert {"Dockerfile", "README.md", "server/app.py"} <= set(files)
    leaked = [
        (name, value) for name, data in files.items() for value in VALUES if value.encode() in data
    ]
    assert leaked == []
    assert not set(files) & {*DENIED, *INNOCENT, "server/defaults.cfg"}
    # The output names what it left out, content findings and the hard link included.
    for name in ("notes.txt", "server/config.py", "server/defaults.cfg", ".env~", "kubeconfig"):
        assert name in done.stdout, name
    assert "Private Key on line 1" in done.stdout and "hard link" in done.stdout


def test_a_typed_include_ships_that_file_and_says_so(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    _ask_in_manifest(project, "  include_secret_files: [notes.txt]\n")
    for args in ((), ("--include-secret", "notes.txt", "--dry-run")):
        done = push(hub, tmp_path, project, *args)
        if not args:
            assert done.returncode != 0 and "--include-secret notes.txt" in done.stderr
    assert done.returncode == 0, done.stderr
    assert "Secrets shipped (1" in done.stdout and "notes.txt" in done.stdout
    done = push(hub, tmp_path, project, "--include-secret", "notes.txt")
    assert done.returncode == 0, done.stderr
    assert "Secrets shipped (1" in done.stdout
    files = _space_files(hub, tmp_path)
    assert "notes.txt" in files
    assert not set(files) & {*DENIED, "server/config.py", "server/defaults.cfg"}

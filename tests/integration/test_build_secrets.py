"""`openenv build` keeps what is outside the project, and secret files, out of the image.

A real build on the local engine of a project holding links to /proc/self/environ and
/etc/passwd, a linked folder, link chains and the usual secret files (each with a canary),
with ignore files that try to re-include them. The generated Dockerfile copies the whole
context into /home/user/app, so the image's copy of that folder is the context: it is read
back from a created (never started) container and searched for every one of them.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from openenv_cli.scaffold import render_project, write_project

NAME = "leaky_build_env"
CANARY = "canary-9c2a-never-in-an-image"
TAG = f"openenv-test/build-secrets:{uuid.uuid4().hex[:10]}"
SECRET_FILES = [
    ".env",
    ".env.local",
    ".envrc",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".aws/credentials",
    ".ssh/id_ed25519",
    ".hf/token",
    ".docker/config.json",
    ".kube/config",
    "credentials.json",
    "tls/cert.pem",
    "tls/cert.key",
    "id_rsa",
    ".bash_history",
    "terraform.tfstate",
    ".ENV",
    ".netrc.bak",
    "deep/.docker/config.json",
    "keys/app.keystore",
    "kubeconfig",
]
# Innocent names, secret content: the content scan must keep them out.
INNOCENT_FILES = {
    "notes.txt": "-----BEGIN " + f"RSA PRIVATE KEY-----\n{CANARY}\n-----END RSA PRIVATE KEY-----\n",
    "server/settings.py": 'KEY = "AKIA' + 'Q7XZ2LMN5OPR3EGJ"  # ' + CANARY + "\n",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    parent = tmp_path_factory.mktemp("leaky")
    root = parent / NAME
    write_project(render_project(NAME), root)
    for relative in SECRET_FILES:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"SECRET={CANARY}\n")
    for relative, text in INNOCENT_FILES.items():
        (root / relative).write_text(text)
    outside = parent / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text(f"{CANARY}\n")
    os.link(outside / "notes.txt", root / "server" / "defaults.cfg")  # a hard link out
    (root / "environ.txt").symlink_to("/proc/self/environ")
    (root / "passwd").symlink_to("/etc/passwd")
    (root / "linked_folder").symlink_to(outside, target_is_directory=True)
    (root / "hop2").symlink_to(outside / "notes.txt")
    (root / "hop1").symlink_to("hop2")
    (root / ".gitignore").write_text("!*\n" + "".join(f"!{p}\n" for p in SECRET_FILES))
    (root / ".dockerignore").write_text("!**\n!.env\n!tls/cert.pem\n")
    return root


def openenv(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k not in {"OPENENV_BASE_IMAGE", "OPENENV_IMAGE_TAG"}
    }
    env.update(COLUMNS="250", OPENENV_TEST_CANARY=CANARY)
    return subprocess.run(
        [sys.executable, "-m", "openenv_cli.main", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def built(
    client: docker.DockerClient,
    base_image: str,
    project: Path,
) -> Iterator[subprocess.CompletedProcess[str]]:
    done = openenv("build", "--base-image", base_image, "-t", TAG, cwd=project)
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        yield done
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound, docker.errors.APIError):
            client.images.remove(TAG, force=True)


def app_folder(client: docker.DockerClient, image: str) -> dict[str, bytes]:
    """Every regular file under /home/user/app in ``image``, by relative path."""
    container = client.containers.create(image, "true")
    try:
        stream, _ = container.get_archive("/home/user/app")
        archive = io.BytesIO(b"".join(stream))
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=archive) as tar:
        for member in tar.getmembers():
            relative = member.name.split("/", 1)[1] if "/" in member.name else ""
            if member.issym() or member.islnk():
                files[relative] = b"<link>"
            elif member.isfile():
                extracted = tar.extractfile(member)
                files[relative] = extracted.read() if extracted else b""
    return files


def test_the_image_holds_nothing_from_outside_and_no_secret(
    client: docker.DockerClient,
    built: subprocess.CompletedProcess[str],
) -> None:
    files = app_folder(client, TAG)
    assert "server/app.py" in files and "server/Dockerfile" in files
    for path, data in files.items():
        assert CANARY.encode() not in data, path
        assert b"root:x:0:0" not in data, path
        assert b"OPENENV_TEST_CANARY" not in data, path
    leaked = {
        "environ.txt",
        "passwd",
        "hop1",
        "hop2",
        "server/defaults.cfg",
        *SECRET_FILES,
        *INNOCENT_FILES,
    } & set(files)
    assert not leaked
    assert not any(
        p.startswith(("linked_folder/", ".aws/", ".ssh/", ".hf/", ".kube/")) for p in files
    )


def test_the_build_says_what_it_left_out(built: subprocess.CompletedProcess[str]) -> None:
    out = built.stdout
    assert "left out of the context" in out
    for name in (
        "environ.txt",
        "passwd",
        "hop1",
        "linked_folder/",
        ".env",
        ".aws/",
        "tls/cert.pem",
        "notes.txt",
        "server/settings.py",
        "server/defaults.cfg",
        ".ENV",
    ):
        assert f"    {name}  " in out, name
    assert "Private Key on line 1" in out and "AWS Access Key" in out and "hard link" in out
    assert CANARY not in out


def test_dry_run_lists_the_context_and_builds_nothing(project: Path) -> None:
    done = openenv("build", "--dry-run", "--include-secret", "tls/cert.pem", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Dry run" in done.stdout and "  tls/cert.pem\n" in done.stdout
    assert "  .env  " not in done.stdout.split("Context")[1]
    assert "secret: may hold credentials" in done.stdout and "outside the project" in done.stdout
    shipped = done.stdout.split("Secrets shipped (1")[1].split("left out")[0]
    assert "tls/cert.pem" in shipped


def test_the_manifest_alone_cannot_put_a_secret_in_the_context(
    project: Path, tmp_path: Path
) -> None:
    copy = tmp_path / NAME
    shutil.copytree(project, copy, symlinks=True)
    manifest = copy / "openenv.yaml"
    manifest.write_text(
        manifest.read_text().replace("build:\n", "build:\n  include_secret_files: [.env]\n", 1)
    )
    done = openenv("build", "--dry-run", cwd=copy)
    assert done.returncode != 0 and "--include-secret .env" in done.stderr
    done = openenv("build", "--dry-run", "--include-secret", ".env", cwd=copy)
    assert done.returncode == 0, done.stderr
    assert "  .env\n" in done.stdout.split("Context")[1]
    assert "Secrets shipped (1" in done.stdout
    manifest.write_text(
        manifest.read_text().replace("dockerfile: server/Dockerfile", "dockerfile: .netrc")
    )
    done = openenv("build", "--dry-run", "--include-secret", ".env", cwd=copy)
    assert done.returncode != 0 and ".netrc" in done.stderr and "secret rule" in done.stderr

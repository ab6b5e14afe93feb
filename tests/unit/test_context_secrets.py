"""Nothing outside the project, and no secret, reaches a build context or an upload.

The selection (``openenv_cli.image.selection``), the reads (``safe_files``) and staging
(``context``) together: links out of the project (directly, in linked folders, in chains, or
swapped in between listing and reading) and files on the secret deny list are left out and
reported, whatever the project's ignore files say; only an explicit include ships a secret.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.hub.upload import prepare_push
from openenv_cli.image import context as context_module
from openenv_cli.image.context import stage_context
from openenv_cli.image.safe_files import OutsideProjectError, copy_inside, open_inside
from openenv_cli.image.selection import Selection, select_files
from openenv_cli.manifest import load_manifest
from openenv_cli.scaffold import render_project, write_project

CANARY = "canary-7f3e1d-do-not-ship"

SECRETS = [
    ".env",
    ".env.local",
    "prod.env",
    ".envrc",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".aws/credentials",
    ".aws/config",
    ".ssh/id_rsa",
    ".ssh/known_hosts",
    ".hf/token",
    ".huggingface/token",
    ".cache/huggingface/token",
    ".docker/config.json",
    ".kube/config",
    ".gnupg/private.key",
    "credentials.json",
    "server.pem",
    "tls/server.key",
    "keys/id_rsa",
    "keys/id_rsa.pub",
    "id_ed25519",
    "deep/er/id_ed25519.pub",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    "sub/.psql_history",
]


def _write(root: Path, relative: str, text: str = CANARY) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    _write(root, "app.py", "print('hi')")
    return root


def _by_path(selection: Selection) -> dict[str, str]:
    return {item.path: f"{item.kind}: {item.reason}" for item in selection.left_out}


# -- symbolic links ---------------------------------------------------------------------------


def test_links_out_of_the_project_are_left_out_with_the_reason(
    project: Path, tmp_path: Path
) -> None:
    outside = _write(tmp_path / "outside", "secret.txt")
    (project / "environ.txt").symlink_to("/proc/self/environ")
    (project / "passwd").symlink_to("/etc/passwd")
    (project / "relative_escape.txt").symlink_to(os.path.relpath(outside, project))
    (project / "home_dir").symlink_to(outside.parent, target_is_directory=True)
    selection = select_files(project)
    assert selection.paths == ["app.py"]
    reasons = _by_path(selection)
    assert "outside the project" in reasons["environ.txt"] and "/proc/" in reasons["environ.txt"]
    assert "outside the project (/etc/passwd)" in reasons["passwd"]
    assert "outside the project" in reasons["relative_escape.txt"]
    assert reasons["home_dir/"].startswith("link: ")


def test_links_inside_linked_folders_and_chains(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    _write(outside, "inner.txt")
    (outside / "to_passwd").symlink_to("/etc/passwd")
    (project / "linked").symlink_to(outside, target_is_directory=True)
    # A chain that starts inside and ends outside, and one that stays inside.
    (project / "hop2").symlink_to("/etc/passwd")
    (project / "hop1").symlink_to("hop2")
    _write(project, "data/real.txt", "real data")
    (project / "data/alias2.txt").symlink_to("real.txt")
    (project / "alias1.txt").symlink_to("data/alias2.txt")
    (project / "loop_a").symlink_to("loop_b")
    (project / "loop_b").symlink_to("loop_a")
    (project / "dangling").symlink_to(tmp_path / "nothing")
    (project / "inner_folder_link").symlink_to("data", target_is_directory=True)
    selection = select_files(project)
    files = {f.path: f.source for f in selection.files}
    assert files == {
        "app.py": "app.py",
        "data/real.txt": "data/real.txt",
        "data/alias2.txt": "data/real.txt",
        "alias1.txt": "data/real.txt",
    }
    reasons = _by_path(selection)
    assert "linked/" in reasons and not any(
        p.startswith("linked/") and p != "linked/" for p in reasons
    )
    assert "outside the project (/etc/passwd)" in reasons["hop1"]
    assert "points nowhere" in reasons["loop_a"] and "points nowhere" in reasons["dangling"]
    assert "links to folders are not followed" in reasons["inner_folder_link/"]


def test_a_link_inside_the_project_to_a_secret_is_a_secret(project: Path) -> None:
    _write(project, ".env")
    (project / "settings.txt").symlink_to(".env")
    selection = select_files(project)
    assert selection.paths == ["app.py"]
    assert _by_path(selection)["settings.txt"].startswith("secret: symbolic link to .env")


def test_fifos_are_left_out_without_being_opened(project: Path) -> None:
    os.mkfifo(project / "pipe")
    selection = select_files(project)
    assert selection.paths == ["app.py"]
    assert _by_path(selection)["pipe"] == "not a file: not a regular file"
    with pytest.raises(OutsideProjectError):
        open_inside(project.resolve(), "pipe")  # would block forever if it were opened for reading


def test_reads_refuse_links_anywhere_in_the_path(project: Path, tmp_path: Path) -> None:
    root = project.resolve()
    outside = tmp_path / "outside"
    _write(outside, "app.py")
    (project / "environ").symlink_to("/proc/self/environ")
    (project / "sub").symlink_to(outside, target_is_directory=True)
    for relative in ("environ", "sub/app.py", "../outside/app.py", "/etc/passwd"):
        with pytest.raises(OutsideProjectError):
            copy_inside(root, relative, tmp_path, "copy")
    assert not (tmp_path / "copy").exists()


def test_a_file_swapped_for_a_link_after_listing_is_not_read(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(project, "notes.txt", "harmless")
    _write(project, "sub/data.txt", "harmless")
    outside = tmp_path / "outside"
    _write(outside, "data.txt")
    real = select_files

    def list_then_swap(*args: object, **kwargs: object) -> Selection:
        selection = real(*args, **kwargs)  # type: ignore[arg-type]
        (project / "notes.txt").unlink()
        (project / "notes.txt").symlink_to("/proc/self/environ")
        (project / "sub/data.txt").unlink()
        (project / "sub").rmdir()
        (project / "sub").symlink_to(outside, target_is_directory=True)
        return selection

    monkeypatch.setattr(context_module, "select_files", list_then_swap)
    _write(project, "server/Dockerfile", "FROM python:3.11-slim")
    staged = stage_context(project, tmp_path / "ctx")
    assert "notes.txt" not in staged.files and "sub/data.txt" not in staged.files
    reasons = {i.path: i.reason for i in staged.left_out}
    assert reasons["notes.txt"].startswith("changed while being read")
    assert reasons["sub/data.txt"].startswith("changed while being read")
    for path in staged.root.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes()
            assert b"PATH=" not in path.read_bytes()


def test_a_dockerfile_linked_out_of_the_project_is_refused(project: Path, tmp_path: Path) -> None:
    _write(tmp_path / "elsewhere", "Dockerfile", "FROM python:3.11-slim")
    (project / "server").mkdir()
    (project / "server/Dockerfile").symlink_to(tmp_path / "elsewhere/Dockerfile")
    with pytest.raises(OpenEnvError, match="outside the project"):
        stage_context(project, tmp_path / "ctx")


# -- the secret deny list ---------------------------------------------------------------------


def test_secret_files_are_left_out(project: Path) -> None:
    for relative in SECRETS:
        _write(project, relative)
    selection = select_files(project)
    assert selection.paths == ["app.py"]
    reasons = _by_path(selection)
    for relative in SECRETS:
        shown = next((p for p in reasons if relative == p or relative.startswith(p)), None)
        assert shown is not None, relative
        assert reasons[shown].startswith("secret: may hold credentials (matches ")


def test_ignore_files_cannot_bring_secrets_back(project: Path) -> None:
    for relative in SECRETS:
        _write(project, relative)
    (project / ".gitignore").write_text("".join(f"!{p}\n" for p in SECRETS) + "!*\n!.aws/\n")
    (project / ".dockerignore").write_text("".join(f"!{p}\n" for p in SECRETS) + "!**\n")
    (project / "sub/.gitignore").write_text("!.psql_history\n")
    assert select_files(project).paths == [
        ".dockerignore",
        ".gitignore",
        "app.py",
        "sub/.gitignore",
    ]


def test_environments_are_left_out(project: Path) -> None:
    _write(project, "venv_custom/pyvenv.cfg", "home = /usr")
    _write(project, "venv_custom/lib/site.py")
    _write(project, "condaenv/conda-meta/history")
    _write(project, "condaenv/bin/python")
    selection = select_files(project)
    assert selection.paths == ["app.py"]
    assert {i.path: i.kind for i in selection.left_out} == {
        "condaenv/": "environment",
        "venv_custom/": "environment",
    }


def test_an_explicit_include_ships_that_secret_only(project: Path) -> None:
    _write(project, "certs/ca.pem")
    _write(project, "certs/server.pem")
    _write(project, ".aws/config")
    _write(project, ".aws/credentials")
    _write(project, ".env")
    (project / "ca_link.pem").symlink_to("certs/ca.pem")
    selection = select_files(project, include_secrets=["certs/ca.pem", "./.aws/config"])
    assert selection.paths == [".aws/config", "app.py", "certs/ca.pem"]
    left = {i.path for i in selection.left_out}
    # The link has a secret's name of its own: it too must be named.
    assert {"certs/server.pem", ".aws/credentials", ".env", "ca_link.pem"} <= left
    named = select_files(project, include_secrets=["ca_link.pem"])
    assert {f.path: f.source for f in named.files}["ca_link.pem"] == "certs/ca.pem"
    # A folder named explicitly ships all of it (ignore files still apply).
    assert ".aws/credentials" in select_files(project, include_secrets=[".aws/"]).paths


@pytest.mark.parametrize("bad", ["../outside.pem", "/etc/ssl/private.key", "a/../../b.key"])
def test_an_include_outside_the_project_is_refused(project: Path, bad: str) -> None:
    with pytest.raises(UsageError, match="not a path inside the project"):
        select_files(project, include_secrets=[bad])


def test_an_include_does_not_lift_the_link_rule(project: Path) -> None:
    (project / "host.pem").symlink_to("/etc/passwd")
    selection = select_files(project, include_secrets=["host.pem"])
    assert selection.paths == ["app.py"]
    assert "outside the project" in _by_path(selection)["host.pem"]


# -- push: the README and the staged Space ----------------------------------------------------


def test_push_never_reads_a_readme_linked_out_of_the_project(tmp_path: Path) -> None:
    root = tmp_path / "my_env"
    write_project(render_project("my_env"), root)
    (root / "README.md").unlink()
    (root / "README.md").symlink_to("/proc/self/environ")
    (root / "environ.txt").symlink_to("/proc/self/environ")
    for relative in SECRETS:
        _write(root, relative)
    os.environ["OPENENV_TEST_CANARY"] = CANARY
    try:
        plan = prepare_push(root, tmp_path / "space", manifest=load_manifest(root))
    finally:
        del os.environ["OPENENV_TEST_CANARY"]
    readme = (plan.staged.root / "README.md").read_text()
    assert readme.startswith("---\n") and "# " in readme
    for path in plan.staged.root.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path
    assert not {"environ.txt", *SECRETS} & set(plan.staged.files)
    kinds = {i.path: i.kind for i in plan.staged.left_out}
    assert kinds["README.md"] == "link" and kinds["environ.txt"] == "link"

"""What is inside a file decides too: keys under innocent names, hard links, and what only a
flag typed at the command (never openenv.yaml) can ship."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from openenv_cli.errors import OpenEnvError
from openenv_cli.hub.upload import prepare_push
from openenv_cli.image.context import stage_context
from openenv_cli.image.plan import plan_build
from openenv_cli.image.secret_scan import CHUNK_BYTES, Finding, scan_file, scan_text
from openenv_cli.image.selection import select_files, typed_includes
from openenv_cli.manifest import load_manifest
from openenv_cli.scaffold import render_project, write_project

# Made-up values with the shapes of real credentials (built up so this file holds none whole).
PRIVATE_KEY = (
    "-----BEGIN "
    + "OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
)
AWS_KEY_ID = "AKIA" + "Q3EGRJ7XK2LMN5OP"
HF_TOKEN = "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNmQwErTyUi"
GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"

PLANTED = {
    "notes.txt": PRIVATE_KEY,
    "server/config.py": f'AWS_ACCESS_KEY_ID = "{AWS_KEY_ID}"\n',
    "server/hub.py": f'TOKEN = "{HF_TOKEN}"\n',
    "scripts/ci.sh": f"export GH={GITHUB_TOKEN}\n",
    "docs/setup.md": "# Setup\n\nClone from https://deploy:s3cr3tpass@git.example.com/env.git\n",
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "my_env"
    write_project(render_project("my_env"), root)
    return root


def _plant(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (PRIVATE_KEY, "Private Key"),
        (f"key = '{AWS_KEY_ID}'", "AWS Access Key"),
        (f"token: {HF_TOKEN}", "Hugging Face Token"),
        (GITHUB_TOKEN, "GitHub Token"),
    ],
)
def test_scan_names_the_kind_and_line(text: str, kind: str) -> None:
    finding = scan_text("first line\n\n" + text)
    assert finding is not None and finding.kind == kind and finding.line == 3
    assert HF_TOKEN not in finding.describe() and AWS_KEY_ID not in finding.describe()


def test_innocently_named_files_holding_keys_are_left_out(project: Path) -> None:
    _plant(project, PLANTED)
    selection = select_files(project)
    assert not set(PLANTED) & set(selection.paths)
    reasons = {item.path: item.reason for item in selection.left_out if item.kind == "secret"}
    assert "Private Key on line 1" in reasons["notes.txt"]
    assert "AWS Access Key" in reasons["server/config.py"]
    assert "Hugging Face Token" in reasons["server/hub.py"]
    assert "GitHub Token" in reasons["scripts/ci.sh"]
    assert "Basic Auth Credentials" in reasons["docs/setup.md"]
    assert all("--include-secret" in reasons[p] for p in PLANTED)
    assert "server/app.py" in selection.paths


def test_the_generated_project_ships_with_no_secret_exclusion(project: Path) -> None:
    selection = select_files(project)
    assert not selection.left_out_of("secret", "link", "not a file")
    assert selection.secrets_shipped == ()
    manifest = load_manifest(project)
    plan = prepare_push(project, project.parent / "staged", manifest=manifest)
    assert not [i for i in plan.staged.left_out if i.kind in {"secret", "link", "not a file"}]


def test_a_false_alarm_ships_when_named_and_is_listed(project: Path) -> None:
    _plant(project, PLANTED)
    selection = select_files(project, include_secrets=["docs/setup.md"])
    assert "docs/setup.md" in selection.paths
    assert [(s.path, "Basic Auth" in s.reason) for s in selection.secrets_shipped] == [
        ("docs/setup.md", True)
    ]


def test_large_and_binary_files_are_scanned_whole(project: Path) -> None:
    root = project.resolve()
    _plant(project, {"data/big.txt": "x " * CHUNK_BYTES + "\n" + PRIVATE_KEY})
    (project / "data" / "blob.bin").write_bytes(b"\0\1\2" * 500_000 + PRIVATE_KEY.encode())
    (project / "data" / "tokens.bin").write_bytes(b"\0" + HF_TOKEN.encode())
    _plant(project, {"data/big_tokens.txt": "x " * CHUNK_BYTES + "\n" + HF_TOKEN})
    for name in ("data/big.txt", "data/blob.bin"):
        finding = scan_file(root, name)
        assert finding is not None and finding.kind == "Private Key", name
    for name in ("data/tokens.bin", "data/big_tokens.txt"):
        finding = scan_file(root, name)
        assert finding is not None and finding.kind == "Hugging Face Token", name
    assert scan_file(root, "data/big_tokens.txt") == Finding("Hugging Face Token", 2)


def test_hard_links_are_left_out_unless_named(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.cfg"
    outside.write_text("machine example.com login me password hunter2\n")
    os.link(outside, project / "innocent.cfg")
    selection = select_files(project)
    assert "innocent.cfg" not in selection.paths
    (left,) = [i for i in selection.left_out if i.path == "innocent.cfg"]
    assert left.kind == "link" and "hard link (2 names" in left.reason
    named = select_files(project, include_secrets=["innocent.cfg"])
    assert "innocent.cfg" in named.paths
    assert "hard link" in named.secrets_shipped[0].reason


def test_the_manifest_only_asks(project: Path) -> None:
    assert typed_includes([], []) == ()
    with pytest.raises(OpenEnvError) as info:
        typed_includes([".env", ".aws/", ".ssh/"], [])
    text = info.value.message + (info.value.hint or "")
    for path in (".env", ".aws", ".ssh"):
        assert path in info.value.message
        assert f"--include-secret {path}" in text
    with pytest.raises(OpenEnvError, match=r"\.ssh"):
        typed_includes([".env", ".ssh/"], [".env"])
    assert typed_includes([".env"], ["./.env", "certs/ca.pem"]) == (".env", "certs/ca.pem")


def _manifest_asks(project: Path, *lines: str) -> None:
    manifest = project / "openenv.yaml"
    text = manifest.read_text()
    assert "build:\n" in text
    manifest.write_text(text.replace("build:\n", "build:\n" + "".join(lines), 1))


def test_push_and_build_refuse_a_manifest_opting_secrets_in(project: Path) -> None:
    _plant(project, {".env": "A=1\n", ".aws/credentials": "x\n"})
    _manifest_asks(project, "  include_secret_files: [.env, .aws/]\n")
    manifest = load_manifest(project)
    with pytest.raises(OpenEnvError, match=r"--include-secret \.aws"):
        prepare_push(project, project.parent / "a", manifest=manifest)
    assert not (project.parent / "a").exists()
    with pytest.raises(OpenEnvError, match=r"--include-secret \.env"):
        plan_build(project)
    typed = prepare_push(
        project, project.parent / "b", manifest=manifest, include_secrets=[".env", ".aws/"]
    )
    assert {".env", ".aws/credentials"} <= set(typed.staged.files)
    assert {s.path for s in typed.staged.secrets_shipped} == {".env", ".aws/credentials"}


@pytest.mark.parametrize("dockerfile", [".netrc", ".env", "server/app.py", "id_rsa.dockerfile"])
def test_a_dockerfile_must_be_a_dockerfile_matching_no_secret_rule(
    project: Path, dockerfile: str
) -> None:
    _plant(project, {dockerfile: "FROM python:3.11-slim\n"})
    with pytest.raises(OpenEnvError, match="Dockerfile"):
        stage_context(project, project.parent / "ctx", dockerfile=dockerfile)


def test_a_dockerfile_holding_a_key_is_refused_unless_named(project: Path) -> None:
    _plant(project, {"server/Dockerfile": f"FROM python:3.11-slim\nENV HF={HF_TOKEN}\n"})
    with pytest.raises(OpenEnvError, match="Hugging Face Token on line 2"):
        stage_context(project, project.parent / "ctx", dockerfile="server/Dockerfile")
    staged = stage_context(
        project,
        project.parent / "ctx2",
        dockerfile="server/Dockerfile",
        include_secrets=["server/Dockerfile"],
    )
    assert "server/Dockerfile" in {s.path for s in staged.secrets_shipped}


def test_a_readme_left_out_as_a_secret_is_not_uploaded_anyway(project: Path) -> None:
    _plant(project, {"README.md": f"# My env\n\nUse token {HF_TOKEN} to try it.\n"})
    plan = prepare_push(project, project.parent / "staged", manifest=load_manifest(project))
    shipped = (plan.staged.root / "README.md").read_text()
    assert HF_TOKEN not in shipped and shipped.startswith("---")
    assert any(i.path == "README.md" and i.kind == "secret" for i in plan.staged.left_out)
    # Left out by an ignore file only, the project's README is still the Space's card.
    _plant(project, {"README.md": "# My env\n\nPlain words.\n", ".dockerignore": "README.md\n"})
    again = prepare_push(project, project.parent / "again", manifest=load_manifest(project))
    assert "Plain words." in (again.staged.root / "README.md").read_text()


def test_a_token_in_a_file_name_is_left_out(project: Path) -> None:
    _plant(project, {f"data/{HF_TOKEN}.txt": "plain\n"})
    selection = select_files(project)
    assert not [p for p in selection.paths if HF_TOKEN in p]
    assert [i.kind for i in selection.left_out if HF_TOKEN in i.path] == ["secret"]

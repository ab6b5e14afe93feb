"""What is inside a file decides too: keys under innocent names, hard links, and what only a
flag typed at the command (never openenv.yaml) can ship."""

from __future__ import annotations

import base64
import bz2
import gzip
import io
import json
import lzma
import os
import tarfile
import zipfile
import zlib
from pathlib import Path

import pytest

from openenv_cli.errors import OpenEnvError
from openenv_cli.hub.upload import prepare_push
from openenv_cli.image import secret_scan
from openenv_cli.image.context import stage_context
from openenv_cli.image.plan import plan_build
from openenv_cli.image.secret_scan import (
    CHUNK_BYTES,
    MAX_EXPANDED_BYTES,
    MAX_NESTING,
    Finding,
    scan_file,
    scan_text,
)
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


# --- inside files: chunks, encodings, archives, notebooks, bounds -------------------------


def _tar(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as archive:  # type: ignore[call-overload]
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _zip(members: dict[str, bytes], encrypted: bool = False) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    data = bytearray(buffer.getvalue())
    if encrypted:  # the "encrypted" flag of the first entry of the central directory
        data[data.index(b"PK\x01\x02") + 8] |= 0x1
    return bytes(data)


def _scan_bytes(tmp_path: Path, name: str, data: bytes) -> Finding | None:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return scan_file(tmp_path.resolve(), name)


def test_a_token_across_a_chunk_boundary_is_found_with_its_line(tmp_path: Path) -> None:
    for shift in range(-40, 41, 8):
        lead = b"a b\n" * ((CHUNK_BYTES + shift) // 4)
        data = lead + b"t " + HF_TOKEN.encode() + b"\n"
        finding = _scan_bytes(tmp_path, "data/split.txt", data)
        assert finding == Finding("Hugging Face Token", lead.count(b"\n") + 1), shift


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-8-sig"])
def test_utf16_and_other_unicode_text_is_decoded(tmp_path: Path, encoding: str) -> None:
    data = f"first line\ntoken = {HF_TOKEN}\n".encode(encoding)
    assert _scan_bytes(tmp_path, "notes.txt", data) == Finding("Hugging Face Token", 2)


def test_base64_runs_are_decoded_wrapped_or_not(tmp_path: Path) -> None:
    wrapped = base64.encodebytes(PRIVATE_KEY.encode()).decode()
    found = scan_text("intro\n" + wrapped)
    assert found == Finding("Private Key (base64-encoded)", 2)
    escaped = json.dumps({"data": wrapped})  # wrapped base64 inside JSON: \n escaped
    assert scan_text(escaped) is not None
    aws = base64.b64encode(f"aws_access_key_id = {AWS_KEY_ID}\n".encode()).decode()
    assert scan_text(f"secret: {aws}") == Finding("AWS Access Key (base64-encoded)", 1)
    twice = base64.b64encode(base64.b64encode(PRIVATE_KEY.encode())).decode()
    assert scan_text(twice) is not None
    packed = base64.b64encode(gzip.compress(f"t={HF_TOKEN}\n".encode())).decode()
    assert scan_text(packed) is not None


def test_base64_that_decodes_to_noise_or_an_image_is_not_a_finding() -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + HF_TOKEN.encode()).decode()
    assert scan_text(f"img = '{png}'") is None
    assert scan_text("name = 'AbstractSingletonProxyFactoryBeanWithLongName'") is None


def test_archives_are_opened_whatever_their_names(tmp_path: Path) -> None:
    aws = f"[default]\naws_access_key_id = {AWS_KEY_ID}\n".encode()
    cases = {
        "a.tar.gz": _tar({"x/creds": aws}),
        "a.tar.bz2": _tar({"x/creds": aws}, "w:bz2"),
        "a.tar.xz": _tar({"x/creds": aws}, "w:xz"),
        "a.tar": _tar({"x/creds": aws}, "w"),
        "a.zip": _zip({"x/creds": aws}),
        "a.gz": gzip.compress(aws),
        "a.bz2": bz2.compress(aws),
        "a.xz": lzma.compress(aws),
        "renamed.txt": _tar({"x/creds": aws}),
    }
    for name, data in cases.items():
        finding = _scan_bytes(tmp_path, name, data)
        assert finding is not None and finding.kind == "AWS Access Key", name
        assert finding.line == 2 and not finding.unscanned, name
    nested = _tar({"in/inner.zip": _zip({"deep/creds": aws})})
    assert _scan_bytes(tmp_path, "nested.tgz", nested) == Finding(
        "AWS Access Key", 2, "in/inner.zip › deep/creds"
    )


def test_a_member_named_as_a_secret_is_a_finding(tmp_path: Path) -> None:
    finding = _scan_bytes(tmp_path, "home.tar.gz", _tar({"./me/.ssh/id_ed25519": b"x"}))
    assert finding is not None and finding.inside == "me/.ssh/id_ed25519"
    assert "secret rule" in finding.kind
    named = _scan_bytes(tmp_path, "t.zip", _zip({f"{HF_TOKEN}.txt": b"plain"}))
    assert named is not None and named.kind == "Hugging Face Token"


def test_harmless_archives_and_notebooks_are_clean(tmp_path: Path) -> None:
    assert _scan_bytes(tmp_path, "ok.tar.gz", _tar({"a.csv": b"x,y\n1,2\n"})) is None
    assert _scan_bytes(tmp_path, "ok.zip", _zip({"a.txt": b"hello\n"})) is None
    notebook = {"cells": [{"cell_type": "code", "source": ["x = 1\n"], "outputs": []}]}
    assert _scan_bytes(tmp_path, "ok.ipynb", json.dumps(notebook).encode()) is None


def test_a_notebooks_cells_and_outputs_are_searched(tmp_path: Path) -> None:
    # \u-escaped in the file, so only the parsed output shows the token.
    escaped = "".join(f"\\u{ord(c):04x}" for c in HF_TOKEN)
    raw = (
        '{"cells": [{"cell_type": "code", "source": ["print(1)"], '
        '"outputs": [{"output_type": "stream", "text": ["t = ' + escaped + '"]}]}]}'
    )
    assert HF_TOKEN not in raw
    finding = _scan_bytes(tmp_path, "nb/explore.ipynb", raw.encode())
    assert finding == Finding("Hugging Face Token", 1, "cell 1's output")


def test_a_zip_bomb_is_refused_from_its_declared_sizes(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open("zeros", "w", force_zip64=True) as member,
    ):
        for _ in range(MAX_EXPANDED_BYTES // (1 << 20) + 1):
            member.write(bytes(1 << 20))
    finding = _scan_bytes(tmp_path, "bomb.zip", buffer.getvalue())
    assert finding is not None and finding.unscanned and "expands past" in finding.kind


def test_a_gzip_bomb_is_refused_by_its_ratio_before_being_expanded(tmp_path: Path) -> None:
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    data = b"".join(squeeze.compress(bytes(1 << 20)) for _ in range(256)) + squeeze.flush()
    finding = _scan_bytes(tmp_path, "bomb.gz", data)
    # Stopped by the ratio, within the first chunks: not after 64 MiB of expansion.
    assert finding is not None and finding.unscanned
    assert finding.kind == "expands more than 100 times (a decompression bomb?)"


def test_a_sparse_tar_member_is_refused(tmp_path: Path) -> None:
    sparse = tmp_path / "holes"
    with sparse.open("wb") as handle:
        handle.truncate(64 << 20)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        info = archive.gettarinfo(str(sparse), "holes")
        info.type = tarfile.GNUTYPE_SPARSE
        info.sparse = [(0, 0)]
        archive.addfile(info)
    finding = _scan_bytes(tmp_path, "holes.tar", buffer.getvalue())
    assert finding is not None and finding.unscanned and "sparse" in finding.kind


def test_deep_nesting_and_many_members_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = b"plain"
    for _ in range(MAX_NESTING + 1):
        data = gzip.compress(data)
    finding = _scan_bytes(tmp_path, "deep.gz", data)
    assert finding is not None and finding.unscanned and "nested" in finding.kind
    shallow = b"plain"
    for _ in range(MAX_NESTING - 1):
        shallow = gzip.compress(shallow)
    assert _scan_bytes(tmp_path, "shallow.gz", shallow) is None
    monkeypatch.setattr(secret_scan, "MAX_MEMBERS", 20)
    many = _tar({f"f{i}.txt": b"x" for i in range(21)})
    finding = _scan_bytes(tmp_path, "many.tgz", many)
    assert finding is not None and finding.unscanned and "more than 20 files" in finding.kind
    finding = _scan_bytes(tmp_path, "many.zip", _zip({f"f{i}.txt": b"x" for i in range(21)}))
    assert finding is not None and finding.unscanned


def test_encrypted_and_broken_archives_cannot_be_scanned(tmp_path: Path) -> None:
    finding = _scan_bytes(tmp_path, "locked.zip", _zip({"a.txt": b"x"}, encrypted=True))
    assert finding is not None and finding.unscanned and "encrypted" in finding.kind
    finding = _scan_bytes(tmp_path, "broken.gz", gzip.compress(os.urandom(5000))[:2000])
    assert finding is not None and finding.unscanned and "cannot be read" in finding.kind


def test_an_archive_that_cannot_be_scanned_is_left_out_unless_named(project: Path) -> None:
    data = b"plain"
    for _ in range(MAX_NESTING + 1):
        data = gzip.compress(data)
    (project / "data").mkdir()
    (project / "data" / "deep.gz").write_bytes(data)
    selection = select_files(project)
    (left,) = [i for i in selection.left_out if i.path == "data/deep.gz"]
    assert left.kind == "secret" and "cannot be scanned for secrets" in left.reason
    assert "--include-secret" in left.reason
    named = select_files(project, include_secrets=["data/deep.gz"])
    assert "data/deep.gz" in named.paths
    assert "cannot be scanned" in named.secrets_shipped[0].reason


def test_stored_members_are_read_not_counted_as_expansion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(secret_scan, "MAX_EXPANDED_BYTES", 1 << 20)
    weights = os.urandom(2 << 20)  # a checkpoint's tensors: stored, as torch.save writes them
    for method, refused in ((zipfile.ZIP_STORED, False), (zipfile.ZIP_DEFLATED, True)):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", method) as archive:
            archive.writestr("model/data/0", weights)
            archive.writestr("model/data.pkl", b"\x80\x02X\x05token" + HF_TOKEN.encode())
        finding = _scan_bytes(tmp_path, "model.pt", buffer.getvalue())
        assert finding is not None and finding.unscanned is refused, method
        if not refused:
            assert (finding.kind, finding.inside) == ("Hugging Face Token", "model/data.pkl")

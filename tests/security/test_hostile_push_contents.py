"""Credentials the content scan must find wherever they hide: new provider formats, archives,
notebooks, encodings and sizes. The real CLI pushes a project holding one of each (under
innocent names) to the local Hub-compatible test server; none may reach the Space, each is named
in the output, and a harmless archive still ships. Archive bombs are refused without being
expanded.

Every value is built up at run time from pieces, so this file holds no string that looks like
a live credential; none is a real key.
"""

from __future__ import annotations

import base64
import bz2
import gzip
import io
import json
import lzma
import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_cli.collect.hub import push_dataset
from openenv_cli.errors import OpenEnvError
from openenv_cli.scaffold import render_project, write_project
from tests.support.hub_server import ALICE_TOKEN, HubHandle, isolated_hub, running_hub

pytestmark = [pytest.mark.integration, pytest.mark.hub]

NAME = "hostile_contents_env"
REPO = f"alice/{NAME}"
CLI = [sys.executable, "-c", "from openenv_cli.main import main; main()"]


def _alnum(n: int, seed: str) -> str:
    """``n`` letters and digits, different for each ``seed`` (never a real key)."""
    pool = "".join(chr(c) for c in (*range(48, 58), *range(65, 91), *range(97, 123)))
    return "".join(pool[(i * 7 + ord(seed[i % len(seed)])) % len(pool)] for i in range(n))


HF = "hf" + "_" + _alnum(34, "hf")
ANTHROPIC = "sk-" + "ant-" + "api03-" + _alnum(93, "ant") + "AA"
GOOGLE = "AI" + "za" + _alnum(35, "google")
GITHUB_PAT = "github" + "_pat_" + _alnum(22, "gh") + "_" + _alnum(59, "pat")
OPENAI_PROJECT = (
    "sk-"
    + "proj-"
    + _alnum(64, "proj")
    + "_"
    + _alnum(9, "p")
    + "T3Blbk"
    + "FJ"
    + "-"
    + _alnum(74, "o")
)
AWS_ID = "AK" + "IA" + _alnum(16, "aws").upper()
PEM = (
    "-----BEGIN "
    + "RSA PRIVATE KEY-----\n"
    + _alnum(64, "pem")
    + "\n-----END RSA PRIVATE KEY-----\n"
)
DOCKER_AUTH = base64.b64encode(("robot:" + _alnum(20, "docker")).encode()).decode()
AWS_FILE = f"[default]\naws_access_key_id = {AWS_ID}\naws_secret_access_key = {_alnum(40, 's')}\n"


def _tar(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as archive:  # type: ignore[call-overload]
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _notebook(outputs: str) -> bytes:
    cell = {
        "cell_type": "code",
        "source": ["import os\n", "print(os.environ)\n"],
        "outputs": [{"output_type": "stream", "name": "stdout", "text": [outputs]}],
    }
    return json.dumps({"cells": [cell], "nbformat": 4, "nbformat_minor": 5}).encode()


def _nested_gzip(levels: int) -> bytes:
    data = b"nothing here\n"
    for _ in range(levels):
        data = gzip.compress(data)
    return data


def _zip_bomb() -> bytes:
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open("zeros.bin", "w", force_zip64=True) as member,
    ):
        for _ in range(200):
            member.write(b"\0" * (1 << 20))
    return buffer.getvalue()


# path -> (bytes, what the output must say about it)
PLANTED: dict[str, tuple[bytes, str]] = {
    "server/llm.py": (f'KEY = "{ANTHROPIC}"\n'.encode(), "Anthropic API Key"),
    "server/maps.py": (f'GOOGLE = "{GOOGLE}"\n'.encode(), "Google API Key"),
    "scripts/ci.sh": (f"export GH={GITHUB_PAT}\n".encode(), "GitHub Token"),
    "server/openai_conf.py": (f'K = "{OPENAI_PROJECT}"\n'.encode(), "OpenAI Token"),
    "registry.json": (
        json.dumps({"auths": {"registry.example.com": {"auth": DOCKER_AUTH}}}, indent=2).encode(),
        "Docker Registry Credentials",
    ),
    "backup/home.tar.gz": (
        _tar({"home/me/.ssh/id_rsa": PEM.encode()}),
        "secret rule",
    ),
    "backup/cloud.tgz": (_tar({"stuff/creds": AWS_FILE.encode()}), "AWS Access Key in stuff/creds"),
    "backup/env.gz": (gzip.compress(f"HF_TOKEN={HF}\n".encode()), "Hugging Face Token"),
    "backup/keys.tar.bz2": (_tar({"k/notes.txt": PEM.encode()}, "w:bz2"), "Private Key"),
    "backup/keys.tar.xz": (_tar({"k/notes.txt": f"t={HF}\n".encode()}, "w:xz"), "Hugging Face"),
    "backup/notes.bz2": (bz2.compress(AWS_FILE.encode()), "AWS Access Key"),
    "backup/notes.xz": (lzma.compress(AWS_FILE.encode()), "AWS Access Key"),
    "backup/bundle.zip": (_zip({"cfg/app.txt": f"key: {GOOGLE}\n".encode()}), "Google API Key"),
    "backup/renamed.dat": (_tar({"x/cred.txt": f"{HF}\n".encode()}), "Hugging Face"),
    "notebooks/explore.ipynb": (
        _notebook(json.dumps({"auths": {"r.example.com": {"auth": DOCKER_AUTH}}})),
        "Docker Registry Credentials",
    ),
    "docs/key.b64": (base64.encodebytes(PEM.encode()), "Private Key (base64-encoded)"),
    "docs/aws.b64": (base64.b64encode(AWS_FILE.encode()), "AWS Access Key (base64-encoded)"),
    "docs/windows.txt": (f"token = {HF}\r\n".encode("utf-16"), "Hugging Face Token"),
    "data/large.txt": (
        b"plain words\n" * 200_000 + f"HF_TOKEN={HF}\n".encode(),
        "Hugging Face Token on line 200001",
    ),
    "data/deep.gz": (_nested_gzip(8), "nested more than"),
    "data/bomb.zip": (_zip_bomb(), "cannot be scanned"),
}
VALUES = [HF, ANTHROPIC, GOOGLE, GITHUB_PAT, OPENAI_PROJECT, AWS_ID, DOCKER_AUTH]
HARMLESS = {
    "data/samples.tar.gz": _tar({"samples/a.csv": b"x,y\n1,2\n"}),
    "data/t.zip": _zip({"a.txt": b"hi\n"}),
}


@pytest.fixture(scope="module")
def pushed(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[subprocess.CompletedProcess[str], dict[str, bytes]]]:
    """One push of the hostile project: the CLI's output and the Space's files."""
    tmp = tmp_path_factory.mktemp("contents")
    root = tmp / NAME
    write_project(render_project(NAME), root)
    for relative, data in [*((p, d) for p, (d, _) in PLANTED.items()), *HARMLESS.items()]:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    with running_hub() as hub:
        done = _push(hub, tmp, root)
        files = dict(hub.state.repo(REPO).files) if done.returncode == 0 else {}
        yield done, files


def _push(hub: HubHandle, tmp: Path, project: Path) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"}
    }
    env.update(hub.client_env(tmp / "cli_hf_home", ALICE_TOKEN), COLUMNS="300")
    return subprocess.run(
        [*CLI, "push", str(project)], env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("relative", sorted(PLANTED))
def test_each_hidden_credential_stays_home(
    pushed: tuple[subprocess.CompletedProcess[str], dict[str, bytes]], relative: str
) -> None:
    done, files = pushed
    assert done.returncode == 0, done.stdout + done.stderr
    assert relative not in files
    lines = [line for line in done.stdout.splitlines() if line.strip().startswith(relative + " ")]
    assert lines, done.stdout
    said = lines[0]
    assert "--include-secret" in said and PLANTED[relative][1] in said, said


def test_no_value_reaches_the_space_and_harmless_archives_ship(
    pushed: tuple[subprocess.CompletedProcess[str], dict[str, bytes]],
) -> None:
    done, files = pushed
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(HARMLESS) <= set(files)
    assert {"Dockerfile", "README.md", "server/app.py"} <= set(files)
    leaked = [(n, v) for n, data in files.items() for v in VALUES if v.encode() in data]
    assert leaked == []
    assert not any(v in done.stdout + done.stderr for v in VALUES)


def _collection(root: Path, rows: list[dict[str, object]], extra: dict[str, bytes]) -> Path:
    (root / "data").mkdir(parents=True)
    (root / "run.json").write_text(json.dumps({"options": {"seed": 1}}))
    (root / "README.md").write_text("# A collection\n")
    lines = "".join(json.dumps(row) + "\n" for row in rows)
    (root / "data" / "shard-00000.jsonl").write_text(lines)
    for relative, data in extra.items():
        (root / relative).write_bytes(data)
    return root


@pytest.mark.parametrize(
    ("rows", "extra"),
    [
        # a shard-named archive the rows never read, holding an AWS key
        ([{"episode_id": "ep-1"}], {"data/shard-00009.tar.gz": _tar({"c": AWS_FILE.encode()})}),
        # an episode that echoes a base64-encoded private key
        ([{"episode_id": "ep-1", "obs": base64.b64encode(PEM.encode()).decode()}], {}),
        # an episode that echoes an Anthropic key
        ([{"episode_id": "ep-1", "obs": f"key={ANTHROPIC}"}], {}),
    ],
    ids=["archive-shard", "base64-row", "anthropic-row"],
)
def test_collect_push_refuses_what_the_push_scan_finds(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    rows: list[dict[str, object]],
    extra: dict[str, bytes],
) -> None:
    out = _collection(tmp_path / "out", rows, extra)
    with isolated_hub(monkeypatch, tmp_path / "hf_home") as hub:
        with pytest.raises(OpenEnvError, match="Not pushed"):
            push_dataset(out, "alice/episodes", private=True, token=ALICE_TOKEN)
        assert hub.state.calls("POST", "/commit/") == []


def test_collect_push_uploads_exactly_what_it_scanned(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = _collection(tmp_path / "out", [{"episode_id": "ep-1", "reward": 1.0}], {})
    (out / "notes.txt").write_text("not part of the dataset\n")
    with isolated_hub(monkeypatch, tmp_path / "hf_home") as hub:
        push_dataset(out, "alice/episodes", private=True, token=ALICE_TOKEN)
        files = set(hub.state.repo("alice/episodes", kind="dataset").files)
    assert files >= {"README.md", "run.json", "data/shard-00000.jsonl"}
    assert "notes.txt" not in files

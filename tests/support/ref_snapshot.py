"""Files of the reference OpenEnv's public repository, copied at test time (never committed).

The compatibility suite runs the reference's own environments and tests on our runtime.
Their source comes from a local git snapshot of the repository (``OPENENV_REF_REPO``, by
default the fetched mirror), read with plain ``git`` and written into a temporary folder;
blobs the snapshot lacks (large media) are skipped.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

DEFAULT_REPO = Path("/work/.mirror/meta-pytorch+OpenEnv/repo")


class SnapshotMissing(RuntimeError):
    """No snapshot of the reference repository is on this machine."""


def repo() -> Path:
    path = Path(os.environ.get("OPENENV_REF_REPO", str(DEFAULT_REPO)))
    if not (path / "HEAD").exists() and not (path / ".git").exists():
        raise SnapshotMissing(
            f"no git snapshot of the reference repository at {path}; set OPENENV_REF_REPO to a clone "
            "of meta-pytorch/OpenEnv"
        )
    return path


def _git(*args: str, input_bytes: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", "--git-dir" if (repo() / "HEAD").exists() else "-C", str(repo()), *args],
        input=input_bytes,
        capture_output=True,
        check=True,
        timeout=120,
    ).stdout


def materialize(prefixes: list[str], dest: Path, rev: str = "HEAD") -> list[str]:
    """Write the files under ``prefixes`` at ``rev`` into ``dest``; returns the paths written."""
    listing = _git("ls-tree", "-r", "-z", rev, "--", *prefixes).split(b"\0")
    entries = []
    for line in listing:
        if not line:
            continue
        meta, path = line.split(b"\t", 1)
        mode, kind, sha = meta.split()
        if kind == b"blob" and mode != b"120000":
            entries.append((sha.decode(), path.decode()))
    batch = _git(
        "cat-file", "--batch", input_bytes="".join(f"{sha}\n" for sha, _ in entries).encode()
    )
    written, offset = [], 0
    for _sha, path in entries:
        header_end = batch.index(b"\n", offset)
        header = batch[offset:header_end].split()
        offset = header_end + 1
        if len(header) < 3 or header[1] == b"missing":
            continue
        size = int(header[2])
        data = batch[offset : offset + size]
        offset += size + 1
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written.append(path)
    return written

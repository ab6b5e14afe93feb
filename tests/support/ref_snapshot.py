"""Files of the reference OpenEnv's public repository, copied at test time (never committed).

The compatibility suite runs the reference's own environments and tests on our runtime, at
one pinned commit of its repository (:data:`PINNED_COMMIT`). The source is taken from, in
order:

1. ``OPENENV_REF_REPO``: a clone of the repository (bare or not) holding that commit;
2. the cache folder ``$OPENENV_TEST_CACHE/openenv-src-<commit>`` (default cache:
   ``~/.cache/openenv-tests``), a bare repository holding just that commit;
3. a shallow fetch of that commit from :data:`REPOSITORY_URL` into the cache folder, when
   the network allows (a short timeout: machines without GitHub give up at once).

When none works, :class:`SnapshotMissing` says, in one line, how to provide it; the tests
skip with that line (also in CI). Files are read with plain ``git`` and written into a
temporary folder; blobs the source lacks (large media of a partial clone) are left out.

    python -m tests.support.ref_snapshot     # resolve (fetching if needed) and print the source
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.reference import cache_dir

# The reference repository and the commit the compatibility suite was written against.
REPOSITORY_URL = "https://github.com/huggingface/OpenEnv"  # formerly meta-pytorch/OpenEnv
PINNED_COMMIT = "685de411e5f77286b0fd94798d42c4467cf8a1bc"

# Seconds: a probe of the remote (fails fast without a network), then the fetch itself.
PROBE_TIMEOUT_S = 10.0
FETCH_TIMEOUT_S = float(os.environ.get("OPENENV_REF_FETCH_TIMEOUT", "600"))
_GIT_ENV = dict(os.environ, GIT_TERMINAL_PROMPT="0")  # never wait for credentials

HOW = (
    f"set OPENENV_REF_REPO to a clone of {REPOSITORY_URL} (with commit {PINNED_COMMIT[:12]}), "
    "or run `python -m tests.support.ref_snapshot` where github.com is reachable "
    "(docs/reference-compat.md)"
)


class SnapshotMissing(RuntimeError):
    """The reference repository's source at the pinned commit is not available here."""


def cached_source() -> Path:
    """Where a fetched copy of the pinned commit lives (a bare repository)."""
    return cache_dir() / f"openenv-src-{PINNED_COMMIT}"


def _git_args(path: Path) -> list[str]:
    return (
        ["git", "--git-dir", str(path)] if (path / "HEAD").is_file() else ["git", "-C", str(path)]
    )


def _has_commit(path: Path) -> bool:
    if not (path / "HEAD").is_file() and not (path / ".git").exists():
        return False
    probe = subprocess.run(
        [*_git_args(path), "cat-file", "-e", f"{PINNED_COMMIT}^{{commit}}"],
        capture_output=True,
        timeout=60,
    )
    return probe.returncode == 0


@functools.cache
def _unreachable() -> str | None:
    """Why :data:`REPOSITORY_URL` cannot be reached (None when it can); asked once per process."""
    try:
        probe = subprocess.run(
            ["git", "ls-remote", REPOSITORY_URL, "HEAD"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            env=_GIT_ENV,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{REPOSITORY_URL} is unreachable: {type(exc).__name__}"
    if probe.returncode == 0:
        return None
    last = (probe.stderr.strip().splitlines() or ["no answer"])[-1]
    return (
        f"{REPOSITORY_URL} is unreachable: {re.sub(r'^fatal: (unable to access .*?: )?', '', last)}"
    )


def _fetch(target: Path) -> str | None:
    """Fetch the pinned commit into ``target`` (a bare repository); None on success, else why not."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
    fetch = ["fetch", "--quiet", "--depth=1", REPOSITORY_URL, PINNED_COMMIT]
    try:
        for command in (
            ["git", "init", "--quiet", "--bare", str(partial)],
            ["git", "--git-dir", str(partial), *fetch],
        ):
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S, env=_GIT_ENV
            )
            if done.returncode != 0:
                return f"`git {' '.join(fetch)}` failed: {done.stderr.strip()[-300:]}"
        with contextlib.suppress(OSError):  # another process may have finished first
            partial.rename(target)
        return None
    except subprocess.TimeoutExpired:
        return f"fetching {PINNED_COMMIT[:12]} took over {FETCH_TIMEOUT_S:.0f}s"
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def missing_reason() -> str | None:
    """None when the source is here or can be fetched, else one line saying how to provide it.

    Cheap (no fetch): a configured clone, the cache, else a probe of the remote.
    """
    configured = os.environ.get("OPENENV_REF_REPO")
    if configured:
        path = Path(configured).expanduser()
        if _has_commit(path):
            return None
        return (
            f"OPENENV_REF_REPO={path} is not a git clone holding commit {PINNED_COMMIT[:12]} "
            f"(git -C {path} fetch origin {PINNED_COMMIT}); {HOW}"
        )
    if _has_commit(cached_source()):
        return None
    why = _unreachable()
    return None if why is None else f"the reference OpenEnv's source is not here ({why}); {HOW}"


def source() -> Path:
    """A git repository holding :data:`PINNED_COMMIT` (the order: see the module's docstring).

    Fetches it into the cache when only the network has it. Raises :class:`SnapshotMissing`
    with the one line of :func:`missing_reason` when it cannot be had.
    """
    why = missing_reason()
    if why is not None:
        raise SnapshotMissing(why)
    configured = os.environ.get("OPENENV_REF_REPO")
    if configured:
        return Path(configured).expanduser()
    cached = cached_source()
    if not _has_commit(cached):
        failed = _fetch(cached)
        if failed is not None or not _has_commit(cached):
            raise SnapshotMissing(f"the reference OpenEnv's source is not here ({failed}); {HOW}")
    return cached


def _git(*args: str, input_bytes: bytes | None = None) -> bytes:
    return subprocess.run(
        [*_git_args(source()), *args],
        input=input_bytes,
        capture_output=True,
        check=True,
        timeout=120,
    ).stdout


def materialize(prefixes: list[str], dest: Path, rev: str = PINNED_COMMIT) -> list[str]:
    """Write the files under ``prefixes`` at ``rev`` into ``dest``; returns the paths written.

    Raises :class:`SnapshotMissing` when the reference's source is not available.
    """
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


if __name__ == "__main__":
    try:
        print(source())
    except SnapshotMissing as exc:
        raise SystemExit(str(exc)) from None

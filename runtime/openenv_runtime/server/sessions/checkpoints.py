"""Checkpoints of a session's environment state: taken, kept, verified and restored.

An environment opts in with ``SUPPORTS_CHECKPOINT = True`` and ``export_state()`` /
``import_state(state)``. The server stores what ``export_state`` returns (JSON data, encoded
here, or ``bytes`` kept as they are; nothing is pickled) as one blob::

    <HMAC-SHA256 of the rest, hex>\n
    {"format": 2, "id": ..., "env": ..., "kind": "json"|"bytes", "step": n,
     "episode_open": true, "digest": "sha256:<hex>", "size": n, "created": unix}\n<payload>

in memory (the default) or as ``<id>.ckpt`` files (0600, in a 0700 folder) in
``CHECKPOINT_DIR``, which several servers of the same environment may share. The blob is
signed with the server's key (``CHECKPOINT_KEY``, else one generated on first use and kept
in the folder as ``.checkpoint-key``, 0600, so every worker and replica sharing the folder
uses the same one); a blob that someone else planted in the folder is refused. A blob is
checked before anything uses it: its size against ``MAX_CHECKPOINT_BYTES``, its signature,
its header, the environment it came from, and the SHA-256 of its payload (in memory once,
when it is put; from the folder on every read, but for the file checked last while it is
unchanged); a blob that fails is refused before a session is started or an instance touched.

What is kept is bounded (:class:`CheckpointBounds`): checkpoints expire ``CHECKPOINT_TTL``
seconds after they were taken; past ``MAX_CHECKPOINTS`` or ``MAX_CHECKPOINT_TOTAL_BYTES`` in
all the oldest are removed first; a client (its token, else its address) that keeps
``MAX_CHECKPOINTS_PER_CLIENT`` or ``MAX_CHECKPOINT_BYTES_PER_CLIENT`` is refused another
(``CHECKPOINT_QUOTA``). A checkpoint's id starts with a tag of the client that took it
(a keyed hash, not the client itself), so the folder can be counted per client from its
file names alone.

The protocol (message types ``checkpoint`` and ``restore``, the ``X-OpenEnv-Restore``
handshake header and the HTTP routes) is in docs/protocol.md (checkpoint, restore and fork).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
import os
import re
import secrets
import stat
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_core import PydanticSerializationError, from_json, to_json

from openenv_runtime.server.config.fields import CHECKPOINT_BUDGET_FACTOR, ServerSettings

logger = logging.getLogger("openenv_runtime.server")

FORMAT = 2
SUFFIX = ".ckpt"
KEY_FILE = ".checkpoint-key"
KEY_BYTES = 32
MAC_LINE = 2 * hashlib.sha256().digest_size + 1  # the hex HMAC and its newline
HEADER_LIMIT = 4096  # bytes a blob's header line may take
TAG_CHARS = 8  # the client tag an id starts with
RELIST_S = 1.0  # seconds between listings of the folder (other writers' files show then)
_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)


class CheckpointError(Exception):
    """A checkpoint request that cannot be served; ``code`` goes on the wire."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status

    def frame(self) -> str:
        return to_json(
            {"type": "error", "data": {"code": self.code, "message": self.message}}
        ).decode()


@dataclass(frozen=True, slots=True)
class CheckpointBounds:
    """How many checkpoints, and how many bytes of them, are kept: in all (the oldest are
    removed past these) and per client (another is refused past these; None: no cap)."""

    total_count: int
    total_bytes: int
    client_count: int | None = None
    client_bytes: int | None = None

    @classmethod
    def from_settings(cls, settings: ServerSettings) -> CheckpointBounds:
        client_count, client_bytes = settings.checkpoint_client_bounds()
        return cls(
            settings.max_checkpoints, settings.checkpoint_total_bytes, client_count, client_bytes
        )


@dataclass(frozen=True, slots=True)
class Blob:
    """A verified checkpoint: its header and the exported state."""

    header: dict[str, Any]
    payload: bytes

    @property
    def info(self) -> dict[str, Any]:
        """What clients get back: ``id``, ``step``, ``digest``, ``size``."""
        h = self.header
        return {"id": h["id"], "step": h["step"], "digest": h["digest"], "size": h["size"]}

    def state(self) -> Any:
        """The value to pass to ``import_state``."""
        return self.payload if self.header["kind"] == "bytes" else from_json(self.payload)


def digest_of(payload: bytes) -> str:
    return "sha256:" + hashlib.sha256(payload).hexdigest()


class CheckpointStore:
    """Where one server keeps checkpoints: memory, or a directory shared by its replicas."""

    def __init__(
        self,
        identity: str,
        directory: str | Path | None,
        max_bytes: int,
        ttl: float | None,
        *,
        bounds: CheckpointBounds | None = None,
        key: str | None = None,
    ) -> None:
        self.identity = identity
        self.directory = Path(directory) if directory else None
        self.max_bytes = max_bytes
        self.ttl = ttl
        self.bounds = bounds or CheckpointBounds(
            ServerSettings().max_checkpoints, CHECKPOINT_BUDGET_FACTOR * max_bytes
        )
        # id -> (created, the blob's size in bytes, the blob verified and parsed), oldest
        # first: put() verified it, so a read (n of them for a fork of n) is not checked again
        self.memory: OrderedDict[str, tuple[float, int, Blob]] = OrderedDict()
        self.memory_bytes = 0
        self._lock = threading.Lock()  # one writer at a time counts and makes room
        self._listing: dict[str, tuple[float, int]] = {}  # the folder: id -> (modified, bytes)
        self._listed_at = -RELIST_S
        # the folder's blob verified last: (id, the file's identity and times, the blob)
        self._last_read: tuple[str, tuple[int, ...], Blob] | None = None
        if self.directory is not None:
            _private_folder(self.directory)
        if key:
            self._key = key.encode()
        elif self.directory is not None:
            self._key = _folder_key(self.directory)
        else:
            self._key = secrets.token_bytes(KEY_BYTES)

    # -- writing -----------------------------------------------------------------------------
    def tag(self, client: str | None) -> str:
        """The first characters of the ids of ``client``'s checkpoints (a keyed hash of it)."""
        mac = hmac.new(self._key, b"client\0" + (client or "").encode(), hashlib.sha256)
        return base64.urlsafe_b64encode(mac.digest()[:6]).decode()

    def encode(
        self, state: Any, step: int, episode_open: bool | None, client: str | None = None
    ) -> bytes:
        """The signed blob of ``state`` (what ``export_state`` returned), taken by ``client``;
        raises CheckpointError."""
        if isinstance(state, (bytes, bytearray, memoryview)):
            kind, payload = "bytes", bytes(state)
        else:
            kind = "json"
            try:
                payload = to_json(state)
            except PydanticSerializationError as exc:
                raise CheckpointError(
                    "EXECUTION_ERROR",
                    f"export_state() returned data that is not JSON-serialisable ({exc}); return "
                    "plain JSON data (dicts, lists, numbers, strings) or bytes.",
                    500,
                ) from None
        if len(payload) > self.max_bytes:
            raise CheckpointError(
                "CHECKPOINT_TOO_LARGE",
                f"The exported state is {len(payload)} bytes, over this server's limit of "
                f"{self.max_bytes} (MAX_CHECKPOINT_BYTES / --max-checkpoint-bytes).",
                413,
            )
        header = {
            "format": FORMAT,
            "id": self.tag(client) + secrets.token_urlsafe(18),
            "env": self.identity,
            "kind": kind,
            "step": step,
            "episode_open": episode_open,
            "digest": digest_of(payload),
            "size": len(payload),
            "created": time.time(),
        }
        signed = to_json(header) + b"\n" + payload
        return self._mac(signed).encode() + b"\n" + signed

    def _mac(self, signed: bytes | memoryview) -> str:
        return hmac.new(self._key, signed, hashlib.sha256).hexdigest()

    async def put(self, blob: bytes) -> Blob:
        """Keep ``blob`` (made by :meth:`encode`) within the bounds; returns it parsed.

        Raises CheckpointError ``CHECKPOINT_QUOTA`` when its client keeps its most already.
        """
        parsed = self.parse(blob, None)
        ident = parsed.header["id"]
        if self.directory is None:
            with self._lock:
                self._make_room(ident, len(blob), self._memory_entries())
                self.memory[ident] = (float(parsed.header["created"]), len(blob), parsed)
                self.memory_bytes += len(blob)
        else:
            await asyncio.to_thread(self._write, ident, blob)
        return parsed

    def _write(self, ident: str, blob: bytes) -> None:
        assert self.directory is not None
        with self._lock:
            self._make_room(ident, len(blob), self._folder_entries())
            final = self.directory / (ident + SUFFIX)
            partial = self.directory / f".{ident}.{os.getpid()}.tmp"
            # a new file only (never through a planted link), readable by this user alone
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW, 0o600)
            with open(fd, "wb") as f:
                f.write(blob)
                f.flush()
                os.fsync(f.fileno())
            os.replace(partial, final)  # readers on other servers never see half a blob
            self._listing[ident] = (time.time(), len(blob))

    def _memory_entries(self) -> list[tuple[float, int, str]]:
        """``(created, bytes, id)`` of what memory keeps, oldest first; expired ones dropped."""
        self._expire_memory()
        return [(created, size, ident) for ident, (created, size, _) in self.memory.items()]

    def _expire_memory(self) -> None:
        """Drop expired checkpoints from memory (the oldest come first)."""
        if self.ttl is None:
            return
        deadline = time.time() - self.ttl
        while self.memory:
            ident, (created, _, _) = next(iter(self.memory.items()))
            if created >= deadline:
                break
            self._remove(ident)

    def _folder_entries(self) -> list[tuple[float, int, str]]:
        """``(modified, bytes, id)`` of the folder's checkpoints, oldest first; expired ones
        removed. The folder is listed again at most every ``RELIST_S`` (listing a thousand
        files costs ten times a write); this process's own writes count at once."""
        assert self.directory is not None
        if time.monotonic() - self._listed_at >= RELIST_S:
            listing = {}
            with os.scandir(self.directory) as found:
                for entry in found:
                    if entry.name.endswith(SUFFIX):
                        try:
                            info = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue  # another replica removed it first
                        listing[entry.name[: -len(SUFFIX)]] = (info.st_mtime, info.st_size)
            self._listing, self._listed_at = listing, time.monotonic()
        deadline = None if self.ttl is None else time.time() - self.ttl
        for ident, (modified, _) in list(self._listing.items()):
            if deadline is not None and modified < deadline:
                self._remove(ident)
        return sorted((m, size, ident) for ident, (m, size) in self._listing.items())

    def _remove(self, ident: str) -> None:
        if self.directory is None:
            _, size, _ = self.memory.pop(ident)
            self.memory_bytes -= size
            return
        self._listing.pop(ident, None)
        try:
            (self.directory / (ident + SUFFIX)).unlink()
        except OSError:
            pass  # another replica removed it first

    def _make_room(self, ident: str, size: int, entries: list[tuple[float, int, str]]) -> None:
        """Refuse a client past its own bounds, then remove the oldest past the totals."""
        bounds = self.bounds
        tag = ident[:TAG_CHARS]
        mine = [e for e in entries if e[2].startswith(tag)]
        mine_bytes = sum(e[1] for e in mine)
        over_count = bounds.client_count is not None and len(mine) + 1 > bounds.client_count
        over_bytes = bounds.client_bytes is not None and mine_bytes + size > bounds.client_bytes
        if over_count or over_bytes:
            ttl = (
                f"they expire {self.ttl:g} s after they were taken (CHECKPOINT_TTL)"
                if self.ttl is not None
                else "they are kept until the operator removes them (CHECKPOINT_TTL is off)"
            )
            raise CheckpointError(
                "CHECKPOINT_QUOTA",
                f"This client keeps {len(mine)} checkpoints ({mine_bytes} bytes), its most on "
                f"this server (MAX_CHECKPOINTS_PER_CLIENT={bounds.client_count}, "
                f"MAX_CHECKPOINT_BYTES_PER_CLIENT={bounds.client_bytes}): {ttl}. Reuse the "
                "checkpoints you hold, take fewer, or ask the operator to raise the caps.",
                429,
            )
        if size > bounds.total_bytes:
            raise CheckpointError(
                "CHECKPOINT_TOO_LARGE",
                f"This checkpoint is {size} bytes, over the {bounds.total_bytes} this server "
                "keeps in all (MAX_CHECKPOINT_TOTAL_BYTES).",
                413,
            )
        count, total = len(entries), sum(e[1] for e in entries)
        for _, taken, old in entries:  # oldest first
            if count + 1 <= bounds.total_count and total + size <= bounds.total_bytes:
                break
            self._remove(old)
            count, total = count - 1, total - taken

    # -- reading -----------------------------------------------------------------------------
    async def get(self, ident: Any, digest: Any = None) -> Blob:
        """The verified checkpoint ``ident`` (whose digest must be ``digest`` when given)."""
        if not isinstance(ident, str) or not _ID.fullmatch(ident):
            raise CheckpointError(
                "CHECKPOINT_INVALID",
                "A checkpoint id is 16-64 characters of A-Z, a-z, 0-9, '_' and '-', as "
                "`checkpoint` returned it.",
            )
        if digest is not None and not isinstance(digest, str):
            raise CheckpointError(
                "CHECKPOINT_INVALID", "digest must be a string such as 'sha256:…'."
            )
        if self.directory is None:
            with self._lock:
                self._expire_memory()
                kept = self.memory.get(ident)
            found = kept[2] if kept is not None else None
        else:
            found = await asyncio.to_thread(self._read, ident)
        if found is None:
            where = f"in {self.directory}" if self.directory else "in this server's memory"
            raise CheckpointError(
                "CHECKPOINT_NOT_FOUND",
                f"No checkpoint {ident} {where}: it expired (CHECKPOINT_TTL) or made room for "
                "newer ones (MAX_CHECKPOINTS), or was taken on another server without a shared "
                "CHECKPOINT_DIR.",
                404,
            )
        if digest is not None and digest != found.header["digest"]:
            raise CheckpointError(
                "CHECKPOINT_MISMATCH",
                f"Checkpoint {ident} has digest {found.header['digest']}, not the {digest} "
                "the client expected; it was replaced since it was taken.",
                409,
            )
        return found

    def _read(self, ident: str) -> Blob | None:
        """The verified checkpoint in the file ``ident`` (None: there is none). The file read
        and verified last is kept: while it is unchanged (same inode, size, modification and
        change times) it is not read and hashed again, so forking n sessions from one
        checkpoint verifies it once."""
        assert self.directory is not None
        path = self.directory / (ident + SUFFIX)
        try:
            fd = os.open(path, os.O_RDONLY | _NO_FOLLOW)
        except FileNotFoundError:
            return None
        except OSError:  # a link planted in its place (ELOOP), or unreadable
            raise _corrupt(ident, "it is not a file this server wrote") from None
        with open(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise _corrupt(ident, "it is not a file this server wrote")
            if self.ttl is not None and info.st_mtime < time.time() - self.ttl:
                with self._lock:
                    self._remove(ident)
                return None
            if info.st_size > self.max_bytes + HEADER_LIMIT + MAC_LINE:
                raise CheckpointError(
                    "CHECKPOINT_TOO_LARGE",
                    f"Checkpoint {ident} is {info.st_size} bytes, over this server's limit of "
                    f"{self.max_bytes} (MAX_CHECKPOINT_BYTES).",
                    413,
                )
            # ctime cannot be set back by a writer: any change to the file misses this
            seen = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
            last = self._last_read
            if last is not None and last[0] == ident and last[1] == seen:
                return last[2]
            blob = f.read()
        parsed = self.parse(blob, ident)
        self._last_read = (ident, seen, parsed)  # one blob at most: bounded by max_bytes
        return parsed

    def parse(self, blob: bytes, ident: str | None) -> Blob:
        """Check a blob through and through; raises CheckpointError saying what is wrong."""
        if len(blob) < MAC_LINE or blob[MAC_LINE - 1 : MAC_LINE] != b"\n":
            raise _corrupt(
                ident,
                "it carries no signature of this server (someone else wrote it, or an older version)",
            )
        signed = memoryview(blob)[MAC_LINE:]
        if not hmac.compare_digest(blob[: MAC_LINE - 1], self._mac(signed).encode()):
            raise _corrupt(
                ident,
                "its signature is not this server's: it was altered, or written by someone "
                "else (servers that share a CHECKPOINT_DIR share its key; set the same "
                "CHECKPOINT_KEY on servers that do not)",
            )
        end = blob.find(b"\n", MAC_LINE, MAC_LINE + HEADER_LIMIT)
        header: Any = None
        if end > 0:
            try:
                header = from_json(blob[MAC_LINE:end])
            except ValueError:
                header = None
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise _corrupt(ident, "its header is unreadable")
        payload = blob[end + 1 :]
        if header.get("env") != self.identity:
            raise CheckpointError(
                "CHECKPOINT_FOREIGN",
                f"Checkpoint {ident or header.get('id')} belongs to environment "
                f"{header.get('env')!r}, not to this server's {self.identity!r}.",
                422,
            )
        if (
            (ident is not None and header.get("id") != ident)
            or not isinstance(header.get("id"), str)
            or not _ID.fullmatch(header["id"])
            or header.get("kind") not in ("json", "bytes")
            or not isinstance(header.get("step"), int)
            or not isinstance(header.get("created"), (int, float))
            or header.get("size") != len(payload)
        ):
            raise _corrupt(ident, "its header does not match its contents")
        if len(payload) > self.max_bytes:
            raise CheckpointError(
                "CHECKPOINT_TOO_LARGE",
                f"Checkpoint {ident} holds {len(payload)} bytes, over this server's limit of "
                f"{self.max_bytes} (MAX_CHECKPOINT_BYTES).",
                413,
            )
        if header.get("digest") != digest_of(payload):
            raise _corrupt(ident, "its SHA-256 digest does not match its contents")
        return Blob(header, payload)


def _corrupt(ident: str | None, why: str) -> CheckpointError:
    return CheckpointError(
        "CHECKPOINT_CORRUPT", f"Checkpoint {ident or '(unnamed)'} is corrupt: {why}.", 422
    )


def _private_folder(directory: Path) -> None:
    """Create the folder 0700; tighten one of this user's that others could read."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = directory.stat()
    if info.st_uid == os.geteuid() and info.st_mode & 0o077:
        try:
            directory.chmod(0o700)
        except OSError:
            pass
    elif info.st_uid != os.geteuid() and info.st_mode & 0o022:
        logger.warning(
            "CHECKPOINT_DIR %s belongs to another user and others may write to it; checkpoints "
            "written there by anyone without this server's key are refused",
            directory,
        )


def _folder_key(directory: Path) -> bytes:
    """The key kept in ``directory`` (created on first use: every worker and replica that
    shares the folder reads the same one)."""
    path = directory / KEY_FILE
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    partial = directory / f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW, 0o600)
    try:
        with open(fd, "wb") as f:
            f.write(secrets.token_bytes(KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(partial, path)  # whole or not at all; the first of several workers wins
        except FileExistsError:
            pass
    finally:
        partial.unlink()
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | _NO_FOLLOW)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _key_error(path, f"it cannot be opened ({exc.strerror})") from None
    with open(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            raise _key_error(path, "it is not a file of the user this server runs as")
        if info.st_mode & 0o077:
            raise _key_error(path, "others may read or write it (it must be 0600)")
        key = f.read(KEY_BYTES + 1)
    if len(key) != KEY_BYTES:
        raise _key_error(path, f"it does not hold {KEY_BYTES} bytes")
    return key


def _key_error(path: Path, why: str) -> PermissionError:
    return PermissionError(
        f"The checkpoint key {path} is not this server's: {why}. Remove it (a new one is "
        "generated), or set CHECKPOINT_KEY to the same secret on every server that shares "
        "the folder."
    )

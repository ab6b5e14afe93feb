"""Checkpoints of a session's environment state: taken, kept, verified and restored.

An environment opts in with ``SUPPORTS_CHECKPOINT = True`` and ``export_state()`` /
``import_state(state)``. The server stores what ``export_state`` returns (JSON data, encoded
here, or ``bytes`` kept as they are; nothing is pickled) as one blob::

    {"format": 1, "id": ..., "env": ..., "kind": "json"|"bytes", "step": n,
     "episode_open": true, "digest": "sha256:<hex>", "size": n, "created": unix}\\n<payload>

in memory (the default) or as ``<id>.ckpt`` files in ``CHECKPOINT_DIR``, which several
servers of the same environment may share. A blob is checked before anything uses it: its
size against ``MAX_CHECKPOINT_BYTES``, its header, the environment it came from, and the
SHA-256 of its payload; a blob that fails is refused before a session is started or an
instance touched. Checkpoints expire ``CHECKPOINT_TTL`` seconds after they were taken; the
memory store also drops its oldest past 16 × ``MAX_CHECKPOINT_BYTES`` in total.

The protocol (message types ``checkpoint`` and ``restore``, the ``X-OpenEnv-Restore``
handshake header and the HTTP routes) is in docs/protocol-checkpoints.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_core import PydanticSerializationError, from_json, to_json

logger = logging.getLogger("openenv_runtime.server")

FORMAT = 1
SUFFIX = ".ckpt"
MEMORY_BUDGET_FACTOR = 16
HEADER_LIMIT = 4096  # bytes a blob's header line may take
SWEEP_EVERY = 60.0  # seconds between expiry sweeps of the directory
_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")


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
    ) -> None:
        self.identity = identity
        self.directory = Path(directory) if directory else None
        self.max_bytes = max_bytes
        self.ttl = ttl
        self.memory: OrderedDict[str, bytes] = OrderedDict()
        self.memory_bytes = 0
        self._last_sweep = 0.0
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)

    # -- writing -----------------------------------------------------------------------------
    def encode(self, state: Any, step: int, episode_open: bool | None) -> bytes:
        """The blob of ``state`` (what ``export_state`` returned); raises CheckpointError."""
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
            "id": secrets.token_urlsafe(18),
            "env": self.identity,
            "kind": kind,
            "step": step,
            "episode_open": episode_open,
            "digest": digest_of(payload),
            "size": len(payload),
            "created": time.time(),
        }
        return to_json(header) + b"\n" + payload

    async def put(self, blob: bytes) -> Blob:
        """Keep ``blob`` (made by :meth:`encode`); returns it parsed."""
        parsed = self.parse(blob, None)
        ident = parsed.header["id"]
        if self.directory is None:
            self._expire_memory()
            self.memory[ident] = blob
            self.memory_bytes += len(blob)
            budget = MEMORY_BUDGET_FACTOR * self.max_bytes
            while self.memory_bytes > budget and len(self.memory) > 1:
                _, old = self.memory.popitem(last=False)
                self.memory_bytes -= len(old)
        else:
            await asyncio.to_thread(self._write, ident, blob)
        return parsed

    def _write(self, ident: str, blob: bytes) -> None:
        assert self.directory is not None
        final = self.directory / (ident + SUFFIX)
        partial = self.directory / f".{ident}.{os.getpid()}.tmp"
        with open(partial, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, final)  # readers on other servers never see half a blob
        now = time.time()
        if self.ttl is not None and now - self._last_sweep > min(SWEEP_EVERY, self.ttl):
            self._last_sweep = now
            self._sweep(now)

    def _sweep(self, now: float) -> None:
        assert self.directory is not None and self.ttl is not None
        for path in self.directory.glob("*" + SUFFIX):
            try:
                if path.stat().st_mtime < now - self.ttl:
                    path.unlink()
            except OSError:
                pass  # another replica removed it first

    def _expire_memory(self) -> None:
        if self.ttl is None:
            return
        deadline = time.time() - self.ttl
        while self.memory:
            blob = next(iter(self.memory.values()))
            if self._created(blob) >= deadline:
                break
            self.memory.popitem(last=False)
            self.memory_bytes -= len(blob)

    @staticmethod
    def _created(blob: bytes) -> float:
        try:
            created = from_json(blob[: blob.index(b"\n")]).get("created", 0.0)
            return float(created)
        except (ValueError, AttributeError, TypeError):
            return 0.0

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
            self._expire_memory()
            blob = self.memory.get(ident)
        else:
            blob = await asyncio.to_thread(self._read, ident)
        if blob is None:
            where = f"in {self.directory}" if self.directory else "in this server's memory"
            raise CheckpointError(
                "CHECKPOINT_NOT_FOUND",
                f"No checkpoint {ident} {where}: it expired (CHECKPOINT_TTL), or was taken on "
                "another server without a shared CHECKPOINT_DIR.",
                404,
            )
        parsed = self.parse(blob, ident)
        if digest is not None and digest != parsed.header["digest"]:
            raise CheckpointError(
                "CHECKPOINT_MISMATCH",
                f"Checkpoint {ident} has digest {parsed.header['digest']}, not the {digest} "
                "the client expected; it was replaced since it was taken.",
                409,
            )
        return parsed

    def _read(self, ident: str) -> bytes | None:
        assert self.directory is not None
        path = self.directory / (ident + SUFFIX)
        try:
            stat = path.stat()
            if self.ttl is not None and stat.st_mtime < time.time() - self.ttl:
                return None
            if stat.st_size > self.max_bytes + HEADER_LIMIT:
                raise CheckpointError(
                    "CHECKPOINT_TOO_LARGE",
                    f"Checkpoint {ident} is {stat.st_size} bytes, over this server's limit of "
                    f"{self.max_bytes} (MAX_CHECKPOINT_BYTES).",
                    413,
                )
            return path.read_bytes()
        except FileNotFoundError:
            return None

    def parse(self, blob: bytes, ident: str | None) -> Blob:
        """Check a blob through and through; raises CheckpointError saying what is wrong."""
        end = blob.find(b"\n", 0, HEADER_LIMIT)
        header: Any = None
        if end > 0:
            try:
                header = from_json(blob[:end])
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
            or header.get("kind") not in ("json", "bytes")
            or not isinstance(header.get("step"), int)
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

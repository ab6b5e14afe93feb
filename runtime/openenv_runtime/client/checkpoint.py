"""Client side of checkpoints: ``checkpoint()``, ``restore()`` and ``fork()`` of a session.

::

    ckpt = await env.checkpoint()          # Checkpoint(id, step, digest, size)
    ...                                    # go on stepping
    await env.restore(ckpt)                # back to that point (any server of this environment
                                           # that shares the checkpoint folder)
    branch = await env.fork()              # a second session with the same state, now
    await branch.step(action)
    await branch.close()
    group = await env.fork(n=32)           # 32 sessions from one checkpoint, opened at once

The environment must opt in (``SUPPORTS_CHECKPOINT = True``); otherwise the server refuses
with ``EnvError`` code ``CHECKPOINT_UNSUPPORTED``. The messages are in
docs/protocol.md (checkpoint, restore and fork); a client that never calls these never sees them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast, overload

from ..errors import EnvError
from ..protocol import encode
from .port import CheckpointSession

if TYPE_CHECKING:
    from typing import Self  # Python 3.11+; the runtime also supports 3.10


def _client(mixin: object) -> CheckpointSession:
    """The session this mixin is part of (``EnvClient`` satisfies the port)."""
    return cast(CheckpointSession, mixin)


HEADER_RESTORE = "X-OpenEnv-Restore"
HEADER_RESTORE_DIGEST = "X-OpenEnv-Restore-Digest"

_REFUSED = {
    "CHECKPOINT_NOT_FOUND": "the server has no such checkpoint (expired, or taken on a server "
    "that does not share its CHECKPOINT_DIR)",
    "CHECKPOINT_CORRUPT": "the stored checkpoint is corrupt, or was not written by this server "
    "(its signature, digest or header is wrong)",
    "CHECKPOINT_FOREIGN": "the checkpoint belongs to another environment",
    "CHECKPOINT_MISMATCH": "the stored checkpoint has another digest than this one",
    "CHECKPOINT_TOO_LARGE": "the checkpoint is larger than the server's MAX_CHECKPOINT_BYTES",
    "CHECKPOINT_INVALID": "the checkpoint id is malformed",
}


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A checkpoint the server keeps: pass it to ``restore`` or ``fork``.

    ``step`` is the episode's ``step_count`` when it was taken, ``digest`` the SHA-256 of the
    exported state (``"sha256:<hex>"``), ``size`` its length in bytes.
    """

    id: str
    step: int
    digest: str
    size: int

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Checkpoint:
        return cls(str(data["id"]), int(data["step"]), str(data["digest"]), int(data["size"]))


class CheckpointMixin:
    """``checkpoint``, ``restore`` and ``fork``; mixed into ``EnvClient``.

    It uses only what :class:`~openenv_runtime.client.port.CheckpointSession` names.
    """

    async def checkpoint(self) -> Checkpoint:
        """Save the session's environment state on the server; returns its :class:`Checkpoint`."""
        return Checkpoint.from_data(await _client(self).request_frame('{"type":"checkpoint"}'))

    async def restore(self, checkpoint: Checkpoint | str) -> Checkpoint:
        """Put this session's environment back to ``checkpoint`` (no reset needed).

        Works on any connected client of a server of the same environment that can read the
        checkpoint (the same server, or one sharing its ``CHECKPOINT_DIR``). A checkpoint
        given as a :class:`Checkpoint` must still have its digest; a bare id skips that check.
        """
        if isinstance(checkpoint, Checkpoint):
            data = {"id": checkpoint.id, "digest": checkpoint.digest}
        else:
            data = {"id": checkpoint}
        reply = await _client(self).request_frame(encode({"type": "restore", "data": data}))
        return Checkpoint.from_data(reply)

    @overload
    async def fork(
        self,
        checkpoint: Checkpoint | None = None,
        *,
        n: None = None,
        base_urls: Sequence[str] | None = None,
    ) -> Self: ...

    @overload
    async def fork(
        self,
        checkpoint: Checkpoint | None = None,
        *,
        n: int,
        base_urls: Sequence[str] | None = None,
    ) -> list[Self]: ...

    async def fork(
        self,
        checkpoint: Checkpoint | None = None,
        *,
        n: int | None = None,
        base_urls: Sequence[str] | None = None,
    ) -> Self | list[Self]:
        """New connected clients, each with its own session, starting from ``checkpoint``.

        Without ``checkpoint``, one is taken now, so the forks have this session's current
        state. ``fork()`` returns one client; ``fork(n=32)`` a list of 32, all from the same
        checkpoint, opened at once. ``base_urls``: servers to spread the forks over, in turn
        (without ``n``, the first); they must read this server's checkpoints (the same
        ``CHECKPOINT_DIR`` and key). Default: this client's server. ``EnvPool.fork``
        spreads them over a pool's servers.

        A fork opens a session like any other (it counts against the server's capacity and
        the per-client cap); close each when done. If any of the ``n`` cannot be opened, the
        others are closed and the first error is raised.
        """
        if n is not None and n < 1:
            raise ValueError("fork(n=...) needs n of at least 1")
        if base_urls is not None and not base_urls:
            raise ValueError("base_urls, when given, must name at least one server")
        if checkpoint is None:
            checkpoint = await self.checkpoint()
        servers = list(base_urls) if base_urls else [_client(self).base_url]
        if n is None:
            return await self._fork_one(checkpoint, servers[0])
        made = await asyncio.gather(
            *(self._fork_one(checkpoint, servers[i % len(servers)]) for i in range(n)),
            return_exceptions=True,
        )
        forks = [f for f in made if not isinstance(f, BaseException)]
        failure = next((f for f in made if isinstance(f, BaseException)), None)
        if failure is not None:
            await asyncio.gather(*(_client(f).close() for f in forks), return_exceptions=True)
            raise failure
        return forks

    async def _fork_one(self, checkpoint: Checkpoint, base_url: str) -> Self:
        """One connected client of ``base_url`` whose session starts from ``checkpoint``."""
        twin = _client(self).twin(base_url)
        twin.headers[HEADER_RESTORE] = checkpoint.id
        twin.headers[HEADER_RESTORE_DIGEST] = checkpoint.digest
        try:
            await twin.connect()
            # A failed restore answers here, before the fork is handed out; a server that
            # ignored the header (an older one) shows a fresh episode instead.
            state = await twin.request_frame('{"type":"state"}')
            if state.get("step_count", checkpoint.step) != checkpoint.step:
                raise EnvError(
                    "CHECKPOINT_UNSUPPORTED",
                    f"the server started the fork's session at step {state.get('step_count')}, "
                    f"not at the checkpoint's step {checkpoint.step}: it does not restore "
                    "sessions from checkpoints (an older server?)",
                )
        except EnvError as error:
            await twin.close()
            raise _explained(error, checkpoint) from None
        except BaseException:
            await twin.close()
            raise
        finally:
            # a resumed connection must not ask for the checkpoint again
            twin.headers.pop(HEADER_RESTORE, None)
            twin.headers.pop(HEADER_RESTORE_DIGEST, None)
        return cast("Self", twin)


def _explained(error: EnvError, checkpoint: Checkpoint) -> EnvError:
    """A refused handshake (HTTP status + X-OpenEnv-Error) as the checkpoint error it is."""
    code = error.details.get("error")
    if error.code == "CONNECTION_ERROR" and isinstance(code, str) and code in _REFUSED:
        return EnvError(
            code,
            f"fork from checkpoint {checkpoint.id} refused: {_REFUSED[code]}",
            dict(error.details),
        )
    return error

"""Client side of checkpoints: ``checkpoint()``, ``restore()`` and ``fork()`` of a session.

::

    ckpt = await env.checkpoint()          # Checkpoint(id, step, digest, size)
    ...                                    # go on stepping
    await env.restore(ckpt)                # back to that point (any server of this environment
                                           # that shares the checkpoint folder)
    branch = await env.fork()              # a second session with the same state, now
    await branch.step(action)
    await branch.close()

The environment must opt in (``SUPPORTS_CHECKPOINT = True``); otherwise the server refuses
with ``EnvError`` code ``CHECKPOINT_UNSUPPORTED``. The messages are in
docs/protocol-checkpoints.md; a client that never calls these never sees them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

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
        return Checkpoint.from_data(await _client(self)._request('{"type":"checkpoint"}'))

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
        reply = await _client(self)._request(encode({"type": "restore", "data": data}))
        return Checkpoint.from_data(reply)

    async def fork(self, checkpoint: Checkpoint | None = None) -> Self:
        """A new connected client with its own session, starting from ``checkpoint``.

        Without ``checkpoint``, one is taken now, so the fork has this session's current
        state. The fork opens a session like any other (it counts against the server's
        capacity and the per-client cap) on this client's server; close it when done.
        """
        if checkpoint is None:
            checkpoint = await self.checkpoint()
        twin = _client(self)._twin()
        twin.headers[HEADER_RESTORE] = checkpoint.id
        twin.headers[HEADER_RESTORE_DIGEST] = checkpoint.digest
        try:
            await twin.connect()
            # A failed restore answers here, before the fork is handed out; a server that
            # ignored the header (an older one) shows a fresh episode instead.
            state = await twin._request('{"type":"state"}')
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

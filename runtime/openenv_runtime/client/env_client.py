"""``EnvClient``: the async client of an environment server, typed by its models."""

from __future__ import annotations

import asyncio
import os
import typing
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar
from urllib.parse import urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from ..errors import EnvError
from ..models import Action, Observation, State, StepResult
from ..protocol import decode, encode
from .compat import ReferenceClientMixin, client_mode, install_blocking, reference_options
from .resume import ResumingTransport

if TYPE_CHECKING:
    from .sync import SyncEnvClient

ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)

DEFAULT_MAX_MESSAGE_BYTES = 64 << 20


def ws_url(base_url: str) -> str:
    """``http://h:8000`` → ``ws://h:8000/ws``; ``https`` → ``wss``; an explicit ``/ws`` is kept."""
    parts = urlsplit(base_url.strip())
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme.lower())
    if scheme is None or not parts.netloc:
        raise EnvError(
            "CONNECTION_ERROR", f"{base_url!r} is not a server URL; use e.g. http://127.0.0.1:8000"
        )
    path = parts.path.rstrip("/")
    if not path.endswith("/ws"):
        path += "/ws"
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))


def _default_token(url: str) -> str | None:
    host = urlsplit(url).hostname or ""
    if host.endswith(".hf.space"):
        return os.environ.get("HF_TOKEN") or None
    return None


class EnvClient(ReferenceClientMixin, Generic[ActT, ObsT, StateT]):
    """Async client for one session on an environment server.

    Subclass it with your models and you are done::

        class MyEnv(EnvClient[MyAction, MyObservation, MyState]):
            pass

        async with MyEnv(base_url="http://127.0.0.1:8000") as env:
            result = await env.reset(seed=1)
            result = await env.step(MyAction(message="hi"))
            print(result.observation, result.reward, result.done)
            state = await env.state()

    For blocking code, ``with MyEnv(base_url=...).sync() as env: env.reset()``.

    Args:
        base_url: the server (``http(s)://`` or ``ws(s)://``; ``/ws`` is appended).
        token: sent as ``Authorization: Bearer``; for ``*.hf.space`` URLs it defaults to ``HF_TOKEN``.
        connect_timeout: seconds allowed to open the connection.
        message_timeout: seconds allowed for one reply; None (default) waits as long as a
            step takes, while WebSocket pings keep checking that the server is alive.
        ping_interval, ping_timeout: keepalive pings (None disables them).
        headers: extra handshake headers.
        resume: after a dropped connection, reconnect (with backoff) and resume the same
            session, so a request just returns its result (default on, when the server offers
            it). When the session cannot be resumed, ``EnvError`` with code ``SESSION_GONE``.
    """

    action_cls: ClassVar[type[Action]] = Action
    observation_cls: ClassVar[type[Observation]] = Observation
    state_cls: ClassVar[type[State]] = State

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        install_blocking(cls)  # plain calls block outside an event loop (client/compat.py)
        for base in getattr(cls, "__orig_bases__", ()):
            if typing.get_origin(base) is EnvClient:
                args = typing.get_args(base)
                for attr, arg in zip(("action_cls", "observation_cls", "state_cls"), args):
                    if isinstance(arg, type) and attr not in cls.__dict__:
                        setattr(cls, attr, arg)

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        connect_timeout: float = 10.0,
        message_timeout: float | None = None,
        ping_interval: float | None = 20.0,
        ping_timeout: float | None = 20.0,
        headers: dict[str, str] | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        resume: bool = True,
        **reference: Any,
    ) -> None:
        if reference:  # the reference client's names (connect_timeout_s, ...): client/compat.py
            mapped = reference_options(reference)
            connect_timeout = mapped.get("connect_timeout", connect_timeout)
            message_timeout = mapped.get("message_timeout", message_timeout)
            ping_interval = mapped.get("ping_interval", ping_interval)
            ping_timeout = mapped.get("ping_timeout", ping_timeout)
            max_message_bytes = mapped.get("max_message_bytes", max_message_bytes)
        self._mode = client_mode(reference.get("mode"))
        self.base_url = base_url
        self.url = ws_url(base_url)
        self.token = token if token is not None else _default_token(base_url)
        self.connect_timeout = connect_timeout
        self.message_timeout = message_timeout
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        self.headers = dict(headers or {})
        self.max_message_bytes = max_message_bytes
        self._ws: ClientConnection | None = None
        self._ended: str | None = None  # why the session ended, once it has
        self._lock = asyncio.Lock()
        # Reconnect and resume after a dropped connection (see client/resume.py).
        self._resumer = ResumingTransport(self) if resume else None

    # -- connection ---------------------------------------------------------------------
    async def connect(self) -> typing.Self:
        """Open the session (done for you by ``async with`` and by the first request)."""
        if self._resumer is not None:
            await self._resumer.connect()
            return self
        if self._ws is not None:
            return self
        self._ended = None
        self._ws = await self._open_ws({})
        return self

    async def _open_ws(self, extra_headers: dict[str, str]) -> ClientConnection:
        """One WebSocket connection to the server (the transport, without session logic)."""
        headers = dict(self.headers)
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        headers.update(extra_headers)
        try:
            return await connect(
                self.url,
                additional_headers=headers,
                open_timeout=self.connect_timeout,
                ping_interval=self.ping_interval,
                ping_timeout=self.ping_timeout,
                max_size=self.max_message_bytes,
                compression=None,
                close_timeout=5,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            hint = " (missing or wrong token: pass token=...)" if status in (401, 403) else ""
            raise EnvError(
                "CONNECTION_ERROR",
                f"{self.url} refused the WebSocket with HTTP {status}{hint}",
                {"status": status, "error": exc.response.headers.get("x-openenv-error")},
            ) from None
        except InvalidHandshake as exc:  # the connection broke during the handshake
            raise EnvError(
                "CONNECTION_ERROR",
                f"the handshake with {self.url} failed: {exc}",
                {"dropped": True},
            ) from None
        except (OSError, TimeoutError, asyncio.TimeoutError, InvalidURI) as exc:  # noqa: UP041 (3.10)
            reason = str(exc) or type(exc).__name__
            raise EnvError("CONNECTION_ERROR", f"cannot connect to {self.url}: {reason}") from None

    async def close(self) -> None:
        """End the session: the server closes this session's environment."""
        if self._resumer is not None:
            await self._resumer.close()
            return
        ws, self._ws = self._ws, None
        if ws is None:
            return
        try:
            await ws.send('{"type":"close"}')
            await ws.close()
        except (ConnectionClosed, OSError):
            pass

    async def __aenter__(self) -> typing.Self:
        return await self.connect()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def sync(self) -> SyncEnvClient[ActT, ObsT, StateT]:
        """The same client with blocking methods, for plain scripts: ``with env.sync() as e: e.reset()``."""
        from .sync import SyncEnvClient

        return SyncEnvClient(self)

    # -- requests -----------------------------------------------------------------------
    async def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> StepResult[ObsT]:
        """Start a new episode. ``seed``, ``episode_id`` and other keys go to the environment's ``reset``."""
        options = {
            k: v
            for k, v in {"seed": seed, "episode_id": episode_id, **kwargs}.items()
            if v is not None
        }
        data = await self._request('{"type":"reset","data":' + encode(options) + "}")
        return self._parse_result(data)

    async def step(self, action: ActT | dict[str, Any]) -> StepResult[ObsT]:
        """Send one action; returns the observation with its reward and done flag."""
        data = await self._request('{"type":"step","data":' + self._action_json(action) + "}")
        return self._parse_result(data)

    async def state(self) -> StateT:
        """The episode's state (``episode_id``, ``step_count`` and the environment's own fields)."""
        data = await self._request('{"type":"state"}')
        return self._parse_state(data)

    # -- hooks (override for custom payloads) -------------------------------------------
    def _action_json(self, action: ActT | dict[str, Any]) -> str:
        step_payload = getattr(self, "_step_payload", None)  # a reference client's hook
        if step_payload is not None:
            return encode(step_payload(action))
        if isinstance(action, dict):
            action = self.action_cls.model_validate(action)  # type: ignore[assignment]
        return action.model_dump_json()  # type: ignore[union-attr]

    def _parse_result(self, data: dict[str, Any]) -> StepResult[ObsT]:
        reward, done = data.get("reward"), bool(data.get("done", False))
        body = data.get("observation") or {}
        fields = self.observation_cls.model_fields
        if not fields.keys() >= body.keys():
            # A newer server may add observation fields; an older client keeps working without them.
            body = {k: v for k, v in body.items() if k in fields}
        obs = self.observation_cls.model_validate({**body, "reward": reward, "done": done})
        return StepResult(observation=obs, reward=reward, done=done, metadata=data.get("metadata"))  # type: ignore[arg-type]

    def _parse_state(self, data: dict[str, Any]) -> StateT:
        return self.state_cls.model_validate(data)  # type: ignore[return-value]

    async def _request(self, frame: str) -> dict[str, Any]:
        if self._resumer is not None:
            async with self._lock:
                raw = await self._resumer.request(frame)
            return self._unwrap(raw)
        async with self._lock:
            if self._ended is not None:
                raise EnvError(
                    "CLOSED", f"{self._ended}; open a new session with `await env.connect()`"
                )
            if self._ws is None:
                await self.connect()
            assert self._ws is not None
            try:
                try:
                    await self._ws.send(frame)
                except ConnectionClosed:
                    # The server may have said why before closing (e.g. CAPACITY_REACHED): read that first.
                    raw = await self._ws.recv()
                    return self._unwrap(raw)
                if self.message_timeout is None:
                    raw = await self._ws.recv()
                else:
                    raw = await asyncio.wait_for(self._ws.recv(), self.message_timeout)
            except ConnectionClosed as exc:
                self._ws = None
                rcvd = exc.rcvd
                detail = f"code {rcvd.code} {rcvd.reason}".strip() if rcvd else "no close frame"
                self._ended = f"the connection to {self.url} closed ({detail})"
                raise EnvError("CLOSED", self._ended) from None
            except (TimeoutError, asyncio.TimeoutError):  # noqa: UP041 (distinct on Python 3.10)
                # A late reply would be mistaken for the next one: this session cannot go on.
                ws, self._ws = self._ws, None
                await ws.close()
                self._ended = (
                    f"no reply from {self.url} within {self.message_timeout}s (message_timeout)"
                )
                raise EnvError("TIMEOUT", self._ended) from None
        return self._unwrap(raw)

    @staticmethod
    def _unwrap(raw: str | bytes) -> dict[str, Any]:
        reply = decode(raw)
        kind = reply.get("type")
        data = reply.get("data") or {}
        if kind == "error":
            message = data.get("message", "error")
            code = data.get("code", "SESSION_ERROR")
            raise EnvError(
                code, message, {k: v for k, v in data.items() if k not in ("message", "code")}
            )
        return data


install_blocking(EnvClient)

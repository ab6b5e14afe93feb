"""``EnvClient``: the async client of an environment server, typed by its models."""

from __future__ import annotations

import asyncio
import functools
import typing
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import ValidationError

from ..blocking import install_blocking
from ..errors import EnvError
from ..http_reads import read_schema
from ..models import Action, Observation, State, StepResult
from ..observability import tracing
from ..protocol import CLOSE_FRAME, STATE_FRAME, encode, reply_data, reset_frame, step_frame
from .checkpoint import CheckpointMixin
from .compat import ReferenceClientMixin, client_mode, reference_options
from .connect import DEFAULT_MAX_MESSAGE_BYTES, default_token, open_connection, ws_url
from .constructors import ProviderConstructors
from .reply_reader import general_reader, one_pass_reader
from .resume import ResumingTransport
from .sync import SyncEnvClient
from .transport import Connection, ConnectionLost, ReplySink

if TYPE_CHECKING:
    from .constructors import Stoppable

_default_token = default_token  # its name before it moved to .connect

ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)


class EnvClient(
    ProviderConstructors, ReferenceClientMixin, CheckpointMixin, Generic[ActT, ObsT, StateT]
):
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

    To start the server too: ``MyEnv.from_project(".")``, ``MyEnv.from_docker_image(image)``,
    ``MyEnv.from_env("org/name")``; closing such a client stops its server.

    ``EnvPool`` drives many clients through a small public port, and only through it
    (:class:`~openenv_runtime.client.port.SessionPort`): the frames (``reset_frame``,
    ``step_frame``), sending (``submit_to`` for a batch, ``request_frame`` for one), reading a
    reply (``parse_result``) and the errors that end a session (``lost``, ``timed_out``).
    They are the pool's seam, not for application code: use ``reset``, ``step``, ``state``.

    Args:
        base_url: the server (``http(s)://`` or ``ws(s)://``; ``/ws`` is appended).
        token: sent as ``Authorization: Bearer``; for ``*.hf.space`` URLs it defaults to ``HF_TOKEN``.
        connect_timeout: seconds allowed to open the connection.
        message_timeout: seconds allowed for one reply; None (default) waits as long as a
            step takes, while WebSocket pings keep checking that the server is alive.
        ping_interval: seconds between keepalive pings (None disables them).
        ping_timeout: seconds a ping may wait for its pong (None: no limit).
        headers: extra handshake headers.
        resume: after a dropped connection, reconnect (with backoff) and resume the same
            session, so a request just returns its result (default on, when the server offers
            it). When the session cannot be resumed, ``EnvError`` with code ``SESSION_GONE``.
    """

    action_cls: ClassVar[type[Action]] = Action
    observation_cls: ClassVar[type[Observation]] = Observation
    state_cls: ClassVar[type[State]] = State

    _traced = False  # see __init__
    _trace_frames = False  # the server reads traceparent in frames (see _open_connection)
    # The class (or a base) defines the reference's ``_step_payload`` hook; decided when the
    # class is made, not looked up per step.
    _payload_hook: ClassVar[bool] = False
    # Neither the frame nor the action's JSON comes from a hook of the class: ``step`` may
    # build the frame itself (see there).
    _plain_frames: ClassVar[bool] = True
    # Nor does ``_parse_result``: ``step`` may read replies in one pass.
    _standard_reading: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        install_blocking(cls)  # plain calls block outside an event loop (client/compat.py)
        cls._payload_hook = hasattr(cls, "_step_payload")
        # What the subclasses between this class and EnvClient define (mixins included)
        mro = cls.__mro__
        own = {name for klass in mro[: mro.index(EnvClient)] for name in vars(klass)}
        cls._plain_frames = not cls._payload_hook and not own & {"step_frame", "_action_json"}
        cls._standard_reading = "_parse_result" not in own
        for base in getattr(cls, "__orig_bases__", ()):
            if typing.get_origin(base) is EnvClient:
                args = typing.get_args(base)
                for attr, arg in zip(
                    ("action_cls", "observation_cls", "state_cls"), args, strict=False
                ):
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
        """A client of the server at ``base_url`` (``http(s)://`` or ``ws(s)://``; ``/ws`` is used).

        ``token``: bearer token (default ``HF_TOKEN`` for ``*.hf.space``); timeouts in seconds
        (``message_timeout`` None: no limit); ``ping_interval`` / ``ping_timeout``: keepalive;
        ``headers``: extra handshake headers; ``resume``: reattach to the same server session
        after a dropped connection. ``mode``: ``"simulation"`` (default: reset/step/state,
        Gym-style) or ``"production"`` (tools only), default ``OPENENV_CLIENT_MODE``, fixed
        once made. The reference's names (``connect_timeout_s``, ``message_timeout_s``,
        ``max_message_size_mb``, ...) are accepted too.
        """
        mapped: dict[str, Any] = {}
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
        self.token = token if token is not None else default_token(base_url)
        self.connect_timeout = connect_timeout
        self.message_timeout = message_timeout
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        self.headers = dict(headers or {})
        # OpenTelemetry on (observability/tracing.py): the handshake, and each reset and step
        # when the server says it reads them, carry the caller's current span, so the server's
        # spans join the caller's trace.
        self._traced = tracing.enabled()
        self.max_message_bytes = max_message_bytes
        self._own_conn: Connection | None = None  # without resume; else the resumer's
        self._connecting: asyncio.Task[None] | None = None
        self._ended: str | None = None  # why the session ended, once it has
        # Servers this client owns (started by a constructor, or passed as provider=): close()
        # stops them.
        self._provider: Stoppable | None = mapped.get("provider")
        # While resuming, requests go one at a time (they are numbered). The usual request
        # (none in flight or waiting) is sent at once (_send_now); the others queue for the
        # lock, then wait until the one in flight is answered (_send_waiting).
        self._lock = asyncio.Lock()
        self._busy = False  # a request is in flight
        self._queued = 0  # requests in _send_waiting
        self._idle: asyncio.Future[None] | None = None  # done when _busy ends, if awaited
        # Reconnect and resume after a dropped connection (see client/resume.py).
        self._resumer = (
            ResumingTransport(self._open_connection, self.url, message_timeout) if resume else None
        )
        # step()'s one-pass reading of replies (client/reply_reader.py), when the class reads
        # them the standard way and its observation class allows it.
        observation_cls = self.observation_cls
        self._one_pass = (
            one_pass_reader(observation_cls)
            if self._standard_reading and observation_cls.__pydantic_complete__
            else None
        )

    @property
    def _conn(self) -> Connection | None:
        """The connection in use (the resuming transport's, when resuming)."""
        return self._resumer.ws if self._resumer is not None else self._own_conn

    @_conn.setter
    def _conn(self, conn: Connection | None) -> None:
        if self._resumer is not None:
            self._resumer.ws = conn
        else:
            self._own_conn = conn

    # -- connection: opened here, and only here ------------------------------------------------
    async def connect(self) -> typing.Self:
        """Open the session (done for you by ``async with`` and by the first request)."""
        if self._resumer is not None:
            await self._resumer.connect()
            return self
        if self._conn is not None and self._conn.is_open:
            return self
        if self._connecting is None:
            self._connecting = asyncio.get_running_loop().create_task(self._open())
        try:
            await asyncio.shield(self._connecting)
        finally:
            if self._connecting is not None and self._connecting.done():
                self._connecting = None
        return self

    async def _open(self) -> None:
        self._conn = await self._open_connection({})
        self._ended = None

    async def _open_connection(self, extra_headers: dict[str, str]) -> Connection:
        """One connection to the server, handshake done (see :func:`.connect.open_connection`)."""
        headers = dict(self.headers)
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        headers.update(extra_headers)
        if self._traced:
            headers.update(tracing.headers_for())
        conn = await open_connection(
            self.url,
            headers=headers,
            max_size=self.max_message_bytes,
            ping_interval=self.ping_interval,
            ping_timeout=self.ping_timeout,
            connect_timeout=self.connect_timeout,
        )
        if self._traced:
            response = conn.response
            self._trace_frames = response is not None and tracing.FRAMES_HEADER in response.headers
        return conn

    async def close(self) -> None:
        """End the session: the server closes this session's environment.

        A client made by ``from_project`` / ``from_docker_image`` / ``from_env`` also stops
        the servers it started.
        """
        if self._resumer is not None:
            await self._resumer.close()
        else:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.send(CLOSE_FRAME)
                await conn.close()
        provider, self._provider = self._provider, None
        if provider is not None:
            await asyncio.to_thread(provider.stop)

    def abort(self) -> None:
        """Drop the connection at once, without the closing handshake."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.abort()

    async def __aenter__(self) -> typing.Self:
        try:
            await self.connect()  # a subclass's (or a test's) connect() may not return self
        except BaseException:
            await self.close()  # the servers a from_* constructor started go too
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __await__(self) -> Generator[Any, None, typing.Self]:
        """``env = await MyEnv.from_docker_image(...)`` connects, as the reference's users write it."""
        return self._connected().__await__()

    async def _connected(self) -> typing.Self:
        await self.connect()
        return self

    def sync(self) -> SyncEnvClient[ActT, ObsT, StateT]:
        """The same client with blocking methods, for plain scripts: ``with env.sync() as e: e.reset()``."""
        return SyncEnvClient(self)

    def twin(self, base_url: str | None = None) -> typing.Self:
        """A client of the same class and options, not connected, of ``base_url`` (default:
        this client's server). The seam ``fork`` and ``new_session`` use to make one."""
        return type(self)(
            self.base_url if base_url is None else base_url,
            token=self.token,
            connect_timeout=self.connect_timeout,
            message_timeout=self.message_timeout,
            ping_interval=self.ping_interval,
            ping_timeout=self.ping_timeout,
            headers=dict(self.headers),
            max_message_bytes=self.max_message_bytes,
            resume=self._resumer is not None,
            mode=self._mode,
        )

    # -- requests -----------------------------------------------------------------------
    async def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> StepResult[ObsT]:
        """Start a new episode. ``seed``, ``episode_id`` and other keys go to the environment's ``reset``."""
        data = await self.request_frame(self.reset_frame(seed, episode_id, **kwargs))
        return self._parse_result(data)

    async def step(self, action: ActT | dict[str, Any]) -> StepResult[ObsT]:
        """Send one action; returns the observation with its reward and done flag."""
        resumer = self._resumer
        if (
            resumer is None
            or self._busy
            or self._queued
            or self._trace_frames
            or not self._plain_frames
            or isinstance(action, dict)
        ):
            return await self._step(action)
        # The usual step, at the least CPU (it is paid per step of every session of a
        # trainer): the frame built once with its number, the reply read in one pass.
        action_json = action.__pydantic_serializer__.to_json(action).decode()
        reply = resumer.submit_step(action_json)
        if reply is None:  # not connected, not resumable, or a message_timeout to keep
            return self._parse_result(reply_data(await self._send_waiting(step_frame(action_json))))
        self._busy = True
        try:
            raw = await reply
        except ConnectionLost as exc:
            raw = await self._after_loss(step_frame(action_json), exc)
        finally:
            self._busy = False
            if self._idle is not None:
                self._done_sending()
        read = self._one_pass
        if read is not None:
            result = read(raw)
            if result is not None:
                return result
        return self._parse_result(reply_data(raw))

    async def _step(self, action: ActT | dict[str, Any]) -> StepResult[ObsT]:
        """``step`` the general way: any hook, tracing, a request already in flight."""
        frame = self.step_frame(action)
        reply = self._send_now(frame)
        if reply is None:
            return self._parse_result(reply_data(await self._send_waiting(frame)))
        try:
            raw = await reply
        except ConnectionLost as exc:
            raw = await self._after_loss(frame, exc)
        finally:
            self._busy = False
            if self._idle is not None:
                self._done_sending()
        return self._parse_result(reply_data(raw))

    async def state(self) -> StateT:
        """The episode's state (``episode_id``, ``step_count`` and the environment's own fields)."""
        data = await self.request_frame(STATE_FRAME)
        return self._parse_state(data)

    async def schema(self) -> dict[str, Any]:
        """The server's JSON schemas of its ``action``, ``observation`` and ``state``
        (``GET /schema`` with this client's token; no session needed)."""
        return await asyncio.to_thread(
            read_schema, self.base_url, token=self.token, timeout=self.connect_timeout
        )

    # -- the pool's port (client/port.py): frames, sending, reading, ending ---------------------
    def reset_frame(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> str:
        """The wire frame of ``reset(seed, episode_id, **kwargs)``, not sent (the pool's seam)."""
        frame = reset_frame({"seed": seed, "episode_id": episode_id, **kwargs})
        return tracing.with_traceparent(frame) if self._trace_frames else frame

    def step_frame(self, action: ActT | dict[str, Any]) -> str:
        """The wire frame of ``step(action)``, not sent (the pool's seam)."""
        frame = step_frame(self._action_json(action))
        return tracing.with_traceparent(frame) if self._trace_frames else frame

    # -- hooks (override for custom payloads) -------------------------------------------
    def _action_json(self, action: ActT | dict[str, Any]) -> str:
        if self._payload_hook:  # a reference client's hook
            return encode(self._step_payload(action))  # type: ignore[attr-defined]
        if isinstance(action, dict):
            action = self.action_cls.model_validate(action)  # type: ignore[assignment]
        # The model's own serializer, called directly: model_dump_json adds Python work per call.
        return action.__pydantic_serializer__.to_json(action).decode()  # type: ignore[union-attr]

    def _parse_result(self, data: dict[str, Any]) -> StepResult[ObsT]:
        """A reply's ``data`` (just decoded: its observation dict is reused) as a ``StepResult``."""
        body = data.get("observation") or {}
        reward = body["reward"] = data.get("reward")
        done = body["done"] = bool(data.get("done"))
        fields, validate = general_reader(self.observation_cls)
        try:
            observation = validate(body)
        except ValidationError:
            # A newer server may add observation fields; an older client keeps working
            # without them. Looked for only when the body does not validate as it is.
            if fields >= body.keys():
                raise
            observation = validate({k: v for k, v in body.items() if k in fields})
        return StepResult(observation, reward, done, data.get("metadata"))

    def _parse_state(self, data: dict[str, Any]) -> StateT:
        return self.state_cls.model_validate(data)  # type: ignore[return-value]

    async def request_frame(self, frame: str) -> dict[str, Any]:
        """Send one request frame and return the ``data`` of its reply (the one place requests
        go; the pool's and checkpoints' seam). An error reply raises ``EnvError``."""
        reply = self._send_now(frame)
        if reply is None:
            return self._unwrap(await self._send_waiting(frame))
        try:
            raw = await reply
        except ConnectionLost as exc:
            raw = await self._after_loss(frame, exc)
        finally:
            self._busy = False
            if self._idle is not None:
                self._done_sending()
        return self._unwrap(raw)

    def _send_now(self, frame: str) -> asyncio.Future[str | bytes] | None:
        """The usual request, sent at once with no coroutine (connected, no request in flight
        while resuming, no ``message_timeout``): its reply's future, to await, then call
        ``_done_sending`` (and ``_after_loss`` on ``ConnectionLost``). None: use ``_send_waiting``."""
        resumer = self._resumer
        if resumer is None:
            conn = self._own_conn
            if conn is None or self.message_timeout is not None:
                return None
            return conn.submit(frame)
        if self._busy or self._queued:
            return None
        reply = resumer.submit_numbered(frame)
        if reply is not None:
            self._busy = True
        return reply

    async def _after_loss(self, frame: str, exc: ConnectionLost) -> str | bytes:
        """The connection ended under ``frame`` sent by ``_send_now``: its reply after
        resuming, or the error that ends the session."""
        if self._resumer is None:
            raise self.lost(exc) from None
        return await self._resumer.resend(frame)

    def _done_sending(self) -> None:
        """A request is answered (or failed): the next may go."""
        self._busy = False
        idle, self._idle = self._idle, None
        if idle is not None and not idle.done():
            idle.set_result(None)

    async def _send_waiting(self, frame: str) -> str | bytes:
        """Send ``frame`` when ``_send_now`` could not: connect first, wait for the request
        in flight, bound the wait by ``message_timeout``. Its raw reply."""
        if self._resumer is not None:
            self._queued += 1
            try:
                async with self._lock:
                    while self._busy:  # a request sent by _send_now is in flight
                        if self._idle is None or self._idle.done():  # (cancelled with a waiter)
                            self._idle = asyncio.get_running_loop().create_future()
                        await self._idle
                    self._busy = True
                    try:
                        return await self._resumer.request(frame)
                    finally:
                        self._done_sending()
            finally:
                self._queued -= 1
        conn = self._conn
        if conn is None:
            if self._ended is not None:
                raise EnvError(
                    "CLOSED", f"{self._ended}; open a new session with `await env.connect()`"
                )
            await self.connect()
            conn = self._conn
            assert conn is not None
        reply = conn.submit(frame)
        try:
            return await (
                reply
                if self.message_timeout is None
                else asyncio.wait_for(reply, self.message_timeout)
            )
        except ConnectionLost as exc:
            raise self.lost(exc) from None
        except (TimeoutError, asyncio.TimeoutError):
            raise self.timed_out() from None

    def submit_to(self, frame: str, sink: ReplySink) -> bool:
        """Send ``frame``; its raw reply (or ``ConnectionLost``) goes to ``sink``.

        The pool's batched seam: no coroutine per request; read the reply with
        ``parse_result(reply_data(raw))``. False when not connected.
        """
        if self._resumer is not None:
            # Numbered, resumable requests go one at a time: sent at once when none is in
            # flight (its reply to the sink, or resumed first), else through the waiting path.
            reply = self._send_now(frame)
            if reply is not None:
                reply.add_done_callback(functools.partial(self._replied, frame, sink))
                return True
            task = asyncio.get_running_loop().create_task(self._send_waiting(frame))
            task.add_done_callback(functools.partial(_feed, sink))
            return True
        conn = self._conn
        if conn is None:
            return False
        conn.submit_to(frame, sink)
        return True

    def _replied(self, frame: str, sink: ReplySink, reply: asyncio.Future[str | bytes]) -> None:
        """The reply to ``frame``, sent at once by ``_submit_to``: to ``sink``, after
        resuming the session if the connection dropped under it."""
        lost = None if reply.cancelled() else reply.exception()
        if isinstance(lost, ConnectionLost):
            task = asyncio.get_running_loop().create_task(self._resend_to_sink(frame, lost))
            task.add_done_callback(functools.partial(_feed, sink))
            return
        self._done_sending()
        _feed(sink, reply)

    async def _resend_to_sink(self, frame: str, exc: ConnectionLost) -> str | bytes:
        try:
            return await self._after_loss(frame, exc)
        finally:
            self._done_sending()

    def lost(self, exc: ConnectionLost) -> EnvError:
        """The session ended under a request: remember why, and say it (the pool's seam)."""
        self._conn = None
        self._ended = f"the connection to {self.url} ended: {exc}"
        code = exc.close_code
        return EnvError("CLOSED", self._ended, {"close_code": code} if code is not None else None)

    def timed_out(self, seconds: float | None = None) -> EnvError:
        """A request got no reply within ``seconds`` (default ``message_timeout``): end the
        session and say why (the pool's seam)."""
        # A late reply would be mistaken for the next one: this session cannot go on.
        self.abort()
        which = "timeout" if seconds is not None else "message_timeout"
        seconds = self.message_timeout if seconds is None else seconds
        self._ended = f"no reply from {self.url} within {seconds}s ({which})"
        return EnvError("TIMEOUT", self._ended)

    @staticmethod
    def _unwrap(raw: str | bytes) -> dict[str, Any]:
        return reply_data(raw)

    def parse_result(self, data: dict[str, Any]) -> StepResult[ObsT]:
        """A reply's ``data`` as a ``StepResult`` (the pool's seam); it calls ``_parse_result``,
        the hook a subclass overrides (the reference's name)."""
        return self._parse_result(data)


def _feed(sink: ReplySink, done: asyncio.Future[str | bytes]) -> None:
    """Hand a finished request's reply (or why it failed) to the pool's sink."""
    if done.cancelled():
        sink.set_exception(ConnectionLost("the request was cancelled"))
    elif (exc := done.exception()) is not None:
        sink.set_exception(exc if isinstance(exc, ConnectionLost) else ConnectionLost(str(exc)))
    else:
        sink.set_result(done.result())


install_blocking(EnvClient)

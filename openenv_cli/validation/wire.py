"""Talk to a running server the way clients do: HTTP info routes and a WebSocket episode."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from openenv_cli.validation.results import CheckResult, failed, passed, warned
from openenv_runtime.errors import EnvError
from openenv_runtime.http_reads import read_answer

KINDS = ("action", "observation", "state")


def ws_url(base_url: str) -> str:
    parts = urlsplit(base_url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    path = parts.path.rstrip("/")
    return urlunsplit((scheme, parts.netloc, path + "/ws", "", ""))


def get_json(
    base_url: str, route: str, timeout: float, token: str | None = None
) -> tuple[int, Any]:
    """GET ``route``; returns (status, parsed JSON or text). Raises OSError when unreachable.

    Read through the runtime's one reader (``http_reads``): the token never follows a redirect
    to another host, the answer is bounded."""
    try:
        status, body = read_answer(base_url, route, token=token, timeout=timeout)
    except EnvError as exc:
        raise OSError(exc.message) from None
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body.decode("utf-8", "replace")[:300]


class Refused(Exception):
    """A WebSocket request answered with an error (``code``) or a reply of another type."""

    def __init__(self, kind: str, code: str | None, message: str) -> None:
        super().__init__(f"{kind} answered error {code}: {message}")
        self.code = code


def ws_request(ws: Any, frame: dict[str, Any], expect: str, timeout: float) -> dict[str, Any]:
    """Send ``frame`` on the open WebSocket ``ws``; the ``data`` of its ``expect`` reply."""
    ws.send(json.dumps(frame))
    reply = json.loads(ws.recv(timeout=timeout))
    data: dict[str, Any] = reply.get("data") or {}
    if reply.get("type") == "error":
        raise Refused(frame["type"], data.get("code"), str(data.get("message")))
    if reply.get("type") != expect:
        raise Refused(frame["type"], None, f"type {reply.get('type')!r}, expected {expect!r}")
    return data


def check_health(prefix: str, base_url: str, timeout: float, token: str | None) -> CheckResult:
    name = f"{prefix}.health"
    try:
        status, body = get_json(base_url, "/health", timeout, token)
    except OSError as exc:
        reason = getattr(exc, "reason", exc)
        return failed(
            name,
            f"Cannot reach {base_url}/health: {reason}.",
            "Check that the server is running and the URL is right.",
            details={"unreachable": True},
        )
    if status != 200 or not isinstance(body, dict) or body.get("status") != "healthy":
        return failed(
            name,
            f'GET /health answered {status} {str(body)[:200]}, not {{"status": "healthy"}}.',
            "Serve the app with openenv_runtime's create_app(), which provides /health.",
        )
    extra = (
        f" ({body['active_sessions']}/{body['max_sessions']} sessions)"
        if "max_sessions" in body
        else ""
    )
    return passed(name, f"GET /health: healthy{extra}.", details={"health": body})


def check_schema(
    prefix: str,
    base_url: str,
    timeout: float,
    token: str | None,
    expected: dict[str, Any] | None = None,
) -> tuple[CheckResult, dict[str, Any] | None]:
    name = f"{prefix}.schema"
    try:
        status, body = get_json(base_url, "/schema", timeout, token)
    except OSError as exc:
        return failed(
            name, f"GET /schema failed: {exc}.", "Check that the server is running."
        ), None
    if status == 401:
        return failed(
            name,
            "GET /schema answered 401: the server requires a token.",
            "Pass --token (or set OPENENV_API_KEY) with the server's key.",
        ), None
    if (
        status != 200
        or not isinstance(body, dict)
        or not all(isinstance(body.get(k), dict) for k in KINDS)
    ):
        return failed(
            name,
            f"GET /schema answered {status} without action, observation and state schemas.",
            "Serve the app with openenv_runtime's create_app(), which provides /schema.",
        ), None
    if expected is not None and any(body[k] != expected.get(k) for k in KINDS):
        differ = [k for k in KINDS if body[k] != expected.get(k)]
        return warned(
            name,
            f"GET /schema serves {', '.join(differ)} schemas that differ from models.py.",
            "Pass the classes from models.py to create_app() in the app module.",
        ), body
    return passed(name, "GET /schema serves action, observation and state schemas."), body


def check_metadata(prefix: str, base_url: str, timeout: float, token: str | None) -> CheckResult:
    name = f"{prefix}.metadata"
    try:
        status, body = get_json(base_url, "/metadata", timeout, token)
    except OSError as exc:
        return failed(name, f"GET /metadata failed: {exc}.", "Check that the server is running.")
    if status != 200 or not isinstance(body, dict) or "name" not in body:
        return failed(
            name,
            f"GET /metadata answered {status} without a name.",
            "Serve the app with openenv_runtime's create_app().",
        )
    missing = [k for k in ("description", "version") if not body.get(k)]
    label = f"{body.get('name')} {body.get('version') or ''}".strip()
    if missing:
        return warned(
            name,
            f"GET /metadata: {label}, without {', '.join(missing)}.",
            "Pass metadata=EnvironmentMetadata(name=..., description=..., version=...) to "
            "create_app() (EnvironmentMetadata from openenv_runtime.wire).",
            details={"metadata": {k: v for k, v in body.items() if k != "readme_content"}},
        )
    return passed(
        name,
        f"GET /metadata: {label}.",
        details={"metadata": {k: v for k, v in body.items() if k != "readme_content"}},
    )


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 2)


def run_episode(
    prefix: str,
    base_url: str,
    action: dict[str, Any],
    timeout: float,
    token: str | None = None,
    steps: int = 1,
) -> CheckResult:
    """reset, ``steps`` × step(action), state, close over /ws; the latency of each."""
    from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
    from websockets.sync.client import connect

    name = f"{prefix}.episode"
    latency: dict[str, Any] = {"step_ms": []}
    url = ws_url(base_url)
    headers = {"Authorization": f"Bearer {token}"} if token else None
    stage = "connect"
    try:
        start = time.perf_counter()
        with connect(
            url,
            open_timeout=timeout,
            close_timeout=timeout,
            additional_headers=headers,
            max_size=64 << 20,
        ) as ws:
            latency["connect_ms"] = _ms(start)

            def request(frame: dict[str, Any], expect: str) -> dict[str, Any]:
                ws.send(json.dumps(frame))
                reply = json.loads(ws.recv(timeout=timeout))
                if reply.get("type") == "error":
                    data = reply.get("data") or {}
                    errors = data.get("errors")
                    more = f" {json.dumps(errors)[:300]}" if errors else ""
                    raise _Reply(
                        f"{frame['type']} answered error {data.get('code')}: {data.get('message')}{more}"
                    )
                if reply.get("type") != expect:
                    raise _Reply(
                        f"{frame['type']} answered type {reply.get('type')!r}, expected {expect!r}"
                    )
                return reply.get("data") or {}

            stage = "reset"
            start = time.perf_counter()
            data = request({"type": "reset", "data": {}}, "observation")
            latency["reset_ms"] = _ms(start)
            if "observation" not in data or "done" not in data:
                raise _Reply("reset answered without observation/done")
            for _ in range(steps):
                stage = "step"
                start = time.perf_counter()
                data = request({"type": "step", "data": action}, "observation")
                latency["step_ms"].append(_ms(start))
                if data.get("done"):
                    break
            stage = "state"
            start = time.perf_counter()
            state = request({"type": "state"}, "state")
            latency["state_ms"] = _ms(start)
            stage = "close"
            ws.send(json.dumps({"type": "close"}))
            try:
                ws.recv(timeout=timeout)
                raise _Reply("the server replied to close instead of closing the connection")
            except ConnectionClosed as closed:
                code = closed.rcvd.code if closed.rcvd is not None else None
                if code != 1000:
                    raise _Reply(
                        f"close ended the connection with code {code}, expected 1000"
                    ) from None
    except _Reply as exc:
        return failed(name, f"WebSocket episode: {exc}.", _fix(stage), details={"latency": latency})
    except InvalidStatus as exc:
        status = exc.response.status_code
        fix = (
            "Pass --token (or set OPENENV_API_KEY) with the server's key."
            if status in (401, 403)
            else _fix("connect")
        )
        return failed(
            name, f"WebSocket {url} refused with HTTP {status}.", fix, details={"latency": latency}
        )
    except TimeoutError:
        return failed(
            name,
            f"WebSocket episode: no answer to {stage} within {timeout:g}s.",
            _fix(stage) + " Or raise --timeout.",
            details={"latency": latency},
        )
    except (OSError, WebSocketException, ValueError) as exc:
        return failed(
            name,
            f"WebSocket episode failed at {stage}: {type(exc).__name__}: {exc}.",
            _fix(stage),
            details={"latency": latency},
        )
    steps_text = "/".join(f"{v:g}" for v in latency["step_ms"])
    message = (
        f"reset {latency['reset_ms']:g} ms, step {steps_text} ms, state {latency['state_ms']:g} ms "
        f"(step_count {state.get('step_count')}), closed with 1000."
    )
    return passed(
        name, f"WebSocket episode: {message}", details={"latency": latency, "action": action}
    )


class _Reply(Exception):
    pass


def _fix(stage: str) -> str:
    return {
        "connect": "Check the URL and that the server serves /ws.",
        "reset": "Fix reset() in the environment (server/*_environment.py); the server log shows the traceback.",
        "step": "Fix step() in the environment, or make example_action in openenv.yaml a valid action.",
        "state": "Fix the `state` property of the environment: it must return a State.",
        "close": 'Serve the app with openenv_runtime\'s create_app(), which closes with 1000 on {"type": "close"}.',
    }.get(stage, "See the server log.")

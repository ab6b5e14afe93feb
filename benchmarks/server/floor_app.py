"""The floor: a bare ASGI app that speaks the OpenEnv WebSocket messages and does nothing else.

No framework, no models, no environment: ``/ws`` answers ``reset`` and ``step`` with one
fixed observation, ``state`` with a fixed state, closes on ``close``; ``GET /health``
answers ``{"status": "healthy"}``. A step whose ``wait`` is positive sleeps that long first,
like the benchmark environments, so that in the concurrency runs the floor holds its
sessions open exactly as long as the others (with ``wait`` 0 it costs one dict lookup). Served on the same uvicorn with the same settings as
ours (``python -m openenv_runtime.serve floor_app:app --app-dir benchmarks``), it is
what the server costs when the application costs nothing: the protocol stack's share.

``inline_app`` is the same floor answering steps in the WebSocket protocol itself, below ASGI,
through the shortcut the runtime uses for a cheap plain ``step()``
(``openenv_runtime/server/ws/inline_frames.py``): the floor of a server that takes that shortcut.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

OBSERVATION = '{"type":"observation","data":{"observation":{"ok":true,"metadata":{}},"reward":1.0,"done":false}}'
STATE = '{"type":"state","data":{"episode_id":"floor","step_count":0}}'
UNKNOWN = '{"type":"error","data":{"message":"unknown message type","code":"UNKNOWN_TYPE"}}'
INVALID = '{"type":"error","data":{"message":"invalid JSON","code":"INVALID_JSON"}}'
HEALTH = b'{"status":"healthy"}'


def _answer_inline(frame: str) -> str | None:
    """``inline_app``'s frame handler: a step without ``wait`` answered in the protocol."""
    try:
        msg = json.loads(frame)
    except ValueError:
        return None
    if type(msg) is not dict or msg.get("type") != "step":
        return None
    data = msg.get("data")
    if isinstance(data, dict) and data.get("wait"):
        return None
    return OBSERVATION


async def _websocket(receive: Any, send: Any, protocol: Any = None) -> None:
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    if protocol is not None:
        protocol.frame_handler = _answer_inline
    while True:
        message = await receive()
        if message["type"] != "websocket.receive":
            return
        try:
            frame = json.loads(message.get("text") or message.get("bytes") or b"")
            kind = frame.get("type")
        except (ValueError, AttributeError):
            await send({"type": "websocket.send", "text": INVALID})
            continue
        if kind == "step":
            data = frame.get("data")
            wait = data.get("wait") if isinstance(data, dict) else None
            if wait:
                await asyncio.sleep(wait)
            await send({"type": "websocket.send", "text": OBSERVATION})
        elif kind == "reset":
            await send({"type": "websocket.send", "text": OBSERVATION})
        elif kind == "close":
            await send({"type": "websocket.close", "code": 1000})
            return
        elif kind == "state":
            await send({"type": "websocket.send", "text": STATE})
        else:
            await send({"type": "websocket.send", "text": UNKNOWN})


async def _http(scope: dict[str, Any], receive: Any, send: Any) -> None:
    found = scope["path"] == "/health"
    await send(
        {
            "type": "http.response.start",
            "status": 200 if found else 404,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(HEALTH) if found else 2).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": HEALTH if found else b"{}"})


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "websocket":
        await _websocket(receive, send)
    elif scope["type"] == "http":
        await _http(scope, receive, send)
    elif scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


async def inline_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The floor with the server's own shortcut: steps answered in the WebSocket protocol,
    below ASGI (``openenv_runtime.server.ws.inline_frames``), as the runtime answers a cheap
    plain ``step()``. What the protocol costs a server that uses it and does nothing else."""
    if scope["type"] == "websocket":
        protocol = (scope.get("extensions") or {}).get("openenv.inline_frames")
        await _websocket(receive, send, protocol)
    else:
        await app(scope, receive, send)

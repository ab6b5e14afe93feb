"""The capture proxy served both ways: its own HTTP protocol (the forwarded calls below ASGI,
as ``openenv capture`` serves it) and plain ASGI (what any other server gets)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from openenv_runtime.capture import CaptureProxy
from openenv_runtime.capture.server import protocol_for
from openenv_runtime.testing import running_server

Serve = Callable[[CaptureProxy], AbstractContextManager[str]]
WAYS = ["protocol", "asgi"]
"""The ways in, for a fixture's ``params``."""


def serving(way: str) -> Serve:
    """``serve(proxy)``: a running server's URL, the proxy served ``way``."""

    def start(proxy: CaptureProxy) -> AbstractContextManager[str]:
        if way == "protocol":
            return running_server(proxy.app, http=protocol_for(proxy))
        return running_server(proxy.app)

    return start

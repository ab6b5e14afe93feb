"""Start the local test Hub in a background thread, and point `huggingface_hub` clients at it."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn

from .app import create_app
from .state import Account, HubState

if TYPE_CHECKING:
    import pytest
    from huggingface_hub import HfApi

ALICE = "alice"
BOB = "bob"
ORG = "openenv-org"  # alice is a member, bob is not
ALICE_TOKEN = "hf_test_alice_write"
ALICE_READ_TOKEN = "hf_test_alice_read"
BOB_TOKEN = "hf_test_bob_write"
DEFAULT_TOKENS: dict[str, Account] = {
    ALICE_TOKEN: Account(ALICE, role="write", orgs=(ORG,)),
    ALICE_READ_TOKEN: Account(ALICE, role="read", orgs=(ORG,)),
    BOB_TOKEN: Account(BOB, role="write"),
}
LOOPBACK = "127.0.0.1,localhost"


@dataclass
class HubHandle:
    """A running test Hub: its base URL (no trailing slash) and its live state."""

    url: str
    state: HubState

    def api(self, token: str | bool | None = ALICE_TOKEN) -> HfApi:
        """A real `HfApi` client for this Hub (alice's write token unless told otherwise)."""
        from huggingface_hub import HfApi

        return HfApi(endpoint=self.url, token=token)

    def client_env(self, hf_home: Path, token: str | None = None) -> dict[str, str]:
        """Environment for a subprocess (e.g. the `openenv` CLI) that must talk to this Hub only.

        Start from `os.environ` with HF_TOKEN / HF_HUB_OFFLINE removed, then apply this.
        """
        env = {
            "HF_ENDPOINT": self.url,
            "HF_HOME": str(hf_home),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "NO_PROXY": _with_loopback(os.environ.get("NO_PROXY")),
            "no_proxy": _with_loopback(os.environ.get("no_proxy")),
        }
        if token is not None:
            env["HF_TOKEN"] = token
        return env


@contextmanager
def running_hub(
    tokens: Mapping[str, str | Account] | None = None, *, state: HubState | None = None
) -> Iterator[HubHandle]:
    """Serve a fresh in-memory Hub on 127.0.0.1 (free port) for the duration of the block.

    `tokens` maps a token to a user name (a write token, no organizations) or an `Account`;
    default: `DEFAULT_TOKENS` (alice with write and read tokens and the `openenv-org` org, bob).
    """
    if state is None:
        state = HubState(DEFAULT_TOKENS if tokens is None else tokens)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        create_app(state),
        log_config=None,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"test-hub-{port}", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the local test Hub did not start")
            time.sleep(0.01)
        yield HubHandle(url=f"http://127.0.0.1:{port}", state=state)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def isolate_hf_client(
    monkeypatch: pytest.MonkeyPatch, hf_home: Path, endpoint: str | None = None
) -> None:
    """Keep in-process `huggingface_hub` away from the real Hub and the user's own login.

    Sets the environment (for subprocesses and a not-yet-imported `huggingface_hub`) and, when
    `huggingface_hub` is already imported, patches the constants it read at import time. Tests
    should still pass `endpoint=` and `token=` explicitly to `HfApi`.
    """
    hf_home.mkdir(parents=True, exist_ok=True)
    for name in (
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_TOKEN_PATH",
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("NO_PROXY", _with_loopback(os.environ.get("NO_PROXY")))
    monkeypatch.setenv("no_proxy", _with_loopback(os.environ.get("no_proxy")))
    if endpoint is not None:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)

    constants = sys.modules.get("huggingface_hub.constants")
    if constants is None:
        return
    patched = {
        "HF_HOME": str(hf_home),
        "HF_HUB_CACHE": str(hf_home / "hub"),
        "HF_TOKEN_PATH": str(hf_home / "token"),
        "HF_STORED_TOKENS_PATH": str(hf_home / "stored_tokens"),
        "AGENT_HARNESSES_PATH": str(hf_home / ".agent_harnesses.json"),
        "HF_HUB_DISABLE_TELEMETRY": True,
        "HF_HUB_OFFLINE": False,
    }
    if endpoint is not None:
        patched["ENDPOINT"] = endpoint
        patched["HUGGINGFACE_CO_URL_TEMPLATE"] = (
            endpoint + "/{repo_id}/resolve/{revision}/{filename}"
        )
    for name, value in patched.items():
        monkeypatch.setattr(constants, name, value, raising=False)
    # The shared HTTP client read the proxy settings when it was created: make a new one.
    from huggingface_hub.utils import close_session

    close_session()


def _with_loopback(current: str | None) -> str:
    return f"{LOOPBACK},{current}" if current else LOOPBACK

"""`openenv capture` and the stand-in model server as separate processes, over real HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from openenv_runtime.llm.samples import assemble
from openenv_runtime.testing import free_port
from tests.support.servers import wait_until

pytestmark = pytest.mark.integration
openai = pytest.importorskip("openai", reason="needs openenv-runtime[llm]")


@contextmanager
def process(args: list[str], health: str) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:

        def up() -> bool:
            try:
                return httpx.get(health, timeout=1).status_code == 200
            except httpx.HTTPError:
                return proc.poll() is not None

        assert wait_until(up, timeout=30), "the process did not start"
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)


def test_capture_cli_records_a_stub_process_conversation() -> None:
    model_port, proxy_port = free_port(), free_port()
    model = f"http://127.0.0.1:{model_port}"
    proxy = f"http://127.0.0.1:{proxy_port}"
    stub_cmd = [sys.executable, "-m", "openenv_runtime.testing.stub_llm", "--port", str(model_port)]
    cli = [sys.executable, "-m", "openenv_cli", "capture", "--upstream", model + "/v1"]
    with (
        process(stub_cmd, model + "/health"),
        process([*cli, "--port", str(proxy_port)], proxy + "/health") as capture,
    ):
        session = httpx.post(proxy + "/sessions").json()
        client = openai.OpenAI(base_url=session["base_url"], api_key=session["api_key"])
        messages = [{"role": "user", "content": "one"}]
        for text in ("two", "three"):
            reply = client.chat.completions.create(model="stub-model", messages=messages)  # type: ignore[arg-type]
            messages += [
                {"role": "assistant", "content": reply.choices[0].message.content or ""},
                {"role": "user", "content": text},
            ]
        wrong = openai.OpenAI(base_url=session["base_url"], api_key="not-a-session")
        with pytest.raises(openai.AuthenticationError):
            wrong.chat.completions.create(model="stub-model", messages=messages)  # type: ignore[arg-type]
        own = {"Authorization": f"Bearer {session['api_key']}"}
        where = f"{proxy}/sessions/{session['session_id']}"
        entries = httpx.get(f"{where}/trace_entries", headers=own).json()
        [listed] = httpx.get(proxy + "/sessions").json()
        assert listed["session_id"] == session["session_id"] and listed["calls"] == 2
        assert listed["last_call"] >= listed["created"] and "api_key" not in listed
        assert httpx.delete(where, headers=own).status_code == 204
        assert httpx.get(proxy + "/sessions").json() == []
        capture.terminate()
        log = capture.communicate(timeout=10)[0].decode()
    calls = [line for line in log.splitlines() if "POST /v1/chat/completions" in line]
    assert len(calls) == 2 and f"session {session['session_id']}" in calls[0]
    assert "-> 200" in calls[0] and session["api_key"] not in log
    (sample,) = assemble(entries)
    assert sum(sample.env_mask) == sum(len(e["completion_token_ids"]) for e in entries)
    assert len(entries) == 2


def test_capture_cli_refuses_a_public_interface_without_a_token() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "openenv_cli",
            "capture",
            "--upstream",
            "http://x:1/v1",
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "OPENENV_CAPTURE_TOKEN"},
    )
    assert out.returncode == 1 and "OPENENV_CAPTURE_TOKEN" in out.stdout + out.stderr

"""The smoke test: serve the project in a child process on a free port, run an episode, stop it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from openenv_cli.manifest_schema import Manifest
from openenv_cli.validation import wire
from openenv_cli.validation.checkpoint import check_checkpoint
from openenv_cli.validation.isolation import import_layout
from openenv_cli.validation.results import CheckResult, failed, passed
from openenv_cli.validation.seed import check_seeded_reset
from openenv_runtime.providers.base import wait_until_healthy
from openenv_runtime.testing import free_port


def _tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server and everything it started (its own process group)."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_smoke(
    project_dir: Path,
    manifest: Manifest,
    action: dict[str, Any],
    timeout: float,
    expected_schemas: dict[str, Any] | None = None,
) -> list[CheckResult]:
    """Start ``manifest.app`` with ``python -m openenv_runtime.serve`` and check it like a client.

    Every phase is bounded by ``timeout`` seconds and the server is always stopped.
    """
    results: list[CheckResult] = []
    with (
        import_layout(project_dir, manifest.name, manifest.app_module) as layout,
        tempfile.NamedTemporaryFile(prefix="openenv-smoke-", suffix=".log", delete=False) as log,
    ):
        log_path = Path(log.name)
        env = dict(layout.env)
        env.pop("OPENENV_API_KEY", None)  # the smoke test is a local client
        env.update({"LOG_LEVEL": "warning", "WORKERS": "1", "HOST": "127.0.0.1"})
        if manifest.server.session_timeout is not None:
            env.setdefault("SESSION_TIMEOUT", str(manifest.server.session_timeout))
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        command = [
            sys.executable,
            "-m",
            "openenv_runtime.serve",
            manifest.app,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        started = time.perf_counter()
        proc = subprocess.Popen(
            command,
            cwd=project_dir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            up = _wait_until_up(proc, base_url, timeout)
            if up is not None:
                results.append(
                    failed(
                        "smoke.start",
                        f"{up}\n{_tail(log_path)}".strip(),
                        f"Run `python -m openenv_runtime.serve {manifest.app}` in {project_dir} to see the full error.",
                        details={"log": _tail(log_path, 60)},
                    )
                )
                return results
            results.append(
                passed(
                    "smoke.start",
                    f"Server started in {time.perf_counter() - started:.1f}s on {base_url}.",
                )
            )
            results.append(wire.check_health("smoke", base_url, timeout, None))
            schema_check, _ = wire.check_schema("smoke", base_url, timeout, None, expected_schemas)
            results.append(schema_check)
            episode = wire.run_episode("smoke", base_url, action, timeout)
            if episode.status.value == "fail" and _tail(log_path):
                episode = failed(
                    episode.name,
                    f"{episode.message}\nServer log:\n{_tail(log_path)}",
                    episode.fix,
                    details=episode.details,
                )
            results.append(episode)
            if episode.status.value == "pass":
                results.append(check_checkpoint("smoke", base_url, action, timeout))
                results.append(check_seeded_reset("smoke", base_url, action, timeout))
        finally:
            _stop(proc)
            log_path.unlink(missing_ok=True)
    return results


def _wait_until_up(proc: subprocess.Popen[bytes], base_url: str, timeout: float) -> str | None:
    """None once /health answers; otherwise why not."""

    def exited() -> str | None:
        code = proc.poll()
        return (
            None
            if code is None
            else f"The server exited with code {code} before answering /health."
        )

    try:
        wait_until_healthy(base_url, timeout, interval_s=0.1, probe_timeout_s=1.0, alive=exited)
    except RuntimeError as exc:
        return str(exc)
    except TimeoutError:
        return f"The server did not answer /health within {timeout:g}s."
    return None

"""A virtualenv of its own for ``verifiers`` targets' tests.

``verifiers`` 0.4.0 pins ``mcp==2.0.0`` and ``openai>=2.54``, which would replace packages the
rest of the suite needs, so it never enters the interpreter that runs the tests. This module
builds (once, cached, under a file lock) ``.cache/test-venvs/verifiers-<key>`` holding
``verifiers==0.4.0``, this checkout's runtime and its CLI with the ``collect`` extra (both
editable, so the servers and ``openenv collect`` run this code), and the tests serve
``verifiers:`` targets with its python. The key covers the pin, the Python version, both
``pyproject.toml`` files (the dependencies) and the checkout's folder.

    python -m tests.support.verifiers_venv     # pre-build it (prints its python); .ci/run does

The test environments in ``tests/fixtures/verifiers_envs`` go on the server's PYTHONPATH
(:data:`ENVS`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from openenv_runtime.testing import free_port
from tests.support.reference import file_lock
from tests.support.servers import SOURCES, spawn_server

VERIFIERS_REQUIREMENT = "verifiers==0.4.0"
REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "test-venvs"
ENVS = REPO / "tests" / "fixtures" / "verifiers_envs"
SCORER = ENVS / "vf_score.py"
BUILD_TIMEOUT_S = float(os.environ.get("OPENENV_VERIFIERS_BUILD_TIMEOUT", "1200"))
_COMPLETE = ".openenv-complete"


class VerifiersVenvError(RuntimeError):
    """The virtualenv could not be built or is unusable."""


def venv_key() -> str:
    digest = hashlib.sha256()
    for part in (VERIFIERS_REQUIREMENT, sys.version, str(REPO)):
        digest.update(part.encode())
    for pyproject in (REPO / "runtime" / "pyproject.toml", REPO / "pyproject.toml"):
        digest.update(pyproject.read_bytes())
    return digest.hexdigest()[:16]


def venv_dir() -> Path:
    return CACHE / f"verifiers-{venv_key()}"


def _usable(venv: Path) -> bool:
    python = venv / "bin" / "python"
    if not (venv / _COMPLETE).is_file() or not python.exists():
        return False
    probe = (
        "import importlib.metadata as m, importlib.util as u; "
        f"assert m.version('verifiers') == {VERIFIERS_REQUIREMENT.split('==')[1]!r}; "
        "assert all(u.find_spec(m) for m in ('verifiers.v1', 'openenv_runtime', 'openenv_cli', 'jsf'))"
    )
    try:
        done = subprocess.run([str(python), "-c", probe], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _build(venv: Path) -> None:
    if venv.exists():
        shutil.rmtree(venv)
    log = venv.parent / f"{venv.name}.build.log"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHONPATH", "VIRTUAL_ENV", "PIP_REQUIRE"))
    }
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    python = str(venv / "bin" / "python")
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [
            *(python, "-m", "pip", "install", "--quiet", VERIFIERS_REQUIREMENT),
            *("-e", str(REPO / "runtime"), "-e", f"{REPO}[collect]"),
        ],
    ]
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    with open(log, "w") as out:
        for step in steps:
            out.write(f"$ {' '.join(step)}\n")
            out.flush()
            try:
                done = subprocess.run(
                    step,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    timeout=max(deadline - time.monotonic(), 1),
                )
            except subprocess.TimeoutExpired:
                raise VerifiersVenvError(
                    f"building {venv} took over {BUILD_TIMEOUT_S:.0f}s; see {log}"
                ) from None
            if done.returncode != 0:
                tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:])
                raise VerifiersVenvError(f"`{' '.join(step)}` failed:\n{tail}")
    (venv / _COMPLETE).write_text(VERIFIERS_REQUIREMENT + "\n")


def verifiers_python() -> Path:
    """The python of the verifiers virtualenv, built on first use (minutes; then cached).

    Older ``verifiers-*`` virtualenvs of this cache are removed when a new one is built.
    """
    venv = venv_dir()
    CACHE.mkdir(parents=True, exist_ok=True)
    with file_lock(CACHE / "verifiers.lock", BUILD_TIMEOUT_S + 120):
        if not _usable(venv):
            for old in CACHE.glob("verifiers-*"):
                if old.is_dir() and old != venv:
                    shutil.rmtree(old, ignore_errors=True)
            _build(venv)
            if not _usable(venv):
                raise VerifiersVenvError(f"the freshly built virtualenv {venv} is unusable")
    return venv / "bin" / "python"


def server_env() -> dict[str, str]:
    """What a process of the virtualenv needs on its path: the test tasksets, this checkout."""
    return {"PYTHONPATH": os.pathsep.join((str(ENVS), SOURCES))}


def serve(python: Path, target: str) -> tuple[subprocess.Popen[bytes], str]:
    """``target`` served by ``python -m openenv_runtime.serve`` of the virtualenv, healthy;
    its process (stop it with ``servers.stop_process``) and URL."""
    port = free_port()
    process = spawn_server(target, port, python=str(python), env=server_env(), timeout=120)
    return process, f"http://127.0.0.1:{port}"


def verifiers_scores(
    python: Path, taskset: str, options: dict[str, Any], episodes: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """verifiers' own scores of played ``episodes`` (``vf_score.py`` in the virtualenv):
    each ``{"task_index", "messages", "stop_condition"}`` → ``{"reward", "rewards", "metrics"}``."""
    done = subprocess.run(
        [str(python), str(SCORER)],
        input=json.dumps({"taskset": taskset, "options": options, "episodes": episodes}),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ENVS)},
    )
    if done.returncode != 0:
        raise VerifiersVenvError(f"vf_score.py failed:\n{done.stderr[-4000:]}")
    scores: list[dict[str, Any]] = json.loads(done.stdout)
    return scores


def assistant_message(content: str, tool_calls: list[Any]) -> dict[str, Any]:
    """An assistant turn the client sent (``VerifiersToolCall``s with ids), as verifiers
    records it."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": json.dumps(c.arguments)} for c in tool_calls
        ]
    return message


if __name__ == "__main__":
    started = time.monotonic()
    print(verifiers_python())
    print(f"ready in {time.monotonic() - started:.1f}s", file=sys.stderr)

"""The runtime, and a generated project, on a real Python 3.10 interpreter.

openenv-runtime declares ``requires-python >=3.10`` (trainers that import the client still
run 3.10), so its own tests, and the tests of a project ``openenv init`` writes, run here in
a 3.10 virtualenv with the runtime installed from this checkout (not editable). The CLI
itself needs 3.11 and is not installed there.

The interpreter: ``$OPENENV_PYTHON310``, else ``python3.10`` on PATH, else pyenv's. Without
one the tests skip, also in CI (saying so); a ``$OPENENV_PYTHON310`` that is not a 3.10 fails.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from openenv_cli.scaffold import render_project, write_project
from tests.support.release import REPO, fresh_venv, pip_env, run

pytestmark = pytest.mark.timeout(1200)

# The runtime's own tests (none of them imports the CLI).
RUNTIME_TESTS = [
    "tests/unit/test_models.py",
    "tests/unit/test_environment.py",
    "tests/unit/test_protocol.py",
    "tests/unit/test_adapter.py",
    "tests/unit/test_client.py",
    "tests/unit/test_server_settings.py",
    "tests/unit/test_redaction.py",
    "tests/unit/test_server_app.py",
    "tests/integration/test_client.py",
    "tests/integration/test_client_transport.py",
    "tests/unit/test_providers.py",
    "tests/integration/test_server_protocol.py",
    "tests/integration/test_server_sessions.py",
    "tests/integration/test_server_http.py",
    "tests/integration/test_server_limits.py",
    "tests/integration/test_server_auth.py",
    "tests/unit/test_inline_frames.py",
    "tests/integration/test_inline_frames.py",
]


def _is_310(python: str) -> bool:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print(sys.version_info[:2] == (3, 10))"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return False
    return out.stdout.strip() == "True"


def find_python310() -> str | None:
    pyenv_root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates = [
        os.environ.get("OPENENV_PYTHON310"),
        shutil.which("python3.10"),
        *sorted(glob.glob(f"{pyenv_root}/versions/3.10*/bin/python3.10"), reverse=True),
    ]
    return next((c for c in candidates if c and _is_310(c)), None)


@pytest.fixture(scope="module")
def venv310(tmp_path_factory: pytest.TempPathFactory) -> Path:
    python = find_python310()
    if python is None:
        # Not every machine can have one (Debian 12 ships none), so this skips even in CI,
        # unless OPENENV_PYTHON310 names an interpreter: then it must be a 3.10.
        if os.environ.get("OPENENV_PYTHON310"):
            pytest.fail(f"OPENENV_PYTHON310={os.environ['OPENENV_PYTHON310']} is not a Python 3.10")
        pytest.skip(
            "no Python 3.10 interpreter here, so the runtime's 3.10 run is skipped "
            "(set OPENENV_PYTHON310, or install 3.10, e.g. with pyenv)"
        )
    bin_dir = fresh_venv(tmp_path_factory.mktemp("py310") / "venv", python)
    run(
        [
            bin_dir / "pip",
            "install",
            "--quiet",
            REPO / "runtime",
            "pytest>=8",
            "pytest-timeout",
            "httpx",
        ],
        env=pip_env(),
        timeout=900,
    )
    return bin_dir


def test_runtime_tests_pass_on_python_310(venv310: Path) -> None:
    location = run(
        [venv310 / "python", "-c", "import openenv_runtime, sys; print(openenv_runtime.__file__)"],
        env=pip_env(),
    )
    assert str(venv310.parent) in location  # the installed runtime, not the checkout
    out = run(
        [venv310 / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *RUNTIME_TESTS],
        cwd=REPO,
        env=pip_env(),
        timeout=900,
    )
    assert " passed" in out and " failed" not in out


def test_generated_project_passes_its_tests_on_python_310(venv310: Path, tmp_path: Path) -> None:
    project = tmp_path / "py310_env"
    write_project(render_project("py310_env"), project)
    env = pip_env()
    run([venv310 / "pip", "install", "--quiet", f"{project}[test]"], env=env, timeout=600)
    out = run(
        [venv310 / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project, env=env
    )
    assert "4 passed" in out

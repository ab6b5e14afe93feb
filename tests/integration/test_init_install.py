"""`pip install -e .` of a freshly generated project prints no setuptools note box.

The project folder is itself the package, which setuptools installs through an import finder
and then boxes a note about folders named like the package; the generated build backend
(`_build/quiet_setuptools.py`) leaves that note out. Each install goes into a fresh
virtualenv (`pip --python`), by a pip that shows what a build backend warns (recent pips do:
this one, else a current pip installed for the test). As a control, the same project built
by plain `setuptools.build_meta` must show the box, so the check cannot pass by not looking.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(900)

REPO = Path(__file__).resolve().parents[2]
NOTE = "Editable installation"
BOX = "*" * 40


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def pip(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """A pip that shows what a build backend warns: the one running, else a current one."""
    probe = "from pip._vendor.pyproject_hooks import BuildBackendWarning"
    if (
        subprocess.run([sys.executable, "-c", probe], capture_output=True, check=False).returncode
        == 0
    ):
        return [sys.executable, "-m", "pip"]
    tools = tmp_path_factory.mktemp("pip") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(tools)], check=True)
    python = str(tools / "bin" / "python")
    upgrade = [python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"]
    subprocess.run(upgrade, env=_env(), timeout=600, check=True)
    return [python, "-m", "pip"]


def _install(pip: list[str], project: Path, venv: Path, *args: str) -> str:
    """Install ``project`` into a new virtualenv at ``venv``; pip's whole output."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    done = subprocess.run(
        [
            *pip,
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--no-deps",
            *args,
            str(project),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    return output


def _origin(venv: Path, module: str) -> str:
    done = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            f"import importlib.util as u; s = u.find_spec({module!r}); print(s and s.origin)",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=venv,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """`openenv init my_env`, as a user runs it (this checkout's CLI)."""
    checkout = os.pathsep.join(str(p) for p in (REPO, REPO / "runtime"))
    subprocess.run(
        [sys.executable, "-m", "openenv_cli", "init", "my_env", "--output-dir", str(tmp_path)],
        capture_output=True,
        check=True,
        env={**os.environ, "PYTHONPATH": checkout},
    )
    return tmp_path / "my_env"


def test_editable_install_prints_no_note_box(pip: list[str], project: Path, tmp_path: Path) -> None:
    output = _install(pip, project, tmp_path / "venv", "-e")
    assert NOTE not in output and BOX not in output, output
    assert "flat-layout" not in output, output
    # the package is the project folder itself, installed in place
    assert _origin(tmp_path / "venv", "my_env") == str(project / "__init__.py")
    assert _origin(tmp_path / "venv", "quiet_setuptools") == "None"  # the backend is not installed


def test_plain_setuptools_shows_the_box(pip: list[str], project: Path, tmp_path: Path) -> None:
    """The control: without the generated backend, the same install prints the note."""
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text()
    assert 'build-backend = "quiet_setuptools"' in text
    text = text.replace(
        'build-backend = "quiet_setuptools"', 'build-backend = "setuptools.build_meta"'
    )
    pyproject.write_text(text.replace('backend-path = ["_build"]\n', ""))
    output = _install(pip, project, tmp_path / "venv", "-e")
    assert NOTE in output and BOX in output, output


def test_a_regular_install_ships_only_the_package(
    pip: list[str], project: Path, tmp_path: Path
) -> None:
    """What the image's `pip install .` does: the backend folder stays out of the wheel."""
    output = _install(pip, project, tmp_path / "venv")
    assert NOTE not in output, output
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    installed = sorted(p.relative_to(site).as_posix() for p in (site / "my_env").rglob("*.py"))
    assert installed == [
        "my_env/__init__.py",
        "my_env/client.py",
        "my_env/models.py",
        "my_env/server/__init__.py",
        "my_env/server/app.py",
        "my_env/server/my_env_environment.py",
    ]
    assert not list(site.glob("quiet_setuptools*")) and not (site / "_build").exists()

"""AutoEnv installs a Space's package only with consent: for real, from a local git "Hub".

The Hub endpoint is ``HF_ENDPOINT=file://...``, where a git repository stands in for the
Space ``org/tiny-env`` (pip installs ``git+file://.../spaces/org/tiny-env``). Everything runs in
a throwaway virtualenv that sees this interpreter's packages (this virtualenv's, not the base
Python's, which on a fresh machine has none of the runtime's dependencies), so nothing is
installed here.
"""

from __future__ import annotations

import os
import site
import subprocess
import venv
from pathlib import Path

import pytest

import openenv_runtime

# The throwaway virtualenv sees the base interpreter's packages; this puts the code under test first.
RUNTIME_ROOT = Path(openenv_runtime.__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(600)

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "openenv-tiny_env"
version = "0.1.0"

[tool.setuptools]
packages = ["tiny_env"]
"""
CLIENT = """\
from openenv_runtime import GenericEnvClient


class TinyEnv(GenericEnvClient):
    pass
"""
PROBE = """\
import sys
from openenv_runtime.auto import AutoEnv

try:
    print("INSTALLED", AutoEnv._install_from_hub("org/tiny-env", trust_remote_code=sys.argv[1] == "yes"))
except ValueError as exc:
    print("REFUSED", str(exc).splitlines()[0])
print("FOUND", AutoEnv.get_env_info("tiny")["env_class"] if "--check" in sys.argv else "")
"""


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hub")
    repo = root / "spaces" / "org" / "tiny-env"
    (repo / "tiny_env").mkdir(parents=True)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "tiny_env" / "__init__.py").write_text("")
    (repo / "tiny_env" / "client.py").write_text(CLIENT)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "space")
    return root


@pytest.fixture()
def python(tmp_path: Path) -> Path:
    venv.create(tmp_path / "venv", with_pip=True)
    python = tmp_path / "venv" / "bin" / "python"
    own = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # After its own site-packages (where pip installs), this interpreter's: a .pth line that
    # starts with "import" is run at start-up, and addsitedir also reads that folder's .pth files.
    lines = [f"import site; site.addsitedir({folder!r})" for folder in site.getsitepackages()]
    (Path(own) / "zz_parent_site.pth").write_text("\n".join(lines) + "\n")
    return python


def _run(python: Path, hub: Path, *args: str, trust_env: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OPENENV_TRUST_REMOTE_CODE"}
    env["HF_ENDPOINT"] = hub.as_uri()
    env["PYTHONPATH"] = str(RUNTIME_ROOT)
    env["PATH"] = os.pathsep.join([str(python.parent), "/usr/bin", "/bin"])  # the venv's pip, no uv
    if trust_env is not None:
        env["OPENENV_TRUST_REMOTE_CODE"] = trust_env
    done = subprocess.run(
        [str(python), "-c", PROBE, *args],
        env=env,
        stdin=subprocess.DEVNULL,  # no terminal: nobody to ask
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _installed(python: Path) -> bool:
    probe = "import importlib.util as u; print(u.find_spec('tiny_env') is not None)"
    return (
        subprocess.run(
            [str(python), "-c", probe], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "True"
    )


def test_without_consent_nothing_is_installed(hub: Path, python: Path) -> None:
    out = _run(python, hub, "no")
    assert "REFUSED Installation cancelled for org/tiny-env" in out
    assert not _installed(python)


def test_with_consent_the_space_package_is_installed_and_found(hub: Path, python: Path) -> None:
    out = _run(python, hub, "yes", "--check")
    assert "FOUND TinyEnv" in out
    assert "INSTALLED openenv-tiny" in out.replace("openenv_tiny", "openenv-tiny")
    assert _installed(python)


def test_the_environment_variable_is_consent_too(hub: Path, python: Path) -> None:
    assert "FOUND TinyEnv" in _run(python, hub, "no", "--check", trust_env="1")

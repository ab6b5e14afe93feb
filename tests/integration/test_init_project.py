"""The promise of `openenv init`, kept in a fresh virtualenv with only the CLI installed.

The runtime and the CLI are installed from this checkout as wheels (not editable), which
proves the wheel ships the templates. Then, exactly as a user would:
`openenv init my_env && cd my_env && pip install -e . && pytest`, `openenv validate`, and
`openenv serve` stepped by the generated client. No uv anywhere.

The virtualenv is cached under .cache/test-venvs/, keyed by the sources it was built from.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_runtime.testing import free_port

pytestmark = pytest.mark.timeout(1200)

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "test-venvs"
SOURCES = (
    "runtime/openenv_runtime",
    "runtime/pyproject.toml",
    "openenv_cli",
    "templates",
    "pyproject.toml",
)


def _source_key() -> str:
    digest = hashlib.sha256(sys.version.encode())
    for source in SOURCES:
        path = REPO / source
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if "__pycache__" in file.parts or file.suffix == ".pyc":
                continue
            digest.update(file.relative_to(REPO).as_posix().encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def run(
    args: list[str], cwd: Path, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (
        f"{' '.join(map(str, args))} exited {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    )
    return proc


def _clean_env(venv: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "PIP_REQUIRE", "VIRTUAL_ENV", "OPENENV_"))
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with the runtime and the CLI installed from this checkout as wheels."""
    key = _source_key()
    venv = CACHE / f"init-{key}"
    if (venv / ".complete").is_file():
        return venv
    CACHE.mkdir(parents=True, exist_ok=True)
    for old in CACHE.glob("init-*"):
        shutil.rmtree(old, ignore_errors=True)
    work = tmp_path_factory.mktemp("venv-build")
    env = _clean_env(venv)
    run([sys.executable, "-m", "venv", str(venv)], work, env)
    run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            str(REPO / "runtime"),
            str(REPO),
        ],
        work,
        env,
        timeout=900,
    )
    (venv / ".complete").write_text(key)
    return venv


@pytest.fixture(scope="module")
def project(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """`openenv init my_env && cd my_env && pip install -e .` in the fresh virtualenv."""
    work = tmp_path_factory.mktemp("user")
    env = _clean_env(venv)
    run(["openenv", "init", "my_env"], work, env)
    project = work / "my_env"
    run(["pip", "install", "--quiet", "-e", ".[test]"], project, env, timeout=600)
    try:
        yield project
    finally:
        # keep the cached virtualenv as it was: only the runtime and the CLI
        subprocess.run(
            ["pip", "uninstall", "--yes", "--quiet", "my_env"],
            cwd=work,
            env=env,
            capture_output=True,
            timeout=120,
        )


def test_cli_is_installed_from_wheels_with_templates(venv: Path, tmp_path: Path) -> None:
    env = _clean_env(venv)
    out = run(
        [
            "python",
            "-c",
            "import json, openenv_cli.scaffold as s, openenv_runtime as r; "
            "print(json.dumps([str(s.template_root()), r.__file__]))",
        ],
        tmp_path,
        env,
    ).stdout
    templates, runtime = json.loads(out)
    assert str(venv) in templates and templates.endswith("openenv_cli/templates")
    assert str(venv) in runtime  # not the checkout
    assert not templates.startswith(str(REPO / "templates"))  # the copy inside the wheel
    assert "openenv" in run(["openenv", "--version"], tmp_path, env).stdout
    uv = run(
        ["python", "-c", "import shutil; print(shutil.which('uv'))"], tmp_path, env
    ).stdout.strip()
    assert uv == "None" or not uv.startswith(str(venv))


def test_generated_tests_pass(venv: Path, project: Path) -> None:
    proc = run(["pytest", "-q", "-p", "no:cacheprovider"], project, _clean_env(venv), timeout=300)
    assert "4 passed" in proc.stdout


def test_generated_tests_pass_when_the_environment_turns_async(
    venv: Path, project: Path, tmp_path: Path
) -> None:
    """The README invites `async def step`: the generated tests must keep passing."""
    copy = tmp_path / "my_env"
    shutil.copytree(project, copy, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    module = copy / "server" / "my_env_environment.py"
    source = module.read_text()
    for method in ("reset", "step"):
        assert f"    def {method}(" in source
        source = source.replace(f"    def {method}(", f"    async def {method}(")
    module.write_text(source)
    env = _clean_env(venv)
    env["PYTHONPATH"] = str(tmp_path)  # the copy, not the installed project
    proc = run(["pytest", "-q", "-p", "no:cacheprovider"], copy, env, timeout=300)
    assert "4 passed" in proc.stdout


def test_validate_passes(venv: Path, project: Path) -> None:
    env = _clean_env(venv)
    proc = run(["openenv", "validate", "--json"], project, env, timeout=300)
    report = json.loads(proc.stdout)
    assert report["ok"] is True
    statuses = {c["name"]: c["status"] for c in report["checks"]}
    assert statuses["smoke.episode"] == "pass" and statuses["contract"] == "warn"
    run(["openenv", "validate", "--update-lock", "--no-smoke"], project, env, timeout=300)
    assert (project / "openenv.lock.json").is_file()
    assert (
        json.loads(run(["openenv", "validate", "--json"], project, env, timeout=300).stdout)[
            "summary"
        ]["warn"]
        == 0
    )


def test_serve_and_step_with_the_generated_client(venv: Path, project: Path) -> None:
    env = _clean_env(venv)
    port = free_port()
    has_serve = "serve" in run(["openenv", "--help"], project, env).stdout
    command = (
        ["openenv", "serve", "--port", str(port)]
        if has_serve
        else ["python", "-m", "openenv_runtime.serve", "my_env.server.app:app", "--port", str(port)]
    )
    server = subprocess.Popen(
        command,
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, f"the server exited:\n{server.stdout.read()}"
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/health", timeout=2
                ) as response:
                    if json.loads(response.read())["status"] == "healthy":
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the server did not come up"
            time.sleep(0.2)
        script = textwrap.dedent(f"""
            import json
            from my_env import MyAction, MyEnv
            with MyEnv(base_url="http://127.0.0.1:{port}").sync() as env:
                first = env.reset()
                result = env.step(MyAction(message="Hello"))
                state = env.state()
            print(json.dumps({{"echo": result.observation.echoed_message, "reward": result.reward,
                              "done": result.done, "steps": state.step_count, "chars": state.total_characters}}))
        """)
        out = run(["python", "-c", script], project.parent, env, timeout=60).stdout
        assert json.loads(out.strip().splitlines()[-1]) == {
            "echo": "Hello",
            "reward": 0.5,
            "done": False,
            "steps": 1,
            "chars": 5,
        }
    finally:
        if server.poll() is None:
            os.killpg(server.pid, 15)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, 9)
                server.wait()

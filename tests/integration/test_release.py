"""A release, end to end, as a new user on a fresh machine would meet it.

Both distributions are built (``python -m build``: sdist, then the wheel from the sdist) and
checked (``twine check --strict``); a local package index (pypiserver on 127.0.0.1) serves
exactly those files, and the normal registry is the extra index for everything else.

Then, in fresh virtualenvs:
- the CLI is installed from the index (``pip install openenv-toolkit``), ``openenv --version``
  names both distributions, ``openenv init`` writes a project;
- in a second virtualenv that has nothing of ours, ``pip install ".[test]"`` of that project
  resolves openenv-runtime from the index, and the project's own tests pass;
- ``openenv validate`` passes and ``openenv serve`` answers /health, and is stopped.
"""

from __future__ import annotations

import json
import re
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.support.release import (
    REGISTRY,
    REPO,
    background,
    build_distributions,
    free_port,
    fresh_venv,
    package_index,
    pip_env,
    run,
    wait_http,
    wheel_names,
)

pytestmark = pytest.mark.timeout(1800)


def _version() -> str:
    text = (REPO / "runtime/openenv_runtime/_version.py").read_text()
    match = re.search(r'__version__\s*=\s*"([^"]+)"', text)
    assert match is not None
    return match.group(1)


VERSION = _version()


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("release") / "dist"
    folder.mkdir()
    build_distributions(folder)
    return folder


def test_both_distributions_are_built_with_one_version_and_the_licence(dist: Path) -> None:
    names = sorted(p.name for p in dist.iterdir())
    assert names == sorted(
        [
            f"openenv_runtime-{VERSION}-py3-none-any.whl",
            f"openenv_runtime-{VERSION}.tar.gz",
            f"openenv_toolkit-{VERSION}-py3-none-any.whl",
            f"openenv_toolkit-{VERSION}.tar.gz",
        ]
    )
    licence = (REPO / "LICENSE").read_text()
    for wheel in dist.glob("*.whl"):
        stem = wheel.name.split("-py3")[0]
        inside = wheel_names(wheel)
        assert f"{stem}.dist-info/licenses/LICENSE" in inside, wheel.name
        with zipfile.ZipFile(wheel) as archive:
            metadata = archive.read(f"{stem}.dist-info/METADATA").decode()
            shipped = archive.read(f"{stem}.dist-info/licenses/LICENSE").decode()
        assert "License-Expression: BSD-3-Clause" in metadata
        assert shipped == licence
        if stem.startswith("openenv_toolkit"):
            assert f"Requires-Dist: openenv-runtime=={VERSION}" in metadata
            assert "openenv_cli/templates/project/pyproject.toml.jinja" in inside
            assert "openenv_cli/templates/licenses/MIT.jinja" in inside
            assert "openenv_cli/_version.py" in inside
    for sdist in dist.glob("*.tar.gz"):
        with tarfile.open(sdist) as archive:
            members = archive.getnames()
        root = sdist.name.removesuffix(".tar.gz")
        assert f"{root}/LICENSE" in members, sdist.name
        stray = (f"{root}/tests/", f"{root}/.venv/", f"{root}/benchmarks/", f"{root}/.git/")
        assert not any(m.startswith(stray) for m in members), sdist.name


def test_fresh_virtualenv_round_trip(dist: Path, tmp_path: Path) -> None:
    env = pip_env()
    with package_index(dist) as index:
        sources = ["--index-url", index, "--extra-index-url", REGISTRY]

        # 1. The CLI, from the index.
        cli = fresh_venv(tmp_path / "cli-venv")
        run([cli / "pip", "install", "--quiet", *sources, "openenv-toolkit"], env=env, timeout=900)
        version = run([cli / "openenv", "--version"], env=env)
        assert f"openenv-toolkit {VERSION}" in version and f"openenv-runtime {VERSION}" in version
        assert "openenv-toolkit" in run([cli / "python", "-m", "openenv_cli", "--version"], env=env)
        work = tmp_path / "work"
        work.mkdir()
        run([cli / "openenv", "init", "demo_env", "--license", "MIT"], cwd=work, env=env)
        project = work / "demo_env"

        # 2. The project alone, in a virtualenv with nothing of ours: the runtime comes from
        #    the index.
        alone = fresh_venv(tmp_path / "project-venv")
        run(
            [alone / "pip", "install", "--quiet", *sources, ".[test]"],
            cwd=project,
            env=env,
            timeout=900,
        )
        installed = json.loads(run([alone / "pip", "list", "--format", "json"], env=env))
        versions = {p["name"].lower().replace("_", "-"): p["version"] for p in installed}
        assert versions["openenv-runtime"] == VERSION and versions["demo-env"] == "0.1.0"
        assert "openenv-toolkit" not in versions
        tests = run(
            [alone / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project, env=env
        )
        assert "4 passed" in tests

    # 3. The CLI checks and serves the project (the index is no longer needed).
    report = json.loads(
        run([cli / "openenv", "validate", "--json"], cwd=project, env=env, timeout=300)
    )
    assert report["ok"] is True, report
    port = free_port()
    with background(
        [cli / "openenv", "serve", "--port", str(port)],
        cwd=project,
        env=env,
        log=tmp_path / "serve.log",
    ) as server:
        health = json.loads(
            wait_http(f"http://127.0.0.1:{port}/health", timeout=60, process=server)
        )
        assert health["status"] == "healthy"
    assert server.returncode is not None  # stopped

"""The runtime bundle that `build` and `push` stage is a real, pip-installable project, and it is
made the same way whether the CLI runs from an editable install or from a wheel."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from openenv_cli.image.context import stage_context as stage
from openenv_cli.image.runtime_bundle import runtime_version
from openenv_cli.image.selection import RUNTIME_DIR
from openenv_cli.scaffold import render_project, write_project

REPO_ROOT = Path(__file__).resolve().parents[2]


def _run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{command}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


def test_staged_bundle_pip_installs_into_a_fresh_venv(tmp_path: Path) -> None:
    project = tmp_path / "my_env"
    write_project(render_project("my_env"), project)
    staged = stage(project, tmp_path / "context")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    # As in the image: pip builds the bundle in an isolated environment (fetching its build
    # backend from the package index). The dependencies are checked from the metadata below.
    _run(
        [str(python), "-m", "pip", "install", "--no-deps", "-q", str(staged.root / RUNTIME_DIR)],
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )

    probe = textwrap.dedent(
        """
        import importlib.metadata as m, importlib.util as u, json, pathlib
        spec = u.find_spec("openenv_runtime")
        root = pathlib.Path(spec.origin).parent
        print(json.dumps({
            "version": m.version("openenv-runtime"),
            "requires": sorted(m.requires("openenv-runtime") or []),
            "root": str(root),
            "files": sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                            if p.is_file() and "__pycache__" not in p.parts),
        }))
        """
    )
    installed = json.loads(_run([str(python), "-c", probe], cwd=tmp_path).stdout)
    assert installed["version"] == runtime_version()
    # the same requirements; an extra's marker may come back restated (`extra == "mcp" and extra == "mcp"`)
    assert _requirement_keys(installed["requires"]) == _requirement_keys(
        metadata.requires("openenv-runtime") or []
    )
    assert Path(installed["root"]).is_relative_to(venv)
    bundled = sorted(
        p.relative_to(staged.root / RUNTIME_DIR / "openenv_runtime").as_posix()
        for p in (staged.root / RUNTIME_DIR / "openenv_runtime").rglob("*")
        if p.is_file()
    )
    assert installed["files"] == bundled  # static web assets included

    # The installed copy imports and serves (its dependencies borrowed from this interpreter).
    site = next(
        p for p in map(Path, sys.path) if p.name == "site-packages" and (p / "fastapi").is_dir()
    )
    check = "import openenv_runtime, pathlib; print(pathlib.Path(openenv_runtime.__file__).parent); from openenv_runtime import create_app"
    where = _run(
        [str(python), "-c", check], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(site)}
    ).stdout.strip()
    assert Path(where).is_relative_to(venv)


def test_bundle_from_a_wheel_style_install(tmp_path: Path) -> None:
    """Files in site-packages and metadata in a .dist-info, as a wheel installs them."""
    import openenv_runtime

    site = tmp_path / "site"
    shutil.copytree(
        Path(openenv_runtime.__file__).parent,
        site / "openenv_runtime",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (site / "openenv_runtime" / "_version.py").write_text('__version__ = "9.8.7"\n')
    dist_info = site / "openenv_runtime-9.8.7.dist-info"
    dist_info.mkdir()
    meta = metadata.distribution("openenv-runtime").read_text("METADATA") or ""
    meta = "\n".join(
        "Version: 9.8.7" if line.startswith("Version:") else line for line in meta.splitlines()
    )
    meta = meta.replace("\n\n", '\nRequires-Dist: extra-only>=1; extra == "test"\n\n', 1)
    (dist_info / "METADATA").write_text(meta + "\n")
    (dist_info / "RECORD").write_text("")
    (site / "openenv_runtime" / "wheel_marker.txt").write_text("from the wheel\n")

    dest = tmp_path / "out"
    code = (
        "import sys; from openenv_cli.image.runtime_bundle import write_runtime_bundle, _runtime_source; "
        "print(_runtime_source()); write_runtime_bundle(sys.argv[1])"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO_ROOT)])}
    source = _run([sys.executable, "-c", code, str(dest)], env=env, cwd=tmp_path).stdout.strip()
    assert Path(source) == site / "openenv_runtime"

    bundle = dest / RUNTIME_DIR
    data = tomllib.loads((bundle / "pyproject.toml").read_text())
    assert data["project"]["version"] == "9.8.7"
    assert data["project"]["optional-dependencies"]["test"] == ['extra-only>=1; extra == "test"']
    plain = [r for r in metadata.requires("openenv-runtime") or [] if "extra ==" not in r]
    assert sorted(str(Requirement(r)) for r in data["project"]["dependencies"]) == sorted(
        str(Requirement(r)) for r in plain
    )
    assert (bundle / "openenv_runtime" / "wheel_marker.txt").read_text() == "from the wheel\n"
    assert "wheel_marker.txt" in data["tool"]["setuptools"]["package-data"]["openenv_runtime"]


def _requirement_keys(requirements: list[str]) -> set[tuple[str, str, frozenset[str]]]:
    """(name, specifier, extras its marker names) of each requirement."""
    keys = set()
    for raw in requirements:
        req = Requirement(raw)
        extras = frozenset(re.findall(r"extra == ['\"]([^'\"]+)['\"]", str(req.marker or "")))
        keys.add((req.name, str(req.specifier), extras))
    return keys

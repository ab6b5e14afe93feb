"""A missing optional package is named with the extra that brings it (openenv_cli.extras)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openenv_cli.extras import install_hint
from tests.support.servers import REPO

PYTHONPATH = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)


def _without(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``openenv ARGS`` in a process where ``module`` cannot be imported."""
    code = (
        f"import sys; sys.modules[{module!r}] = None; "
        "from openenv_cli.main import main; main(sys.argv[1:])"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": PYTHONPATH, "COLUMNS": "200"},
    )


def test_the_hint_names_the_extra_from_the_metadata() -> None:
    assert install_hint("pyarrow", "collect") == "pip install 'openenv-toolkit[collect]'"
    assert install_hint("pyarrow.parquet") == "pip install 'openenv-toolkit[collect]'"
    through_runtime = install_hint("openai", "collect")  # openenv-runtime[llm], in [collect]
    assert through_runtime is not None and through_runtime.startswith(
        "pip install 'openenv-toolkit[collect]'"
    )
    several = install_hint("matplotlib", "collect")  # in [bench] too: the command's first
    assert several is not None and several.startswith("pip install 'openenv-toolkit[collect]'")
    assert "(also in [bench]" in several
    assert install_hint("surely_no_such_package") is None


def test_collect_without_pyarrow_names_the_collect_extra(tmp_path: Path) -> None:
    done = _without(
        "pyarrow", "collect", "http://127.0.0.1:9", "--policy", "random", "-o", str(tmp_path / "o")
    )
    assert done.returncode == 1
    assert "'pyarrow'" in done.stderr and "pip install 'openenv-toolkit[collect]'" in done.stderr
    assert "report it" not in done.stderr and not (tmp_path / "o").exists()


def test_a_package_missing_deep_inside_a_command_names_its_extra(tmp_path: Path) -> None:
    report = {"success_threshold": 1.0, "ks": [1], "pass_at_k": {}}
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(report))
    done = _without(
        "scipy", "eval", "--compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")
    )
    assert done.returncode == 1
    assert "'scipy'" in done.stderr and "openenv-toolkit[collect]" in done.stderr
    assert "report it" not in done.stderr


def test_the_rollouts_without_aiohttp_name_the_llm_extra() -> None:
    code = (
        "import sys; sys.modules['aiohttp'] = None\n"
        "try:\n    import openenv_runtime.rollouts\n"
        "except ModuleNotFoundError as e:\n    print(e.name, '|', e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": PYTHONPATH},
    )
    assert done.stdout.startswith("aiohttp |") and "openenv-runtime[llm]" in done.stdout


@pytest.mark.parametrize("module", ["jsf"])
def test_random_actions_without_jsf_name_the_collect_extra(module: str, tmp_path: Path) -> None:
    done = _without(module, "eval", "http://127.0.0.1:9", "--policy", "random", "-o", str(tmp_path))
    assert done.returncode == 1 and "openenv-toolkit[collect]" in done.stderr

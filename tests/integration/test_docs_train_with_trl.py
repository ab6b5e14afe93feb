"""docs/train-with-trl.md: every code block runs here or is listed with the reason it does not."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.servers import REPO

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

DOC = REPO / "docs" / "train-with-trl.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
SKIPPED = {
    "pip install torch==2.13.0            # first: this pin takes the CPU build": (
        "installs packages; the train extra holds the same set"
    ),
    "from openenv_runtime.rollouts import environment_factory": (
        "a fragment (model, args, dataset from the example above); "
        "tests/integration/test_trl_training.py runs environment_factory in GRPOTrainer"
    ),
    "from trl.generation.vllm_client import VLLMClient": (
        "needs vLLM and a GPU; tests/unit/test_rollouts_service.py sends these calls to a "
        "stand-in that records them"
    ),
    "openenv capture --upstream http://127.0.0.1:8000/v1 --port 8300": (
        "a server until Ctrl-C; tests/integration/test_capture_processes.py runs it"
    ),
}


def blocks() -> list[tuple[str, str]]:
    return BLOCK.findall(DOC.read_text(encoding="utf-8"))


def test_every_block_is_accounted_for() -> None:
    for _, code in blocks():
        first = code.splitlines()[0]
        assert first in SKIPPED or code.startswith(("from ", "import ")), first


@pytest.mark.parametrize(
    "index", [i for i, (_, code) in enumerate(blocks()) if code.splitlines()[0] not in SKIPPED]
)
def test_block_runs(index: int, tmp_path: Path) -> None:
    language, code = blocks()[index]
    assert language == "python"
    needs = ["openai", "httpx"] + (["trl", "torch"] if "trl" in code else [])
    for module in needs:
        try:
            __import__(module)
        except ImportError:
            if os.environ.get("CI"):
                raise
            pytest.skip(f'needs {module}: pip install -e ".[train]"')
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    path = os.pathsep.join([str(REPO / "runtime"), str(REPO)])  # this checkout, not an install
    env = {**os.environ, "PYTHONPATH": path, "TRL_EXPERIMENTAL_SILENCE": "1"}
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    if "trainer.train()" in code:
        assert "trained 2 steps" in out.stdout

"""Make the project the committed study ran on, and run the study on it.

    python benchmarks/scale/study_project.py                      # local,docker,swarm,slurm
    python benchmarks/scale/study_project.py --infras local --grid 32,128

The project is what ``openenv init study_env`` writes, with two edits so the step is the
scaling study's workload: the action gets a ``wait`` field (seconds) and the step awaits
``asyncio.sleep(wait)``; each worker holds 16,384 sessions (the template's default is 100), so
the machine, not the setting, bounds the batch. Then ``openenv bench --study`` runs in it and writes ``benchmarks/scale/study/study.{md,json,png}``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
SESSIONS = 16_384  # sessions a worker holds


def make_project(parent: Path, name: str = "study_env") -> Path:
    subprocess.run(
        [sys.executable, "-m", "openenv_cli.main", "init", name], cwd=parent, check=True,
        capture_output=True,
    )  # fmt: skip
    root = parent / name
    models = root / "models.py"
    models.write_text(
        re.sub(
            r"(class \w+Action\(Action\):\n    \"\"\"[^\n]*\"\"\"\n\n    message: str = Field\([^\n]*\)\n)",
            r'\1    wait: float = Field(0.0, ge=0, le=60, description="Seconds the step waits.")\n',
            models.read_text(),
        )
    )
    environment = next((root / "server").glob("*_environment.py"))
    text = environment.read_text().replace(
        "from typing import Any\n", "import asyncio\nfrom typing import Any\n"
    )
    text = text.replace("    def step(self, action", "    async def step(self, action")
    text = text.replace(
        "        self._state.step_count += 1\n",
        "        if action.wait > 0:\n            await asyncio.sleep(action.wait)\n"
        "        self._state.step_count += 1\n",
        1,
    )
    environment.write_text(text)
    manifest = root / "openenv.yaml"
    manifest.write_text(
        re.sub(
            r"^  (?:# )?max_concurrent_envs: \d+",
            f"  max_concurrent_envs: {SESSIONS}",
            manifest.read_text(),
            count=1,
            flags=re.MULTILINE,
        )
    )
    sessions = (yaml.safe_load(manifest.read_text()).get("server") or {}).get("max_concurrent_envs")
    if (
        "wait" not in models.read_text()
        or "await asyncio.sleep" not in text
        or sessions != SESSIONS
    ):
        raise RuntimeError("the template changed: the project could not be given a waiting step")
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--infras", default="local,docker,swarm,slurm")
    parser.add_argument("--grid", default="32,128,512")
    parser.add_argument("--out", type=Path, default=HERE / "study")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="study-project-") as tmp:
        project = make_project(Path(tmp))
        subprocess.run(
            [sys.executable, "-m", "openenv_cli.main", "bench", "--study", options.infras,
             "--requests-grid", options.grid, "--wait-grid", "1", "--reps", "1",
             "--timeout", "60", "--processes", "2", "--output-dir", str(options.out.resolve())],
            cwd=project, check=False,
        )  # fmt: skip


if __name__ == "__main__":
    main()

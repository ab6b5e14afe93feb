"""Footprint of our runtime beside the reference OpenEnv: install size, import time, idle memory.

Each side gets a fresh virtualenv holding only what an environment server needs
(``pip install ./runtime`` here, ``pip install openenv==0.10.0`` for the reference). Then:

* install size: bytes under the virtualenv's site-packages (pip itself excluded);
* import time: median wall time of ``import openenv_runtime`` / ``import openenv.core`` in
  fresh interpreters (5 runs);
* idle memory: resident memory (VmRSS from /proc) of a server of the same small echo
  environment, healthy and idle, with its web page off.

    python benchmarks/server/footprint.py        # table, and JSON in benchmarks/server/footprint.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from openenv_runtime.testing import free_port  # noqa: E402
from tests.support.reference import OPENENV_REQUIREMENT, SCRIPTS_DIR  # noqa: E402

OUR_APP = """
from uuid import uuid4
from openenv_runtime import Action, Environment, Observation, State, create_app
from openenv_runtime.server import ServerSettings

class PlainAction(Action):
    message: str

class PlainObservation(Observation):
    echoed_message: str = ""

class PlainEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True
    def __init__(self):
        self._state = State(episode_id=str(uuid4()))
    def reset(self, seed=None, episode_id=None, **kw):
        return PlainObservation(echoed_message="ready")
    def step(self, action, **kw):
        return PlainObservation(echoed_message=action.message)
    @property
    def state(self):
        return self._state

app = create_app(PlainEnvironment, PlainAction, PlainObservation, settings=ServerSettings(web_interface=False))
"""


def _venv(path: Path, requirement: str) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    python = path / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", requirement],
        check=True,
    )
    return python


def _site_size(venv: Path) -> int:
    total = 0
    for site in venv.glob("lib/python*/site-packages"):
        for entry in site.iterdir():
            if entry.name.startswith(("pip", "_distutils_hack", "setuptools")):
                continue
            files = [entry] if entry.is_file() else [p for p in entry.rglob("*") if p.is_file()]
            total += sum(p.stat().st_size for p in files)
    return total


def _import_seconds(python: Path, module: str, runs: int = 5) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    times = [
        float(
            subprocess.run(
                [str(python), "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(runs)
    ]
    return statistics.median(times)


def _idle_rss_kb(cmd: list[str], port: int, cwd: Path) -> int:
    env = dict(os.environ, ENABLE_WEB_INTERFACE="false", PYTHONPATH=str(cwd))
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
                break
            except OSError:
                time.sleep(0.2)
        time.sleep(2)
        status = Path(f"/proc/{proc.pid}/status").read_text()
        return int(
            next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS"))
        )
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--json", type=Path, default=ROOT / "benchmarks" / "server" / "footprint.json"
    )
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="openenv-footprint-") as tmp:
        work = Path(tmp)
        (work / "our_app.py").write_text(OUR_APP)
        shutil.copy(SCRIPTS_DIR / "ref10_server.py", work / "ref_app.py")
        sides = {
            "openenv-runtime": (str(ROOT / "runtime"), "openenv_runtime"),
            "openenv 0.10.0": (OPENENV_REQUIREMENT, "openenv.core"),
        }
        for name, (requirement, module) in sides.items():
            venv = work / name.replace(" ", "-")
            python = _venv(venv, requirement)
            port = free_port()
            if module == "openenv_runtime":
                cmd = [
                    str(python),
                    "-m",
                    "uvicorn",
                    "our_app:app",
                    "--port",
                    str(port),
                    "--log-level",
                    "warning",
                ]
            else:
                cmd = [str(python), "ref_app.py", "--port", str(port), "--kind", "plain"]
            results[name] = {
                "install_mb": round(_site_size(venv) / 1e6, 1),
                "import_s": round(_import_seconds(python, module), 3),
                "idle_rss_mb": round(_idle_rss_kb(cmd, port, work) / 1024, 1),
            }
    ours, ref = results["openenv-runtime"], results["openenv 0.10.0"]
    print(f"{'':<22} {'openenv-runtime':>16} {'openenv 0.10.0':>15} {'ratio':>7}")
    for key, label in (
        ("install_mb", "install size (MB)"),
        ("import_s", "import time (s)"),
        ("idle_rss_mb", "idle server RSS (MB)"),
    ):
        print(f"{label:<22} {ours[key]:>16} {ref[key]:>15} {ours[key] / ref[key]:>6.2f}x")
    args.json.write_text(
        json.dumps({"results": results, "machine": "2 shared cores"}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()

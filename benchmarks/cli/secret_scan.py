"""What the secret rules cost `openenv push` and `openenv build`: the file selection with the
content scan, against the same selection with the scan switched off.

    python benchmarks/cli/secret_scan.py                       # table; JSON to benchmarks/cli/secret_scan.json
    python benchmarks/cli/secret_scan.py --runs 7 --json /tmp/scan.json

Three projects: a fresh ``openenv init`` project; the same with 300 more Python files of
about 6 KiB; and this repository's own source (``openenv_cli/``, ``runtime/``, ``tests/``)
copied into a project. Each is selected ``--runs`` times each way, alternating, and the table
shows the fastest run (the least disturbed by other work on a shared machine) and the median.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

from openenv_cli.image import selection
from openenv_cli.image.selection import select_files
from openenv_cli.scaffold import render_project, write_project

HERE = Path(__file__).resolve().parents[2]


def _init(root: Path) -> Path:
    project = root / "my_env"
    write_project(render_project("my_env"), project)
    return project


def _grown(root: Path) -> Path:
    project = _init(root)
    body = "".join(
        f"def f{i}(x: int) -> int:\n    return x * {i}  # plain code\n\n" for i in range(120)
    )
    for i in range(300):
        path = project / "pkg" / f"module_{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    return project


def _this_repository(root: Path) -> Path:
    project = _init(root)
    for folder in ("openenv_cli", "runtime", "tests"):
        shutil.copytree(
            HERE / folder,
            project / "copy" / folder,
            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", ".venv"),
        )
    return project


PROJECTS: dict[str, Callable[[Path], Path]] = {
    "openenv init": _init,
    "init + 300 files": _grown,
    "this repository": _this_repository,
}


def _time(project: Path, scan: bool) -> float:
    started = time.perf_counter()
    if scan:
        select_files(project)
    else:
        with mock.patch.object(selection, "scan_file", lambda root, relative: None):
            select_files(project)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--json", type=Path, default=HERE / "benchmarks" / "cli" / "secret_scan.json"
    )
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, make in PROJECTS.items():
            project = make(Path(tmp) / label.replace(" ", "_"))
            picked = select_files(project)
            size = sum((project / f.source).stat().st_size for f in picked.files)
            runs: dict[str, list[float]] = {"with scan": [], "without": []}
            for _ in range(args.runs):
                runs["with scan"].append(_time(project, True))
                runs["without"].append(_time(project, False))
            rows.append(
                {
                    "project": label,
                    "files": len(picked.files),
                    "bytes": size,
                    "left_out_secret": len(picked.left_out_of("secret")),
                    "runs": runs,
                    "min_with": min(runs["with scan"]),
                    "min_without": min(runs["without"]),
                    "median_with": statistics.median(runs["with scan"]),
                    "median_without": statistics.median(runs["without"]),
                }
            )
    print(
        f"{'project':<18} {'files':>6} {'KiB':>7} {'scan min':>9} {'no scan':>9} {'median':>9}  flagged"
    )
    for row in rows:
        print(
            f"{row['project']:<18} {row['files']:>6} {row['bytes'] / 1024:>7.0f} "
            f"{row['min_with']:>8.3f}s {row['min_without']:>8.3f}s {row['median_with']:>8.3f}s  "
            f"{row['left_out_secret']}"
        )
    result = {"python": platform.python_version(), "machine": platform.machine(), "rows": rows}
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nJSON: {args.json}")


if __name__ == "__main__":
    main()

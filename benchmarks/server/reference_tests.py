"""How many of the reference OpenEnv's own protocol and environment tests pass on our runtime.

The reference's tests (``tests/core``, ``tests/test_core``, ``tests/envs``) and
environments (``envs/``) are copied from its repository at the pinned commit (found as
``tests/support/ref_snapshot.py`` says: ``OPENENV_REF_REPO``, the cache, or a fetch) into two
temporary folders (never into this repository). One copy runs as is in the virtualenv
with ``openenv==0.10.0``; the other is first ported by ``openenv migrate``'s import
rewriter (``openenv.core`` → ``openenv_runtime.compat``) and runs in this interpreter, where the
reference is not installed. The score is: of the tests that pass on the reference, the
share that also pass on ours.

    python benchmarks/server/reference_tests.py            # table, and JSON in benchmarks/server/reference_tests.json
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from openenv_cli.migrate import rewrite_python  # noqa: E402
from tests.support.ref_snapshot import SnapshotMissing, materialize, source  # noqa: E402
from tests.support.reference import openenv_python  # noqa: E402

SUITES = ["tests/core", "tests/test_core", "tests/envs"]
PYTEST_INI = """[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
markers =
    docker: needs docker
    network: needs network
    integration: integration
"""


def _ensure_test_tools(python: Path) -> None:
    """Our pytest version (test ids must match) and the reference environments' packages."""
    ours = importlib.metadata.version("pytest")
    probe = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m, pytest_asyncio, pytest_timeout, chess, reasoning_gym;"
            f"assert m.version('pytest') == {ours!r}",
        ],
        capture_output=True,
    )
    if probe.returncode != 0:
        requirements = ROOT / "tests" / "support" / "reference-envs.txt"
        tools = [f"pytest=={ours}", "pytest-asyncio", "pytest-timeout"]
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *tools, "-r", str(requirements)],
            check=True,
        )


def _prepare(dest: Path, port: bool) -> None:
    materialize(["envs", "tests"], dest)
    (dest / "pytest.ini").write_text(PYTEST_INI)
    if port:
        for path in dest.rglob("*.py"):
            text = path.read_text(encoding="utf-8", errors="replace")
            try:
                new, _ = rewrite_python(text)
            except Exception:
                continue
            if new != text:
                path.write_text(new, encoding="utf-8")


def _run(python: Path, folder: Path, junit: Path, timeout_s: float, suites: list[str]) -> None:
    cmd = [
        str(python),
        "-m",
        "pytest",
        *suites,
        "-q",
        "-p",
        "no:cacheprovider",
        "--timeout=60",
        "--continue-on-collection-errors",
        f"--junitxml={junit}",
        "-o",
        "addopts=",
    ]
    env = {
        "PYTHONPATH": str(folder),
        "PATH": "/usr/bin:/bin",
        "HOME": str(Path.home()),
        "NO_PROXY": "*",
    }
    subprocess.run(
        cmd,
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=timeout_s,
    )


def _outcomes(junit: Path) -> dict[str, str]:
    results: dict[str, str] = {}
    if not junit.exists():
        return results
    for case in ET.parse(junit).getroot().iter("testcase"):
        key = f"{case.get('classname')}::{case.get('name')}"
        tags = {child.tag for child in case}
        results[key] = (
            "failed"
            if tags & {"failure", "error"}
            else "skipped"
            if "skipped" in tags
            else "passed"
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--json", type=Path, default=ROOT / "benchmarks" / "server" / "reference_tests.json"
    )
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument(
        "--only",
        nargs="+",
        default=SUITES,
        metavar="PATH",
        help="run these test paths of the reference only (e.g. tests/core/test_evals)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep both copies (reference/ and ours/) in DIR, to rerun single tests by hand",
    )
    args = parser.parse_args()
    try:
        source()  # the reference's tests and environments, at the pinned commit
    except SnapshotMissing as exc:
        raise SystemExit(f"reference_tests: {exc}") from None
    ref_python = openenv_python()
    _ensure_test_tools(ref_python)
    with tempfile.TemporaryDirectory(prefix="openenv-reftests-") as tmp:
        base = args.keep or Path(tmp)
        ref_dir, our_dir = base / "reference", base / "ours"
        _prepare(ref_dir, port=False)
        _prepare(our_dir, port=True)
        started = time.monotonic()
        _run(ref_python, ref_dir, ref_dir / "junit.xml", args.timeout, args.only)
        ref_seconds = time.monotonic() - started
        started = time.monotonic()
        _run(Path(sys.executable), our_dir, our_dir / "junit.xml", args.timeout, args.only)
        our_seconds = time.monotonic() - started
        theirs, ours = _outcomes(ref_dir / "junit.xml"), _outcomes(our_dir / "junit.xml")
    passing = sorted(k for k, v in theirs.items() if v == "passed")
    both = [k for k in passing if ours.get(k) == "passed"]
    by_suite: dict[str, Counter[str]] = {}
    for key in passing:
        suite = ".".join(key.split("::")[0].split(".")[:3])
        by_suite.setdefault(suite, Counter())["reference"] += 1
        by_suite[suite]["ours"] += key in both
    share = len(both) / len(passing) if passing else 0.0
    print(f"{'suite':<48} {'pass on reference':>18} {'also on ours':>13}")
    for suite, counts in sorted(by_suite.items()):
        print(f"{suite:<48} {counts['reference']:>18} {counts['ours']:>13}")
    print(f"{'total':<48} {len(passing):>18} {len(both):>13}   ({share:.1%})")
    report = {
        "reference": "openenv==0.10.0",
        "suites": args.only,
        "passing_on_reference": len(passing),
        "also_passing_on_ours": len(both),
        "share": round(share, 4),
        "seconds": {"reference": round(ref_seconds, 1), "ours": round(our_seconds, 1)},
        "failing_on_ours": sorted(set(passing) - set(both)),
    }
    args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()

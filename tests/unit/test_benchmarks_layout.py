"""benchmarks/ keeps scripts grouped by what they measure, each beside its latest result.

Older rounds live in git history; every ``benchmarks/...`` path the repository cites exists, and
the index (benchmarks/README.md) lists every script.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
GROUPS = {"server", "client", "training", "environments", "scale", "cli"}
# A path as the docs write it: `benchmarks/server/hot_path_latest.{json,md}`; not one after
# `<commit>:` (an older round, read with `git show`).
CITED = re.compile(r"(?<![\w/:.])benchmarks/[\w./{},*<>-]*")
RESULT = re.compile(r"benchmarks/[a-z]+/(?!README)[^/]+\.md")
# Names of older rounds; only the before/after pairs a doc page cites stay.
STALE = re.compile(r"_(before|round\d|first|quick|check)\b|-round\d")
CITED_PAIRS = {
    "server/hot_path_before.json",
    "server/hot_path_before.md",
    "server/flame-step-before.svg",
}


def tracked() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return [line for line in out.splitlines() if (ROOT / line).is_file()]


def kept() -> list[str]:
    """benchmarks/'s tracked files, relative to it."""
    return [
        name.removeprefix("benchmarks/") for name in tracked() if name.startswith("benchmarks/")
    ]


def expand(path: str) -> list[str]:
    """``a.{json,md}`` as ``a.json`` and ``a.md``."""
    match = re.search(r"\{([^}]*)\}", path)
    if match is None:
        return [path]
    head, tail = path[: match.start()], path[match.end() :]
    return [p for part in match.group(1).split(",") for p in expand(head + part + tail)]


def test_the_top_folder_holds_only_the_groups_and_the_index() -> None:
    top = {p.name for p in BENCH.iterdir() if p.name not in {"results", "__pycache__"}}
    assert top == GROUPS | {"README.md"}


def test_no_older_round_is_kept_beside_the_latest() -> None:
    stale = [path for path in kept() if not path.endswith(".py") and STALE.search(Path(path).stem)]
    assert sorted(set(stale) - CITED_PAIRS) == []


def test_every_script_is_in_the_index() -> None:
    index = (BENCH / "README.md").read_text(encoding="utf-8")
    missing = [
        path for path in kept() if path.endswith(".py") and f"`{Path(path).name}`" not in index
    ]
    assert missing == []


def test_every_cited_benchmark_path_exists() -> None:
    missing: list[str] = []
    for name in tracked():
        if name == "CHANGELOG.md" or name.endswith((".json", ".svg", ".png", ".jsonl")):
            continue
        if RESULT.fullmatch(name):  # a record of the command as it was run then
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for match in CITED.finditer(text):
            cited = match.group(0).rstrip(".,{")
            if "<" in cited or "*" in cited or cited.startswith("benchmarks/results"):
                continue
            missing.extend(f"{name}: {p}" for p in expand(cited) if not (ROOT / p).exists())
    assert missing == []

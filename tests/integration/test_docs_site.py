"""The documentation site builds with ``mkdocs build --strict``: no broken link, no page left
out of the navigation, no warning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def test_docs_site_builds_strict(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "index.html").is_file() and (tmp_path / "migrating" / "index.html").is_file()


def test_every_page_is_in_the_navigation() -> None:
    def pages(entries: list[object]) -> list[str]:
        found: list[str] = []
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            found += pages(value) if isinstance(value, list) else [str(value)]
        return found

    config = yaml.safe_load((REPO / "mkdocs.yml").read_text().replace("!!python", "#"))
    listed = pages(config["nav"])
    on_disk = sorted(p.name for p in (REPO / "docs").glob("*.md"))
    assert sorted(listed) == on_disk, "every docs/*.md once in mkdocs.yml's nav, and only those"

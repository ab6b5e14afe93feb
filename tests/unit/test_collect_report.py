"""Evaluation reports: comparisons only of like with like, skipped pass@k explained."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openenv_cli.collect.report import compare_reports, markdown
from openenv_cli.collect.stats import summarize
from openenv_cli.errors import UsageError
from tests.unit.test_collect_stats import synthetic_rows


def _saved(folder: Path, report: dict[str, Any]) -> Path:
    folder.mkdir()
    (folder / "report.json").write_text(json.dumps(report))
    return folder


def test_compare_refuses_reports_with_other_thresholds_or_k(tmp_path: Path) -> None:
    rows = synthetic_rows(0.5, groups=20, group_size=4)
    base = _saved(tmp_path / "base", summarize(rows, [1, 4], 1.0))
    lenient = _saved(tmp_path / "lenient", summarize(rows, [1, 4], 0.5))
    other_k = _saved(tmp_path / "other_k", summarize(rows, [1, 2], 1.0))
    with pytest.raises(UsageError, match=r"success threshold 1\.0 vs 0\.5") as caught:
        compare_reports(base, lenient)
    assert "--success-threshold" in str(caught.value)
    with pytest.raises(UsageError, match="k 1,4 vs 1,2"):
        compare_reports(base, other_k)
    same = _saved(tmp_path / "same", summarize(rows, [4, 1], 1.0))
    result, text = compare_reports(base, same)
    assert result["mean_reward"]["difference"] == 0.0 and "pass@4" in text


def test_a_pass_at_k_that_cannot_be_computed_is_shown_skipped_with_why() -> None:
    rows = synthetic_rows(0.5, groups=5, group_size=2)
    report = summarize(rows, [1, 4], 1.0)
    assert set(report["pass_at_k"]) == {"1"} and report["ks"] == [1, 4]
    why = report["pass_at_k_skipped"]["4"]
    assert "at least 4 completed attempts" in why and "the largest has 2" in why
    assert f"| pass@4 | skipped: {why} |" in markdown(report)

"""pass@k, intervals and report determinism (openenv_cli.collect.stats)."""

from __future__ import annotations

import json
import math
import random
from itertools import combinations
from typing import Any

import pytest

from openenv_cli.collect.episodes import new_row
from openenv_cli.collect.spec import CollectSpec, plan
from openenv_cli.collect.stats import compare, pass_at_k, summarize


def brute_pass_at_k(outcomes: list[bool], k: int) -> float:
    subsets = list(combinations(outcomes, k))
    return sum(any(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize(
    ("n", "c", "k"), [(8, 0, 1), (8, 3, 1), (8, 3, 4), (8, 7, 2), (5, 5, 5), (10, 1, 8)]
)
def test_pass_at_k_matches_enumeration(n: int, c: int, k: int) -> None:
    outcomes = [True] * c + [False] * (n - c)
    assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(outcomes, k), abs=1e-12)


def test_pass_at_k_needs_k_attempts() -> None:
    with pytest.raises(ValueError, match="at least 4"):
        pass_at_k(3, 1, 4)


def synthetic_rows(p: float, groups: int, group_size: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    spec = CollectSpec(targets=("x",), episodes=groups * group_size, group_size=group_size)
    rows = []
    for item in plan(spec):
        row = new_row(item)
        row["total_reward"] = 1.0 if rng.random() < p else 0.0
        row["num_steps"] = 1
        rows.append(row)
    return rows


def test_pass_at_k_estimate_is_close_to_closed_form() -> None:
    p, k = 0.3, 4
    report = summarize(synthetic_rows(p, groups=2000, group_size=8), [1, k], 1.0)
    closed = 1 - (1 - p) ** k
    assert report["pass_at_k"]["4"] == pytest.approx(closed, abs=0.02)
    low, high = report["success_ci95"]
    assert low <= p <= high


def test_same_rows_give_byte_identical_reports() -> None:
    rows = synthetic_rows(0.5, groups=30, group_size=4)
    shuffled = rows[:]
    random.Random(1).shuffle(shuffled)
    first = json.dumps(summarize(rows, [1, 2, 4], 1.0), sort_keys=True)
    second = json.dumps(summarize(shuffled, [1, 2, 4], 1.0), sort_keys=True)
    assert first == second


def test_errors_are_counted_by_kind_and_left_out_of_the_mean() -> None:
    rows = synthetic_rows(1.0, groups=4, group_size=1)
    rows[0].update(error="boom", error_kind="env:EXECUTION_ERROR", total_reward=0.0)
    report = summarize(rows, [1], 1.0)
    assert report["errors"] == {"env:EXECUTION_ERROR": 1}
    assert report["completed"] == 3
    assert report["mean_reward"] == 1.0


def test_ci95_contains_the_mean_and_is_a_pair() -> None:
    report = summarize(synthetic_rows(0.5, groups=50, group_size=1), [1], 1.0)
    low, high = report["ci95"]
    assert low < report["mean_reward"] < high


def test_compare_flags_a_real_difference_and_not_noise() -> None:
    a = summarize(synthetic_rows(0.2, groups=300, group_size=1, seed=1), [1], 1.0)
    b = summarize(synthetic_rows(0.6, groups=300, group_size=1, seed=2), [1], 1.0)
    same = summarize(synthetic_rows(0.2, groups=300, group_size=1, seed=3), [1], 1.0)
    assert compare(a, b)["success_rate"]["significant"]
    assert compare(a, b)["mean_reward"]["significant"]
    assert not math.isnan(compare(a, same)["mean_reward"]["p_value"])
    assert compare(a, same)["success_rate"]["p_value"] > 0.01

"""The numbers of an evaluation report, computed from a collection's rows.

Library routines where they exist (scipy's t interval, Wilson interval, Welch test and
Fisher's exact test; numpy's percentiles); pass@k is the unbiased estimator
``1 - C(n - c, k) / C(n, k)`` averaged over groups (a group: attempts at one start state).
Rows are sorted by episode id first, so the same data gives the same report to the byte.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

REPORT_VERSION = 2  # 2: ks, and pass_at_k_skipped as {k: why}
DIGITS = 10  # floats are rounded so that a report's bytes do not depend on summation order


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of ``k`` draws (without replacement) of ``n`` attempts,
    ``c`` of them successful, succeeds."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} attempts per group, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_ci95(values: list[float]) -> tuple[float, list[float]]:
    """The mean and its two-sided 95% t interval (degenerate with fewer than 2 values)."""
    import numpy as np
    from scipy import stats

    if not values:
        return 0.0, [0.0, 0.0]
    mean = float(np.mean(values))
    if len(values) < 2 or float(np.std(values)) == 0.0:
        return mean, [mean, mean]
    low, high = stats.t.interval(0.95, len(values) - 1, loc=mean, scale=stats.sem(values))
    return mean, [float(low), float(high)]


def percentiles(values: list[float]) -> dict[str, float]:
    import numpy as np

    if not values:
        return {}
    found = np.percentile(values, [50, 90, 99])
    return {"p50": float(found[0]), "p90": float(found[1]), "p99": float(found[2])}


def summarize(
    rows: list[dict[str, Any]], ks: list[int], success_threshold: float
) -> dict[str, Any]:
    """Everything the report shows, as plain JSON data."""
    from scipy import stats

    rows = sorted(rows, key=lambda r: r["episode_id"])
    ok = [r for r in rows if not r["error"]]
    rewards = [float(r["total_reward"]) for r in ok]
    successes = [float(r["total_reward"]) >= success_threshold for r in ok]
    mean, ci = mean_ci95(rewards)
    n_success = sum(successes)
    if ok:
        wilson = stats.binomtest(n_success, len(ok)).proportion_ci(method="wilson")
        success_ci = [float(wilson.low), float(wilson.high)]
    else:
        success_ci = [0.0, 0.0]
    groups: dict[str, list[bool]] = defaultdict(list)
    for row, success in zip(ok, successes, strict=True):
        groups[row["group_id"]].append(success)
    pass_k: dict[str, float] = {}
    skipped_k: dict[str, str] = {}
    largest = max((len(g) for g in groups.values()), default=0)
    for k in ks:
        usable = [g for g in groups.values() if len(g) >= k]
        if not usable:
            skipped_k[str(k)] = (
                f"needs a group with at least {k} completed attempts at one start state; "
                f"the largest has {largest} (evaluate with --k {k} or more, or fewer errors)"
            )
            continue
        pass_k[str(k)] = sum(pass_at_k(len(g), sum(g), k) for g in usable) / len(usable)
    per_task: dict[str, dict[str, Any]] = {}
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in ok:
        if row["task_id"]:
            by_task[row["task_id"]].append(row)
    for task, task_rows in sorted(by_task.items()):
        values = [float(r["total_reward"]) for r in task_rows]
        per_task[task] = {
            "episodes": len(task_rows),
            "mean_reward": sum(values) / len(values),
            "success_rate": sum(v >= success_threshold for v in values) / len(values),
        }
    lengths = [float(r["num_steps"]) for r in ok]
    report = {
        "report_version": REPORT_VERSION,
        "episodes": len(rows),
        "completed": len(ok),
        "mean_reward": mean,
        "reward_std": _std(rewards),
        "ci95": ci,
        "success_threshold": success_threshold,
        "ks": sorted(ks),
        "successes": n_success,
        "success_rate": n_success / len(ok) if ok else 0.0,
        "success_ci95": success_ci,
        "pass_at_k": pass_k,
        "pass_at_k_skipped": skipped_k,
        "groups": len(groups),
        "per_task": per_task,
        "episode_length": {
            "mean": sum(lengths) / len(lengths) if lengths else 0.0,
            **percentiles(lengths),
        },
        "truncated": sum(bool(r["truncated"]) for r in ok),
        "invalid_actions": sum(int(r["invalid_actions"]) for r in rows),
        "latency_s": {
            "model": percentiles([x for r in rows for x in r["model_latencies_s"]]),
            "env": percentiles([x for r in rows for x in r["env_latencies_s"]]),
        },
        "errors": dict(sorted(Counter(r["error_kind"] for r in rows if r["error"]).items())),
    }
    rounded: dict[str, Any] = _rounded(report)
    return rounded


def asked_ks(report: dict[str, Any]) -> list[int]:
    """The k of pass@k a report was made with (computed or skipped)."""
    if "ks" in report:
        return sorted(int(k) for k in report["ks"])
    skipped = report.get("pass_at_k_skipped") or []
    return sorted({int(k) for k in [*report.get("pass_at_k", {}), *skipped]})


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """What makes two reports' numbers incomparable: the success threshold or the k."""
    found = []
    if a.get("success_threshold") != b.get("success_threshold"):
        found.append(
            f"success threshold {a.get('success_threshold')} vs {b.get('success_threshold')}"
        )
    if asked_ks(a) != asked_ks(b):
        found.append(f"k {_ks(a)} vs {_ks(b)}")
    return found


def _ks(report: dict[str, Any]) -> str:
    return ",".join(str(k) for k in asked_ks(report)) or "none"


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Differences of two reports and whether they are significant at the 5% level (see
    ``differences`` first: reports made with other thresholds or k do not compare)."""
    from scipy import stats

    reward = stats.ttest_ind_from_stats(
        a["mean_reward"],
        a["reward_std"],
        max(a["completed"], 1),
        b["mean_reward"],
        b["reward_std"],
        max(b["completed"], 1),
        equal_var=False,
    )
    table = [
        [a["successes"], a["completed"] - a["successes"]],
        [b["successes"], b["completed"] - b["successes"]],
    ]
    success = stats.fisher_exact(table)
    reward_p = float(reward.pvalue) if not math.isnan(reward.pvalue) else 1.0
    result: dict[str, Any] = _rounded(
        {
            "mean_reward": {
                "a": a["mean_reward"],
                "b": b["mean_reward"],
                "difference": b["mean_reward"] - a["mean_reward"],
                "p_value": reward_p,
                "test": "Welch's t-test",
                "significant": reward_p < 0.05,
            },
            "success_rate": {
                "a": a["success_rate"],
                "b": b["success_rate"],
                "difference": b["success_rate"] - a["success_rate"],
                "p_value": float(success.pvalue),
                "test": "Fisher's exact test",
                "significant": float(success.pvalue) < 0.05,
            },
            "pass_at_k": {
                k: {"a": a["pass_at_k"].get(k), "b": b["pass_at_k"].get(k)}
                for k in sorted(set(a["pass_at_k"]) | set(b["pass_at_k"]), key=int)
            },
        }
    )
    return result


def _std(values: list[float]) -> float:
    import numpy as np

    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, DIGITS) + 0.0  # + 0.0 turns -0.0 into 0.0
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value

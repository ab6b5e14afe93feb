"""The comparison table and reports of ``compare.py``: rows, ratios, Markdown, notes."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compare_measure import SERVERS, Plan

from openenv_cli.bench.report import markdown_table

# --- the comparison table ---------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    label: str
    unit: str
    get: Callable[[dict[str, Any]], float | None]
    lower_is_better: bool
    target: str
    check: Callable[[float | None, float | None, float | None], bool | None]


def _dig(*keys: str) -> Callable[[dict[str, Any]], float | None]:
    def get(result: dict[str, Any]) -> float | None:
        value: Any = result
        for key in keys:
            if not isinstance(value, dict):
                return None
            value = value.get(key)
        return value if isinstance(value, (int, float)) else None

    return get


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b not in (None, 0) else None


ROWS = [
    Row(
        "server CPU per step (64 sessions)",
        "µs",
        _dig("throughput", "server_cpu_us_per_step"),
        True,
        "ours/floor ≤ 1.4",
        lambda ours, floor, ref: (
            None if _ratio(ours, floor) is None else _ratio(ours, floor) <= 1.4
        ),
    ),
    Row(
        "steps/s (64 sessions, wait 0)",
        "steps/s",
        _dig("throughput", "steps_per_s"),
        False,
        "ours/ref ≥ 2",
        lambda ours, floor, ref: None if _ratio(ours, ref) is None else _ratio(ours, ref) >= 2,
    ),
    Row(
        "step round trip p50 (1 session)",
        "ms",
        _dig("latency", "rtt_p50_ms"),
        True,
        "ours/floor ≤ 1.3",
        lambda ours, floor, ref: (
            None if _ratio(ours, floor) is None else _ratio(ours, floor) <= 1.3
        ),
    ),
    Row(
        "server CPU per step (1 session)",
        "µs",
        _dig("latency", "server_cpu_us_per_step"),
        True,
        "",
        lambda *a: None,
    ),
    Row(
        "2,048 sessions wait 1 s: total p99",
        "s",
        lambda r: (_dig("sessions", "total_p99_ms")(r) or 0) / 1000 or None,
        True,
        "ours/ref ≤ 0.5",
        lambda ours, floor, ref: None if _ratio(ours, ref) is None else _ratio(ours, ref) <= 0.5,
    ),
    Row(
        "2,048 sessions wait 1 s: success",
        "%",
        lambda r: (
            None if _dig("sessions", "success")(r) is None else 100 * _dig("sessions", "success")(r)
        ),
        False,
        "≥ 95%",
        lambda ours, floor, ref: None if ours is None else ours >= 95,
    ),
    Row(
        "max sessions at ≥95% (wait 1 s)",
        "sessions",
        _dig("concurrency", "max_sessions"),
        False,
        "ours ≥ 16,384",
        lambda ours, floor, ref: None if ours is None else ours >= 16384,
    ),
    Row(
        "memory per idle session",
        "KB",
        _dig("memory", "kb_per_idle_session"),
        True,
        "ours/ref ≤ 0.25",
        lambda ours, floor, ref: None if _ratio(ours, ref) is None else _ratio(ours, ref) <= 0.25,
    ),
]


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "–"
    if unit in ("sessions", "steps/s"):
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.3f}"


def comparison(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for row in ROWS:
        ref, ours, floor = (row.get(results[n]) if n in results else None for n in SERVERS)
        rows.append(
            {
                "metric": row.label,
                "unit": row.unit,
                "reference": ref,
                "ours": ours,
                "floor": floor,
                "ours_over_floor": _ratio(ours, floor),
                "ours_over_reference": _ratio(ours, ref),
                "target": row.target,
                "met": row.check(ours, floor, ref),
            }
        )
    return rows


def table_rows(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    headers = [
        "metric",
        "unit",
        "reference",
        "ours",
        "floor",
        "ours/floor",
        "ours/ref",
        "target",
        "met",
    ]
    body = []
    for r in rows:
        met = {True: "yes", False: "**no**", None: "–"}[r["met"]] if r["target"] else ""
        body.append(
            [
                r["metric"],
                r["unit"],
                _fmt(r["reference"], r["unit"]),
                _fmt(r["ours"], r["unit"]),
                _fmt(r["floor"], r["unit"]),
                "–" if r["ours_over_floor"] is None else f"{r['ours_over_floor']:.2f}×",
                "–" if r["ours_over_reference"] is None else f"{r['ours_over_reference']:.2f}×",
                r["target"],
                met,
            ]
        )
    return headers, body


def describe_setup(plan: Plan) -> list[str]:
    cores = os.cpu_count() or 1
    lines = [
        f"Machine: {cores} cores; {plan.workers} worker(s) per server; "
        f"load generator: {'websockets sans-I/O protocol on a plain asyncio.Protocol' if plan.client == 'lean' else 'websockets asyncio client'} on uvloop, permessage-deflate "
        f"{'offered (as common clients do)' if plan.compression else 'off'}, per-operation timeout {plan.timeout:g} s.",
    ]
    if plan.pin and cores >= 2:
        lines.append(
            "CPU per step, steps/s and round trip: every server running (an idle one costs nothing), "
            "measured in rotation (A B C, B C A, ...) so that drift affects all alike, the measured server "
            "pinned to core 0 and the load generator (1 process) to core 1. Memory: the same pinning. "
            "Sessions and concurrency runs: one server at a time, unpinned (all cores), the load "
            f"generator in {plan.loadgen_processes} unpinned processes."
        )
    else:
        lines.append("No CPU pinning: server and load generator share every core.")
    lines.append(
        "Server CPU is user+system time of the server's process tree (psutil); memory is the "
        "tree's RSS with N idle sessions open minus before, divided by N."
    )
    lines.append(
        "The reference runs on what openenv-core installs (uvicorn with asyncio and h11, no uvloop or "
        "httptools); ours and the floor on this project's uvicorn with uvloop and httptools."
    )
    return lines


def markdown_report(doc: dict[str, Any]) -> str:
    lines = [
        f"# Ours vs. the reference vs. the floor ({'quick' if doc['quick'] else 'full'} run)",
        "",
        f"Measured {doc['started_at']} (revision {doc.get('revision') or 'unknown'}) in "
        f"{doc['duration_s']:.0f} s with `python benchmarks/server/compare.py{' --quick' if doc['quick'] else ''}`.",
        "",
    ]
    lines += [f"- {line}" for line in doc["setup"]] + [""]
    lines += [markdown_table(*table_rows(doc["comparison"])), ""]
    if doc.get("notes"):
        lines += ["Notes:", ""] + [f"- {n}" for n in doc["notes"]] + [""]
    return "\n".join(lines)


def collect_notes(results: dict[str, dict[str, Any]]) -> list[str]:
    notes = []
    for name, result in results.items():
        for metric in ("throughput", "latency", "sessions"):
            other = (result.get(metric) or {}).get("other_cores")
            if other is not None and other > 0.15:
                notes.append(
                    f"{name} {metric}: other processes on the machine used {other:.2f} cores meanwhile; "
                    "the figure may be disturbed"
                )
        skipped = (result.get("concurrency") or {}).get("not_tried")
        if skipped:
            notes.append(
                f"{name}: concurrency not tried at {', '.join(f'{b:,}' for b in skipped)} "
                "(extrapolated to exceed the timeouts; the full run tries every step)"
            )
        if result.get("error"):
            notes.append(f"{name}: {result['error']}")
        if result.get("cut_short"):
            notes.append(f"{name}: {result['cut_short']}")
        memory = result.get("memory")
        if memory:
            notes.append(
                f"{name}: {memory['threads_with_idle_sessions']} threads with {memory['idle_sessions']} idle "
                f"sessions (vs {memory['baseline_threads']} before)"
            )
        thr = result.get("throughput")
        if thr and thr.get("loadgen_cpu_us_per_step"):
            notes.append(
                f"{name}: load generator {thr['loadgen_cpu_us_per_step']:.0f} µs CPU per step at "
                f"{thr['sessions']} sessions (the server: {thr['server_cpu_us_per_step'] or 0:.0f} µs); "
                f"cores used during the steps: server {thr.get('server_core_share') or 0:.2f}, "
                f"load generator {thr.get('loadgen_core_share') or 0:.2f}"
            )
            if (thr.get("loadgen_core_share") or 0) > 0.9 and (
                thr.get("server_core_share") or 0
            ) < 0.9:
                notes.append(
                    f"{name}: the load generator saturated its core, so its steps/s is a lower bound "
                    "(CPU per step is unaffected)"
                )
    return notes

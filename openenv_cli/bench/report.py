"""Reports of a benchmark run: JSON, CSV, Markdown and (when matplotlib is installed) PNG plots.

Pure functions build the content (``to_json_dict``, ``csv_text``, ``markdown``,
``summary_table``); ``write_reports`` puts them on disk. matplotlib is imported only
inside :func:`write_plots`, and only if it is installed (the ``bench`` extra: ``pip install 'openenv-toolkit[bench]'``).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from openenv_cli.safe_files import replacing, write_inside

from .stats import BenchRun, SessionsCell, Summary, ThroughputCell

SCHEMA_VERSION = 1


def _fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def to_json_dict(run: BenchRun) -> dict[str, Any]:
    """The whole run as plain JSON data: settings, every cell, and the aggregated points."""
    return {
        "schema_version": SCHEMA_VERSION,
        "mode": run.mode,
        "url": run.url,
        "transport": run.transport,
        "started_at": run.started_at,
        "duration_s": run.duration_s,
        "settings": run.settings,
        "environment": run.environment,
        "loadgen_cpu_s": run.loadgen_cpu_s,
        "server_cpu_s": run.server_cpu_s,
        "sessions": [c.to_dict() for c in run.sessions],
        "sessions_summary": [asdict(p) for p in run.points],
        "max_batch": {str(wait): batch for wait, batch in run.max_batch.items()},
        "throughput": [c.to_dict() for c in run.throughput],
        "notes": run.notes,
        "failure": run.failure,
    }


SESSIONS_COLUMNS = [
    "batch",
    "wait",
    "rep",
    "attempted",
    "ok",
    "success_rate",
    "wall_s",
    "requests_per_s",
    "connect_p50_ms",
    "connect_p99_ms",
    "reset_p50_ms",
    "reset_p99_ms",
    "step_p50_ms",
    "step_p99_ms",
    "total_p50_ms",
    "total_p99_ms",
    "total_max_ms",
    "loadgen_cpu_s",
    "server_cpu_s",
    "listen_overflows",
    "errors",
]
THROUGHPUT_COLUMNS = [
    "sessions",
    "steps_per_session",
    "wait",
    "rep",
    "ok",
    "success_rate",
    "steps",
    "window_s",
    "steps_per_s",
    "step_p50_ms",
    "step_p90_ms",
    "step_p99_ms",
    "step_max_ms",
    "loadgen_cpu_s",
    "loadgen_cpu_us_per_step",
    "server_cpu_s",
    "server_cpu_us_per_step",
    "errors",
]


def _errors_text(errors: dict[str, int]) -> str:
    return "; ".join(f"{label} ×{count}" for label, count in errors.items())


def _sessions_row(c: SessionsCell) -> list[Any]:
    return [
        c.batch,
        c.wait,
        c.rep,
        c.attempted,
        c.ok,
        round(c.success_rate, 4),
        round(c.wall_s, 3),
        round(c.requests_per_s, 1),
        c.connect.p50,
        c.connect.p99,
        c.reset.p50,
        c.reset.p99,
        c.step.p50,
        c.step.p99,
        c.total.p50,
        c.total.p99,
        c.total.max,
        round(c.loadgen_cpu_s, 3),
        c.server_cpu_s,
        c.listen_overflows,
        _errors_text(c.errors),
    ]


def _throughput_row(c: ThroughputCell) -> list[Any]:
    s: Summary = c.step_latency
    return [
        c.sessions,
        c.steps_per_session,
        c.wait,
        c.rep,
        c.ok,
        round(c.success_rate, 4),
        c.steps,
        round(c.window_s, 3),
        round(c.steps_per_s, 1),
        s.p50,
        s.p90,
        s.p99,
        s.max,
        round(c.loadgen_cpu_s, 3),
        c.loadgen_cpu_us_per_step,
        c.server_cpu_s,
        c.server_cpu_us_per_step,
        _errors_text(c.errors),
    ]


def csv_text(run: BenchRun) -> str:
    """One row per cell (the sessions mode's or the throughput mode's columns)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if run.mode == "throughput":
        writer.writerow(THROUGHPUT_COLUMNS)
        writer.writerows(_throughput_row(c) for c in run.throughput)
    else:
        writer.writerow(SESSIONS_COLUMNS)
        writer.writerows(_sessions_row(c) for c in run.sessions)
    return out.getvalue()


def summary_table(run: BenchRun) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the end-of-run table (one row per batch and wait, or per throughput run)."""
    if run.mode == "throughput":
        headers = [
            "sessions",
            "steps",
            "wait s",
            "ok",
            "steps/s",
            "step p50 ms",
            "step p99 ms",
            "server µs/step",
            "loadgen µs/step",
        ]
        rows = [
            [
                str(c.sessions),
                f"{c.steps:,}",
                f"{c.wait:g}",
                _pct(c.success_rate),
                _fmt(c.steps_per_s, 0),
                _fmt(c.step_latency.p50, 3),
                _fmt(c.step_latency.p99, 3),
                _fmt(c.server_cpu_us_per_step),
                _fmt(c.loadgen_cpu_us_per_step),
            ]
            for c in run.throughput
        ]
        return headers, rows
    headers = [
        "batch",
        "wait s",
        "reps",
        "success",
        "req/s",
        "connect p50/p99 ms",
        "reset p50/p99 ms",
        "step p50/p99 ms",
        "total p50/p99 ms",
    ]
    rows = []
    for p in run.points:
        rows.append(
            [
                f"{p.batch:,}",
                f"{p.wait:g}",
                str(p.reps),
                _pct(p.success_rate),
                _fmt(p.requests_per_s),
                f"{_fmt(p.connect_p50)} / {_fmt(p.connect_p99)}",
                f"{_fmt(p.reset_p50)} / {_fmt(p.reset_p99)}",
                f"{_fmt(p.step_p50)} / {_fmt(p.step_p99)}",
                f"{_fmt(p.total_p50)} / {_fmt(p.total_p99)}",
            ]
        )
    return headers, rows


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub Markdown table: the first column left-aligned, the others right-aligned."""
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join(["---", *("---:" for _ in headers[1:])]) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(run: BenchRun, plots: list[Path] | None = None) -> str:
    """A Markdown report: what was measured, how, the table, the max batch, failures and plots."""
    s = run.settings
    env = run.environment
    lines = [
        f"# openenv bench: {run.mode}",
        "",
        f"- target: `{run.url}` ({run.transport}), started {run.started_at}, took {run.duration_s:.1f} s",
        f"- server: {env.get('server', 'external')}"
        + (f", pids {env['server_pids']}" if env.get("server_pids") else ""),
        f"- load generator: {s.get('processes')} process(es), {s.get('client', 'lean')} WebSocket client, compression "
        f"{'offered' if s.get('compression') else 'off'}, per-operation timeout {s.get('timeout')} s, "
        f"deadline per run {s.get('deadline')} s",
        f"- machine: {env.get('cpus', '?')} CPUs, Python {env.get('python', '?')}",
    ]
    server_cpu = run.server_cpu_s
    lines.append(
        f"- CPU used: load generator {run.loadgen_cpu_s:.2f} s, server "
        + (f"{server_cpu:.2f} s" if server_cpu is not None else "unknown (give --server-pid)")
    )
    lines += ["", markdown_table(*summary_table(run)), ""]
    if run.mode == "sessions":
        lines.append(
            f"Max batch at ≥{float(s.get('success_threshold', 0.95)) * 100:.0f}% success over all "
            "repetitions (pooled):"
        )
        lines.append("")
        for wait, batch in run.max_batch.items():
            lines.append(
                f"- wait {wait:g} s: "
                + (f"**{batch:,}**" if batch is not None else "none of the batches")
            )
        lines.append("")
        lines.append(
            "Success is pooled over repetitions; latencies and req/s are the median over repetitions. "
            "One request is one session (connect, reset, step, close)."
        )
        lines.append("")
    failures: dict[str, int] = {}
    for cell in run.cells:
        for label, count in cell.errors.items():
            failures[label] = failures.get(label, 0) + count
    if failures:
        lines += (
            ["## Failures", ""]
            + [
                f"- {label}: {count:,}"
                for label, count in sorted(failures.items(), key=lambda kv: -kv[1])
            ]
            + [""]
        )
    overflow = listen_overflow_note(run)
    if overflow:
        lines += [overflow, ""]
    if run.notes:
        lines += ["## Notes", ""] + [f"- {note}" for note in run.notes] + [""]
    if plots:
        lines += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots] + [""]
    return "\n".join(lines)


def listen_overflow_note(run: BenchRun) -> str | None:
    """A sentence about connections dropped from a full listen queue, when there were any."""
    dropped = sum(c.listen_overflows or 0 for c in run.sessions)
    if not dropped:
        return None
    worst = max(run.sessions, key=lambda c: c.listen_overflows or 0)
    return (
        f"The kernel dropped {dropped:,} connection attempts from a full listen queue (most in the "
        f"{worst.batch:,}-session run); those clients waited for SYN retransmissions (1 s, 3 s, 7 s, ...). "
        "A larger server backlog and net.core.somaxconn shorten connect times. (The counter covers this "
        "machine's network namespace, so it is only meaningful for a server on this machine.)"
    )


def write_plots(run: BenchRun, directory: Path, stem: str) -> list[Path]:
    """PNG plots (success rate and p99 against batch size, one line per wait); [] without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written: list[Path] = []
    if run.mode == "sessions" and run.sessions:
        points = run.points
        waits = sorted({p.wait for p in points})
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        for wait in waits:
            series = sorted((p for p in points if p.wait == wait), key=lambda p: p.batch)
            xs = [p.batch for p in series]
            ax1.plot(
                xs, [p.success_rate * 100 for p in series], marker="o", label=f"wait {wait:g} s"
            )
            ax2.plot(
                xs,
                [(p.total_p99 or float("nan")) / 1000 for p in series],
                marker="o",
                label=f"wait {wait:g} s",
            )
        threshold = float(run.settings.get("success_threshold", 0.95)) * 100
        ax1.axhline(threshold, color="grey", linestyle="--", linewidth=1)
        for ax, title, ylabel in (
            (ax1, "Success rate", "% of sessions"),
            (ax2, "Total p99", "seconds"),
        ):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("concurrent sessions (batch)")
            ax.set_ylabel(ylabel)
            ax.set_title(title)
            ax.grid(True, alpha=0.3)
            ax.legend()
        ax1.set_ylim(0, 105)
        fig.tight_layout()
        path = directory / f"{stem}-sessions.png"
        with replacing(directory, path.name) as out:
            fig.savefig(out, format="png", dpi=110)
        plt.close(fig)
        written.append(path)
    if run.mode == "throughput" and run.throughput:
        cells = sorted(run.throughput, key=lambda c: c.sessions)
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        xs = [c.sessions for c in cells]
        ax1.plot(xs, [c.steps_per_s for c in cells], marker="o")
        ax2.plot(xs, [c.step_latency.p50 or float("nan") for c in cells], marker="o", label="p50")
        ax2.plot(xs, [c.step_latency.p99 or float("nan") for c in cells], marker="o", label="p99")
        ax2.legend()
        for ax, title, ylabel in ((ax1, "Throughput", "steps/s"), (ax2, "Step latency", "ms")):
            ax.set_xlabel("concurrent sessions")
            ax.set_ylabel(ylabel)
            ax.set_title(title)
            ax.grid(True, alpha=0.3)
        fig.tight_layout()
        path = directory / f"{stem}-throughput.png"
        with replacing(directory, path.name) as out:
            fig.savefig(out, format="png", dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def write_reports(
    run: BenchRun, directory: Path, stem: str, plots: bool = True
) -> dict[str, Path | list[Path]]:
    """Write ``<stem>.json``, ``<stem>.csv``, ``<stem>.md`` and the PNG plots into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path | list[Path]] = {}
    write_inside(directory, f"{stem}.json", json.dumps(to_json_dict(run), indent=2) + "\n")
    write_inside(directory, f"{stem}.csv", csv_text(run))
    pngs = write_plots(run, directory, stem) if plots else []
    write_inside(directory, f"{stem}.md", markdown(run, pngs))
    json_path, csv_path, md_path = (directory / f"{stem}.{kind}" for kind in ("json", "csv", "md"))
    paths.update(json=json_path, csv=csv_path, markdown=md_path, plots=pngs)
    return paths

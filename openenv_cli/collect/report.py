"""Evaluation reports: ``report.json`` for machines, ``report.md`` and ``report.html`` for people."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openenv_cli.errors import UsageError
from openenv_cli.markdown_text import inline
from openenv_cli.safe_files import write_inside

from .stats import compare, differences, summarize
from .store import read_rows, read_run

FORMATS = ("json", "md", "html")


def report_from_folder(out: Path, ks: list[int], success_threshold: float) -> dict[str, Any]:
    """The report of the collection in ``out``, its provenance included."""
    run = read_run(out)
    rows = list(read_rows(out))
    if not rows:
        raise UsageError(f"{out} holds no episodes yet.", hint="Run openenv collect ... --resume.")
    return {"provenance": run.get("provenance", {}), **summarize(rows, ks, success_threshold)}


def write_reports(report: dict[str, Any], folder: Path, formats: list[str]) -> list[Path]:
    """Write the chosen formats into ``folder`` (never through a link); returns the files."""
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise UsageError(f"--report {','.join(unknown)}: choose from {', '.join(FORMATS)}.")
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    if "json" in formats:
        write_inside(folder, "report.json", json.dumps(report, indent=2, sort_keys=True) + "\n")
        written.append(folder / "report.json")
    if "md" in formats:
        write_inside(folder, "report.md", markdown(report))
        written.append(folder / "report.md")
    if "html" in formats:
        write_inside(folder, "report.html", html(report))
        written.append(folder / "report.html")
    return written


def _rows(report: dict[str, Any], free_text: Callable[[str], str] = str) -> list[tuple[str, str]]:
    """The summary table; ``free_text`` escapes what came from the environment (error kinds)."""
    ci = report["ci95"]
    rows = [
        ("episodes (completed)", f"{report['episodes']} ({report['completed']})"),
        ("mean reward [95% CI]", f"{report['mean_reward']:.4f} [{ci[0]:.4f}, {ci[1]:.4f}]"),
        (
            f"success rate (reward ≥ {report['success_threshold']:g}) [95% CI]",
            f"{report['success_rate']:.3f} [{report['success_ci95'][0]:.3f}, {report['success_ci95'][1]:.3f}]",
        ),
    ]
    rows += [(f"pass@{k}", f"{v:.4f}") for k, v in report["pass_at_k"].items()]
    skipped = report.get("pass_at_k_skipped") or {}
    if isinstance(skipped, list):  # a version 1 report: no reasons recorded
        skipped = {str(k): "not enough attempts per group" for k in skipped}
    rows += [(f"pass@{k}", f"skipped: {why}") for k, why in skipped.items()]
    length = report["episode_length"]
    rows.append(("episode length mean / p90", f"{length['mean']:.2f} / {length.get('p90', 0):.0f}"))
    for side in ("model", "env"):
        lat = report["latency_s"][side]
        if lat:
            rows.append(
                (
                    f"{side} latency p50 / p99 (ms)",
                    f"{lat['p50'] * 1e3:.1f} / {lat['p99'] * 1e3:.1f}",
                )
            )
    rows.append(("invalid actions", str(report["invalid_actions"])))
    errors = ", ".join(f"{free_text(k)}: {v}" for k, v in report["errors"].items()) or "none"
    rows.append(("errors", errors))
    return rows


def markdown(report: dict[str, Any]) -> str:
    env = report.get("provenance", {}).get("environment", {})
    title = inline(env.get("name") or "the environment")
    lines = [f"# Evaluation of {title}", "", "| | |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in _rows(report, inline)]
    if report["per_task"]:
        lines += [
            "",
            "## Per task",
            "",
            "| task | episodes | mean reward | success |",
            "|---|---:|---:|---:|",
        ]
        lines += [
            f"| {inline(task)} | {t['episodes']} | {t['mean_reward']:.4f} | {t['success_rate']:.3f} |"
            for task, t in report["per_task"].items()
        ]
    return "\n".join(lines) + "\n"


def html(report: dict[str, Any]) -> str:
    from jinja2 import Environment, StrictUndefined

    template = Environment(autoescape=True, undefined=StrictUndefined).from_string(_HTML)
    return template.render(
        title=report.get("provenance", {}).get("environment", {}).get("name") or "the environment",
        rows=_rows(report),
        per_task=report["per_task"],
        plots=_plots(report),
    )


def _plots(report: dict[str, Any]) -> list[str]:
    """PNG plots as base64 (empty when matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    images = []
    if report["pass_at_k"]:
        fig, ax = plt.subplots(figsize=(5, 3))
        ks = [int(k) for k in report["pass_at_k"]]
        ax.plot(ks, list(report["pass_at_k"].values()), marker="o")
        ax.set(xlabel="k", ylabel="pass@k", ylim=(0, 1.05), title="pass@k")
        images.append(_png(fig, plt))
    if report["per_task"]:
        fig, ax = plt.subplots(figsize=(6, 3))
        tasks = list(report["per_task"])[:40]
        ax.bar(tasks, [report["per_task"][t]["mean_reward"] for t in tasks])
        ax.set(ylabel="mean reward", title="per task")
        ax.tick_params(axis="x", labelrotation=90)
        images.append(_png(fig, plt))
    return images


def _png(fig: Any, plt: Any) -> str:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def comparison_markdown(a: Path, b: Path, result: dict[str, Any]) -> str:
    lines = [
        f"# {inline(a)} vs {inline(b)}",
        "",
        "| | A | B | B − A | p | significant |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name in ("mean_reward", "success_rate"):
        r = result[name]
        lines.append(
            f"| {name} | {r['a']:.4f} | {r['b']:.4f} | {r['difference']:+.4f} | {r['p_value']:.4f} | "
            f"{'yes' if r['significant'] else 'no'} ({r['test']}) |"
        )
    for k, r in result["pass_at_k"].items():
        show = [f"{v:.4f}" if v is not None else "–" for v in (r["a"], r["b"])]
        lines.append(f"| pass@{k} | {show[0]} | {show[1]} | | | |")
    return "\n".join(lines) + "\n"


def load_report(path: Path) -> dict[str, Any]:
    target = path / "report.json" if path.is_dir() else path
    try:
        return dict(json.loads(target.read_text()))
    except (OSError, json.JSONDecodeError) as error:
        raise UsageError(f"{target} is not a report.json: {error}") from None


def compare_reports(a: Path, b: Path) -> tuple[dict[str, Any], str]:
    """The comparison of two reports; refused when they count success differently."""
    first, second = load_report(a), load_report(b)
    found = differences(first, second)
    if found:
        raise UsageError(
            f"{a} and {b} were made with different settings ({'; '.join(found)}): their "
            "success rates and pass@k do not compare.",
            hint="Report both with the same settings: openenv eval --from DIR "
            "--success-threshold X --k K (the episodes are reused).",
        )
    result = compare(first, second)
    return result, comparison_markdown(a, b, result)


_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<title>Evaluation of {{ title }}</title>
<style>body{font-family:system-ui,sans-serif;max-width:56rem;margin:2rem auto;padding:0 1rem}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}</style>
</head><body>
<h1>Evaluation of {{ title }}</h1>
<table>{% for name, value in rows %}<tr><th>{{ name }}</th><td>{{ value }}</td></tr>{% endfor %}</table>
{% for image in plots %}<p><img alt="plot" src="data:image/png;base64,{{ image }}"></p>{% endfor %}
{% if per_task %}<h2>Per task</h2><table><tr><th>task</th><th>episodes</th><th>mean reward</th><th>success</th></tr>
{% for task, t in per_task.items() %}<tr><td>{{ task }}</td><td>{{ t.episodes }}</td><td>{{ "%.4f"|format(t.mean_reward) }}</td><td>{{ "%.3f"|format(t.success_rate) }}</td></tr>{% endfor %}</table>{% endif %}
</body></html>
"""

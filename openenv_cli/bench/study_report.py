"""The study's tables and plots, built from a :class:`~.study.StudyResult` (pure, except
:func:`write_study`): success rate and total p99 per batch size, the max batch at ≥ 95%
success and batch per core, the latency breakdown, and the OpenEnv scaling study's published
figures beside ours.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv_cli.safe_files import replacing, write_inside

from .stats import SUCCESS_THRESHOLD
from .study import InfraOutcome, StudyResult

Table = tuple[list[str], list[list[str]]]


@dataclass(frozen=True)
class Published:
    """One row of the OpenEnv scaling study's results (WebSocket sessions, wait 1 s)."""

    infra: str
    max_batch: int
    cores: int
    p99_s: float
    rps: float

    @property
    def per_core(self) -> float:
        return self.max_batch / self.cores


# The scaling study's published table (tutorial/03-scaling.md of meta-pytorch/OpenEnv).
PUBLISHED = (
    Published("local-uvicorn (8 workers)", 2048, 8, 1.97, 932),
    Published("local-docker", 2048, 8, 2.90, 682),
    Published("hf-spaces (free, cpu-basic)", 128, 2, 2.68, 48),
    Published("slurm-single (one node)", 512, 48, 1.45, 358),
    Published("slurm-multi (two nodes + Envoy)", 16384, 96, 29.8, 518),
)
# Which published row each of our infrastructures compares with.
COUNTERPART = {
    "local": "local-uvicorn (8 workers)",
    "docker": "local-docker",
    "swarm": "slurm-multi (two nodes + Envoy)",
    "slurm": "slurm-multi (two nodes + Envoy)",
}


def _s(ms: float | None) -> str:
    return "—" if ms is None else f"{ms / 1000:.2f} s"


def _ms(ms: float | None) -> str:
    return "—" if ms is None else f"{ms:.1f} ms"


def measured(result: StudyResult) -> list[InfraOutcome]:
    return [o for o in result.infras if o.status == "measured"]


def max_batch(
    outcome: InfraOutcome, wait: float, threshold: float = SUCCESS_THRESHOLD
) -> int | None:
    """The largest batch of ``wait`` at ≥ ``threshold`` success, counting only an unbroken run
    of passing batches from the smallest (a pass after a failure is luck, not capacity)."""
    best = None
    for point in sorted((p for p in outcome.points if p["wait"] == wait), key=lambda p: p["batch"]):
        if point["success_rate"] < threshold:
            break
        best = point["batch"]
    return best


def _at_least(outcome: InfraOutcome, wait: float, best: int | None) -> str:
    """``≥ `` when the max batch is the largest batch tried: the grid, not the server, bounds it."""
    tried = [p["batch"] for p in outcome.points if p["wait"] == wait]
    return "≥ " if best is not None and tried and best == max(tried) else ""


def waits(result: StudyResult) -> list[float]:
    return sorted({p["wait"] for o in measured(result) for p in o.points})


def success_table(result: StudyResult, wait: float) -> Table:
    """Rows: batch sizes; columns: each measured infrastructure's success and total p99."""
    infras = measured(result)
    batches = sorted({p["batch"] for o in infras for p in o.points if p["wait"] == wait})
    headers = ["batch", *(f"{o.name}: success / p99" for o in infras)]
    rows = []
    for batch in batches:
        row = [f"{batch:,}"]
        for outcome in infras:
            point = next(
                (p for p in outcome.points if p["batch"] == batch and p["wait"] == wait), None
            )
            row.append(
                "—" if point is None else f"{point['success_rate']:.1%} / {_s(point['total_p99'])}"
            )
        rows.append(row)
    return headers, rows


def capacity_table(result: StudyResult, wait: float) -> Table:
    """Max batch at ≥ 95% success, cores, batch per core, total p99 and RPS at that batch."""
    headers = [
        "infrastructure",
        "max batch (≥95%)",
        "cores",
        "batch/core",
        "p99 at max",
        "RPS at max",
    ]
    rows = []
    for outcome in measured(result):
        best = max_batch(outcome, wait)
        point = next((p for p in outcome.points if p["batch"] == best and p["wait"] == wait), None)
        per_core = f"{best / outcome.cores:.1f}" if best and outcome.cores else "—"
        rows.append(
            [
                outcome.name,
                f"{_at_least(outcome, wait, best)}{best:,}" if best else "none",
                str(outcome.cores or "?"),
                per_core,
                _s(point["total_p99"]) if point else "—",
                f"{point['requests_per_s']:.0f}" if point else "—",
            ]
        )
    return headers, rows


def latency_table(result: StudyResult, wait: float) -> Table:
    """Connect p50, reset p50, step p50 and total p99 of every infrastructure and batch."""
    headers = ["infrastructure", "batch", "connect p50", "reset p50", "step p50", "total p99"]
    rows = [
        [o.name, f"{p['batch']:,}", _ms(p["connect_p50"]), _ms(p["reset_p50"]),
         _ms(p["step_p50"]), _s(p["total_p99"])]
        for o in measured(result)
        for p in sorted(o.points, key=lambda p: p["batch"])
        if p["wait"] == wait
    ]  # fmt: skip
    return headers, rows


def published_table(result: StudyResult, wait: float) -> Table:
    """Ours beside the published figure it compares with, per core."""
    by_name = {p.infra: p for p in PUBLISHED}
    headers = ["ours", "max batch / cores", "batch/core", "published", "max batch / cores",
               "batch/core", "ours ÷ published (per core)"]  # fmt: skip
    rows = []
    for outcome in measured(result):
        theirs = by_name[COUNTERPART[outcome.name]]
        best = max_batch(outcome, wait)
        ours = best / outcome.cores if best and outcome.cores else None
        bound = _at_least(outcome, wait, best)
        rows.append(
            [
                outcome.name,
                f"{bound}{best or 0:,} / {outcome.cores or '?'}",
                f"{bound}{ours:.1f}" if ours is not None else "—",
                theirs.infra,
                f"{theirs.max_batch:,} / {theirs.cores}",
                f"{theirs.per_core:.1f}",
                f"{bound}{ours / theirs.per_core:.2f}×" if ours is not None else "—",
            ]
        )
    return headers, rows


def markdown_table(table: Table) -> list[str]:
    headers, rows = table
    return [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def markdown(result: StudyResult) -> str:
    """The whole report as Markdown."""
    s = result.settings
    lines = [
        f"# Scaling study: {result.project}",
        "",
        f"Started {result.started_at}; batch sizes {', '.join(f'{b:,}' for b in s['requests_grid'])}, "
        f"wait {', '.join(f'{w:g} s' for w in s['wait_grid'])}, {s['reps']} repetition(s); "
        f"{result.machine['cpus']} cores (load average {result.machine['load_average'][0]:.1f} "
        "at the start). Each session: connect, reset, one step, close, all at once.",
        "",
        "| infrastructure | status | how | taken down | notes |",
        "|---|---|---|---|---|",
    ]
    for o in result.infras:
        failures = [
            f"{p['batch']:,}: "
            + ", ".join(
                f"{k} ×{v}" for k, v in sorted(p["errors"].items(), key=lambda e: -e[1])[:3]
            )
            for p in o.points
            if p.get("errors")
        ]
        notes = "; ".join([o.reason] * bool(o.reason) + o.notes + failures).replace("|", "/")
        lines.append(f"| {o.name} | {o.status} | {o.how} | {o.handle or '—'} | {notes or '—'} |")
    for wait in waits(result):
        lines += ["", f"## Wait {wait:g} s", "", "### Success rate and total p99 per batch", ""]
        lines += markdown_table(success_table(result, wait))
        lines += ["", "### Max batch at ≥ 95% success", ""]
        lines += markdown_table(capacity_table(result, wait))
        lines += ["", "### Latency breakdown", ""]
        lines += markdown_table(latency_table(result, wait))
        lines += ["", "### Beside the OpenEnv scaling study's published figures", ""]
        lines += markdown_table(published_table(result, wait))
    lines += ["", "Published (OpenEnv scaling study, WebSocket sessions, wait 1 s):", ""]
    lines += markdown_table(
        (
            ["infrastructure", "max batch", "cores", "batch/core", "p99", "RPS"],
            [
                [
                    p.infra,
                    f"{p.max_batch:,}",
                    str(p.cores),
                    f"{p.per_core:.1f}",
                    f"{p.p99_s:.2f} s",
                    f"{p.rps:.0f}",
                ]
                for p in PUBLISHED
            ],
        )
    )
    lines += [
        "",
        "A max batch is the largest of an unbroken run of batches at ≥ 95% success; "
        "≥ marks one that is the largest batch tried (the grid bounds it). Batch per core divides it by the cores the "
        "infrastructure could use (Slurm: the job's allocation).",
        "",
    ]
    return "\n".join(lines)


def plot(result: StudyResult, path: Path) -> Path | None:
    """Success rate and total p99 against batch size, one line per infrastructure."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return None
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for outcome in measured(result):
        for wait in waits(result):
            points = sorted(
                (p for p in outcome.points if p["wait"] == wait), key=lambda p: p["batch"]
            )
            label = outcome.name if len(waits(result)) == 1 else f"{outcome.name}, wait {wait:g} s"
            batches = [p["batch"] for p in points]
            left.plot(batches, [p["success_rate"] * 100 for p in points], marker="o", label=label)
            right.plot(
                batches,
                [(p["total_p99"] or 0) / 1000 for p in points],
                marker="o",
                label=label,
            )
    left.axhline(SUCCESS_THRESHOLD * 100, color="grey", linestyle="--", linewidth=1)
    left.set_ylim(0, 103)
    for axis, title, unit in ((left, "success rate", "%"), (right, "total p99", "s")):
        axis.set_xscale("log", base=2)
        axis.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:,.0f}"))
        axis.set_xlabel("concurrent sessions (batch)")
        axis.set_ylabel(f"{title} ({unit})")
        axis.set_title(title)
        axis.grid(True, alpha=0.3)
        axis.legend()
    figure.suptitle(f"Scaling study: {result.project}")
    figure.tight_layout()
    with replacing(path.parent, path.name) as out:
        figure.savefig(out, format="png", dpi=110)
    plt.close(figure)
    return path


def write_study(
    result: StudyResult, out: Path, stem: str = "study", *, plots: bool = True
) -> dict[str, Any]:
    """Write ``stem.json``, ``stem.md`` and ``stem.png`` into ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    document = result.to_dict() | {
        "max_batch": {
            o.name: {str(w): max_batch(o, w) for w in waits(result)} for o in measured(result)
        },
        "published": [
            {
                "infra": p.infra,
                "max_batch": p.max_batch,
                "cores": p.cores,
                "batch_per_core": round(p.per_core, 1),
                "p99_s": p.p99_s,
                "rps": p.rps,
            }
            for p in PUBLISHED
        ],
    }
    paths: dict[str, Any] = {"json": out / f"{stem}.json", "markdown": out / f"{stem}.md"}
    write_inside(out, f"{stem}.json", json.dumps(document, indent=2) + "\n")
    text = markdown(result)
    image = plot(result, out / f"{stem}.png") if plots and measured(result) else None
    if image is not None:
        text += f"\n![success rate and total p99 per batch]({image.name})\n"
    write_inside(out, f"{stem}.md", text)
    paths["png"] = image
    return paths

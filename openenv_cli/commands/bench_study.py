"""``openenv bench --study INFRAS``: options → :func:`run_study` → tables printed, report written."""

from __future__ import annotations

import os
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from openenv_cli.bench.options import int_list
from openenv_cli.console import console
from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.manifest_schema import MANIFEST_FILE


def run_study_command(
    infras: str,
    requests_grid: str,
    wait_grid: str | None,
    reps: int,
    timeout: float,
    deadline: float,
    processes: int,
    output_dir: Path,
    *,
    plots: bool,
    action: str | None,
    action_file: Path | None,
    token: str | None,
) -> None:
    """Run the study on the project in the current folder and print its tables."""
    from openenv_cli.bench import study_report
    from openenv_cli.bench.auth import resolve_api_key
    from openenv_cli.bench.study import StudySettings, parse_infras, run_study

    try:
        names = parse_infras(infras)
    except ValueError as exc:
        raise UsageError(str(exc), hint="e.g. --study local,docker,swarm,slurm") from None
    project = Path.cwd()
    if not (project / MANIFEST_FILE).is_file():
        raise UsageError(
            "--study deploys the project in the current folder, and it has no openenv.yaml.",
            hint="cd into a project made by `openenv init`, then run the study.",
        )
    from openenv_cli.deploy.settings import resolve_settings

    deploy = resolve_settings("swarm", project)  # the image `openenv build` tags, the port
    grid_waits = [float(w) for w in (wait_grid or "1.0").split(",") if w.strip()]
    settings = StudySettings(
        project_dir=project,
        infras=names,
        image=deploy.image,
        port=deploy.port,
        requests_grid=int_list(requests_grid, "--requests-grid"),
        wait_grid=grid_waits,
        reps=reps,
        timeout=timeout,
        deadline=deadline,
        processes=processes,
        action=action,
        action_file=action_file,
        token=resolve_api_key(token).value,
    )
    result = run_study(settings, announce=lambda text: console.print(escape(text), highlight=False))
    try:
        paths = study_report.write_study(result, output_dir, plots=plots)
    except OSError as exc:
        raise OpenEnvError(
            f"Could not write the study to {output_dir}: {exc}",
            hint="Choose a writable folder with --output-dir.",
        ) from None
    for wait in study_report.waits(result):
        for title, table in (
            (f"success / total p99, wait {wait:g} s", study_report.success_table(result, wait)),
            (
                f"max batch at ≥95% success, wait {wait:g} s",
                study_report.capacity_table(result, wait),
            ),
            (
                f"beside the published study, wait {wait:g} s",
                study_report.published_table(result, wait),
            ),
        ):
            shown = Table(*table[0], title=title, title_justify="left")
            for row in table[1]:
                shown.add_row(*row)
            console.print(shown)
    written = [p for p in (paths["markdown"], paths["json"], paths["png"]) if p is not None]
    console.print(
        "Study: " + ", ".join(escape(os.path.relpath(str(p))) for p in written), highlight=False
    )
    if not any(o.status == "measured" for o in result.infras):
        raise OpenEnvError(
            "No infrastructure was measured: "
            + "; ".join(f"{o.name}: {o.reason}" for o in result.infras),
            hint="Fix the first reason above, or choose other infrastructures with --study.",
        )

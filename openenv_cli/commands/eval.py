"""``openenv eval``: evaluate a policy on an environment, or report on an existing collection."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer

from openenv_cli.collect import options as opt
from openenv_cli.config import Setting, parse_str
from openenv_cli.errors import UsageError

TOKEN = Setting("token", env="OPENENV_API_KEY", parse=parse_str)


def command(
    targets: opt.Targets = None,
    episodes: opt.Episodes = 100,
    llm: opt.Llm = None,
    model: opt.Model = None,
    policy: opt.PolicyOpt = None,
    k: Annotated[
        str, typer.Option("--k", help="Comma-separated k of pass@k; groups get max(k) attempts.")
    ] = "1",
    success_threshold: Annotated[
        float,
        typer.Option(
            "--success-threshold", help="An episode succeeds when its total reward reaches this."
        ),
    ] = 1.0,
    report: Annotated[
        str, typer.Option("--report", help="Formats: md, json, html.")
    ] = "md,json,html",
    report_dir: Annotated[
        Path | None,
        typer.Option("--report-dir", help="Where the reports go (default: the episodes folder)."),
    ] = None,
    from_dir: Annotated[
        Path | None,
        typer.Option("--from", help="Report on this collection instead of running episodes."),
    ] = None,
    compare: Annotated[
        tuple[Path, Path] | None,
        typer.Option(
            "--compare",
            help="Two report.json files (or folders): the differences and their significance.",
        ),
    ] = None,
    concurrency: opt.Concurrency = 8,
    max_turns: opt.MaxTurns = 8,
    seed: opt.Seed = 0,
    out: opt.Out = Path("eval"),
    resume: opt.Resume = False,
    temperature: opt.Temperature = 1.0,
    top_p: opt.TopP = 1.0,
    max_tokens: opt.MaxTokens = 256,
    step_timeout: opt.StepTimeout = 60.0,
    max_error_rate: opt.MaxErrorRate = None,
    system_prompt: opt.SystemPrompt = None,
    as_json: opt.Json = False,
    token: opt.Token = None,
) -> None:
    """Evaluate a model on an environment: mean reward with its interval, success, pass@k.

    Also episode lengths, latencies and errors.
    With TARGET, runs [bold]--episodes[/] episodes (in groups of max(--k) attempts per start
    state) into [bold]--out[/], then writes report.json, report.md and report.html. With
    [bold]--from DIR[/], reports on an existing collection; with [bold]--compare A B[/], puts
    two reports side by side.
    """
    from openenv_cli.collect.report import compare_reports, report_from_folder, write_reports
    from openenv_cli.console import console

    if compare:
        result, text = compare_reports(*compare)
        if as_json:
            console.print_json(json.dumps(result))
        else:
            console.print(text, markup=False, soft_wrap=True)
        return
    ks = _parse_ks(k)
    if from_dir is None:
        if not targets:
            raise UsageError(
                "Name the environment (TARGET), or report on a collection with --from DIR."
            )
        from openenv_cli.collect.inputs import read_text
        from openenv_cli.collect.policies import choose_policy
        from openenv_cli.collect.progress import progress_display
        from openenv_cli.collect.runner import collect, require_packages, validate_spec
        from openenv_cli.collect.spec import CollectSpec, Sampling

        chosen = choose_policy(policy, llm)
        group = max(ks)
        spec = CollectSpec(
            targets=tuple(targets),
            episodes=max(episodes, group) // group * group,
            policy=chosen,
            llm=llm,
            model=model,
            concurrency=concurrency,
            max_turns=max_turns,
            group_size=group,
            seed=seed,
            sampling=Sampling(temperature=temperature, top_p=top_p, max_tokens=max_tokens),
            step_timeout=step_timeout,
            max_error_rate=max_error_rate,
            system_prompt=read_text(system_prompt, "--system-prompt") if system_prompt else None,
        )
        validate_spec(spec)
        require_packages(spec, "eval")
        with progress_display(spec.episodes) as show:
            asyncio.run(
                collect(
                    spec,
                    out,
                    resume=resume,
                    token=TOKEN.resolve(flag=token).value,
                    on_progress=show,
                )
            )
        from_dir = out
    from openenv_cli.extras import require

    require("eval", "scipy", "numpy")
    found = report_from_folder(from_dir, ks, success_threshold)
    written = write_reports(
        found, report_dir or from_dir, [f.strip() for f in report.split(",") if f.strip()]
    )
    if as_json:
        console.print_json(json.dumps(found))
        return
    from openenv_cli.collect.report import markdown

    console.print(markdown(found), markup=False, soft_wrap=True)
    console.print("Reports: " + ", ".join(str(p) for p in written), soft_wrap=True)


def _parse_ks(text: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise UsageError(f"--k {text!r}: expected numbers like 1,4,8.") from None
    if not ks or ks[0] < 1:
        raise UsageError("--k needs numbers of at least 1.")
    return ks

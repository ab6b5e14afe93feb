"""``openenv collect``: run episodes against an environment and write them as a dataset."""

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
    concurrency: opt.Concurrency = 8,
    max_turns: opt.MaxTurns = 8,
    group_size: Annotated[
        int,
        typer.Option(
            "--group-size", min=1, help="Episodes per starting state (same seed and task)."
        ),
    ] = 1,
    seed: opt.Seed = 0,
    tasks: Annotated[
        str | None,
        typer.Option(
            "--tasks",
            help="split=NAME: the tasks of a split from the server's Task API; or a file or "
            "dataset folder of task ids (lines, JSON lines, JSON, Parquet; a task_id or id "
            "field).",
        ),
    ] = None,
    tasks_file: Annotated[
        Path | None,
        typer.Option("--tasks-file", help="Task ids, as --tasks FILE (kept for old commands)."),
    ] = None,
    system_prompt: opt.SystemPrompt = None,
    out: opt.Out = Path("episodes"),
    fmt: Annotated[str, typer.Option("--format", help="parquet or jsonl.")] = "parquet",
    tokens: Annotated[
        bool, typer.Option("--tokens", help="Record token ids, log-probabilities and the mask.")
    ] = False,
    resume: opt.Resume = False,
    temperature: opt.Temperature = 1.0,
    top_p: opt.TopP = 1.0,
    max_tokens: opt.MaxTokens = 256,
    step_timeout: opt.StepTimeout = 60.0,
    max_error_rate: opt.MaxErrorRate = None,
    push_to_hub: Annotated[
        str | None, typer.Option("--push-to-hub", help="Upload the folder as this dataset repo.")
    ] = None,
    private: Annotated[
        bool, typer.Option("--private", help="With --push-to-hub: a private repo.")
    ] = False,
    shard_size: Annotated[
        int,
        typer.Option(
            "--shard-size",
            min=1,
            help="Episodes per shard at most (a shard is also cut every few seconds).",
        ),
    ] = 64,
    as_json: opt.Json = False,
    token: opt.Token = None,
) -> None:
    """Run episodes (a model, a callable or random actions) and write them as a dataset.

    [bold]--episodes[/] episodes against TARGET, written as a dataset folder.
    Episodes run [bold]--concurrency[/] at a time and are written in shards as they finish;
    after an interruption, [bold]--resume[/] runs only the missing ones. The folder loads
    with [cyan]datasets.load_dataset[/] and carries a dataset card with the run's provenance.
    """
    from openenv_cli.collect.progress import progress_display
    from openenv_cli.collect.runner import collect, require_packages, validate_spec
    from openenv_cli.collect.spec import CollectSpec, Sampling
    from openenv_cli.console import console

    if not targets:
        raise UsageError(
            "Name the environment: a server URL, FAMILY:NAME (gymnasium:CartPole-v1), a project "
            "folder, image:NAME or space:org/name."
        )
    from openenv_cli.collect.policies import choose_policy

    chosen = choose_policy(policy, llm)
    from openenv_cli.collect.inputs import read_text, task_option

    split, task_ids = task_option(tasks, tasks_file)
    spec = CollectSpec(
        targets=tuple(targets),
        episodes=episodes,
        policy=chosen,
        llm=llm,
        model=model,
        concurrency=concurrency,
        max_turns=max_turns,
        group_size=group_size,
        seed=seed,
        tasks=task_ids,
        system_prompt=read_text(system_prompt, "--system-prompt") if system_prompt else None,
        format=fmt,
        tokens=tokens,
        sampling=Sampling(temperature=temperature, top_p=top_p, max_tokens=max_tokens),
        step_timeout=step_timeout,
        max_error_rate=max_error_rate,
        shard_size=shard_size,
    )
    validate_spec(spec)
    require_packages(spec, "collect")
    with progress_display(episodes) as show:
        result = asyncio.run(
            collect(
                spec,
                out,
                resume=resume,
                token=TOKEN.resolve(flag=token).value,
                task_split=split,
                on_progress=show,
            )
        )
    if push_to_hub:
        from openenv_cli.collect.hub import push_dataset

        url = push_to_hub and push_dataset(out, push_to_hub, private=private)
    else:
        url = None
    summary = {
        "out": str(result.out),
        "episodes": result.episodes,
        "written": result.written,
        "skipped_already_done": result.skipped,
        "errors": result.errors,
        "mean_reward": round(result.mean_reward, 6),
        "mean_reward_over_episodes": result.in_dataset,  # every row on disk, resumed runs too
        "seconds": round(result.seconds, 2),
        "episodes_per_second": round(result.written / result.seconds, 2) if result.seconds else 0.0,
        "shards": result.shards,
        "pushed_to": url,
    }
    if as_json:
        console.print_json(json.dumps(summary))
        return
    console.print(
        f"[green]Collected[/] {result.written} episodes ({result.skipped} already done) into "
        f"{result.out} in {result.seconds:.1f} s, {result.errors} with errors; mean reward "
        f"{result.mean_reward:.4f} over all {result.in_dataset} episodes in the dataset (failed "
        "ones with the reward they had when they failed)."
    )
    if url:
        console.print(f"Pushed to {url}")

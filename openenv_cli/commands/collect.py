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
            "--tasks", help="split=NAME: the tasks of a split from the server's Task API."
        ),
    ] = None,
    tasks_file: Annotated[
        Path | None,
        typer.Option("--tasks-file", help="Task ids, one per line (or JSON lines with an id)."),
    ] = None,
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
    from openenv_cli.collect.runner import collect, validate_spec
    from openenv_cli.collect.spec import CollectSpec, Sampling
    from openenv_cli.console import console

    if not targets:
        raise UsageError(
            "Name the environment: a server URL, FAMILY:NAME (gymnasium:CartPole-v1), a project "
            "folder, image:NAME or space:org/name."
        )
    from openenv_cli.collect.policies import choose_policy

    chosen = choose_policy(policy, llm)
    if tasks and tasks_file:
        raise UsageError("Give --tasks or --tasks-file, not both.")
    split = None
    if tasks:
        key, _, value = tasks.partition("=")
        if key != "split" or not value:
            raise UsageError(f"--tasks {tasks!r}: expected split=NAME.")
        split = value
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
        tasks=_read_tasks(tasks_file) if tasks_file else (),
        format=fmt,
        tokens=tokens,
        sampling=Sampling(temperature=temperature, top_p=top_p, max_tokens=max_tokens),
        step_timeout=step_timeout,
        shard_size=shard_size,
    )
    validate_spec(spec)
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
        f"{result.out} in {result.seconds:.1f} s: mean reward {result.mean_reward:.4f}, "
        f"{result.errors} with errors."
    )
    if url:
        console.print(f"Pushed to {url}")


def _read_tasks(path: Path) -> tuple[str, ...]:
    from openenv_cli.collect.runner import task_id

    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    except OSError as error:
        raise UsageError(f"--tasks-file {path}: {error.strerror}") from None
    ids = []
    for index, line in enumerate(item for item in lines if item):
        ids.append(task_id(json.loads(line), index) if line.startswith("{") else line)
    if not ids:
        raise UsageError(f"--tasks-file {path} lists no tasks.")
    return tuple(ids)

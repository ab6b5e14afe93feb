"""Many episodes at once over one or several servers, written as they finish.

``concurrency`` workers each hold a session on one of the target servers (round-robin) and
take the next planned episode when they finish one; nothing waits for the slowest episode.
Finished rows are written in shards every ``shard_size`` episodes or ``FLUSH_SECONDS``,
whichever comes first, so an interruption loses at most that much work (and ``--resume``
runs it again).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.targets import started_servers
from openenv_runtime.failures import ENV_TIMEOUT, FailureLog, too_many

from .episodes import player, run_episode
from .inputs import task_id
from .policies import Policy, make_policy
from .spec import SCHEMA_VERSION, CollectSpec, EpisodePlan, plan
from .store import Store

FLUSH_SECONDS = 5.0
ETA_AFTER = 10  # episodes ended (or a whole round of --concurrency) before an ETA is shown


@dataclass
class Progress:
    """What a run has done so far (read by the progress display)."""

    total: int
    skipped: int = 0
    concurrency: int = 1  # episodes in flight: the first ones end together
    done: int = 0
    errors: int = 0
    reward_sum: float = 0.0
    started: float = field(default_factory=time.monotonic)

    @property
    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate so far; None until a fair sample has ended (the first
        episodes to end are the quick ones, before every connection is warm)."""
        planned = self.total - self.skipped
        if self.done < min(planned, max(self.concurrency, ETA_AFTER)) or self.rate <= 0:
            return None
        return (planned - self.done) / self.rate


@dataclass
class CollectResult:
    """The outcome of ``collect``: counts, where it went, what it was."""

    out: Path
    episodes: int
    written: int
    skipped: int
    errors: int
    mean_reward: float  # over every episode in the dataset: ``in_dataset`` of them
    in_dataset: int
    seconds: float
    shards: int
    provenance: dict[str, Any]


async def _describe(url: str, headers: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    import httpx

    async with httpx.AsyncClient(timeout=30.0, headers=headers) as http:
        try:
            schema = (await http.get(f"{url}/schema")).raise_for_status().json()
            meta = (await http.get(f"{url}/metadata")).json()
        except httpx.HTTPError as error:
            raise OpenEnvError(
                f"{url} did not answer as an environment server: {error}",
                hint="Check the URL (openenv validate --url URL tells what is wrong).",
            ) from None
    return schema, meta


async def _task_ids(
    url: str, meta: dict[str, Any], split: str, headers: dict[str, str]
) -> tuple[str, ...]:
    """The ids of the tasks in ``split``, from the server's Task API."""
    import httpx

    name = meta.get("name", "")
    async with httpx.AsyncClient(timeout=30.0, headers=headers) as http:
        reply = await http.post(f"{url}/{name}/tasks", json={"split": split})
    if reply.status_code != 200:
        raise OpenEnvError(
            f"the server lists no tasks for split {split!r} (HTTP {reply.status_code}).",
            hint="Check the split's name (GET /{env}/splits), or pass --tasks-file.",
        )
    tasks = reply.json().get("tasks", [])
    return tuple(task_id(task, index) for index, task in enumerate(tasks))


async def collect(
    spec: CollectSpec,
    out: Path,
    *,
    resume: bool = False,
    token: str | None = None,
    task_split: str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> CollectResult:
    """Run ``spec`` into ``out``; see ``openenv collect --help``."""
    from openenv_cli import __version__

    started = time.monotonic()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with started_servers(spec.targets) as (urls, origin):
        schema, meta = await _describe(urls[0], headers)
        if task_split:
            spec = replace(spec, tasks=await _task_ids(urls[0], meta, task_split, headers))
        provenance = {
            "schema_version": SCHEMA_VERSION,
            "toolkit_version": __version__,
            "environment": {
                "name": meta.get("name", ""),
                "version": meta.get("version", ""),
                **origin,
            },
            "policy": spec.policy,
            "model": spec.model if spec.policy == "model" else None,
            "sampling": spec.fingerprint_fields() | {"targets": None},
            "seed": spec.seed,
        }
        store = Store(out, spec)
        already = store.open(resume, provenance)
        todo = [p for p in plan(spec) if p.episode_id not in already]
        progress = Progress(total=spec.episodes, skipped=len(already), concurrency=spec.concurrency)
        project = Path(spec.targets[0]) if Path(spec.targets[0]).is_dir() else None
        policy = make_policy(spec, schema.get("action", {}), project)
        failures = FailureLog()
        try:
            await _run_all(spec, urls, token, policy, todo, store, progress, failures, on_progress)
        finally:
            await policy.aclose()
        summary = store.write_card() if store.started else {"mean_reward": 0.0}
    if _failed(failures, progress, spec):
        left = len(todo) - progress.done
        raise OpenEnvError(
            failures.report(progress.done)
            + (f"\nThe run stopped with {left} planned episodes not run." if left else ""),
            hint=(
                f"The episodes are in {out}, failed ones marked; fix the cause and collect "
                "into a new --out (or accept them: --max-error-rate 1)."
                if store.started
                else "Nothing was written: fix the cause and run the same command again."
            ),
        )
    return CollectResult(
        out=out,
        episodes=spec.episodes,
        written=progress.done,
        skipped=len(already),
        errors=progress.errors,
        mean_reward=summary["mean_reward"],
        in_dataset=int(summary.get("episodes", 0)),
        seconds=time.monotonic() - started,
        shards=len(store.shards()),
        provenance=store.provenance,
    )


def _failed(failures: FailureLog, progress: Progress, spec: CollectSpec) -> bool:
    """Whether the run stops (or stopped) as failed: see ``openenv_runtime.failures``."""
    return failures.stops_run or too_many(progress.errors, progress.done, spec.allowed_error_rate)


async def _run_all(
    spec: CollectSpec,
    urls: list[str],
    token: str | None,
    policy: Policy,
    todo: list[EpisodePlan],
    store: Store,
    progress: Progress,
    failures: FailureLog,
    on_progress: Callable[[Progress], None] | None,
) -> None:
    """Run ``todo``; stops taking episodes once the run has failed (a failure every episode
    would meet, or more errors than ``--max-error-rate`` allows of the whole plan)."""
    from openenv_runtime import GenericEnvClient

    plays = player(policy, spec)
    queue: asyncio.Queue[EpisodePlan] = asyncio.Queue()
    for item in todo:
        queue.put_nowait(item)
    finished: list[dict[str, Any]] = []
    last_flush = time.monotonic()

    def flush(force: bool = False) -> None:
        nonlocal last_flush
        if not store.started and all(r["error"] for r in finished):
            return  # the first shard waits for a good episode, or a run that did not fail
        due = len(finished) >= spec.shard_size or time.monotonic() - last_flush >= FLUSH_SECONDS
        if finished and (force or due):
            store.write_shard(finished[:])
            finished.clear()
            last_flush = time.monotonic()

    def stopping() -> bool:
        return failures.stops_run or too_many(progress.errors, len(todo), spec.allowed_error_rate)

    async def worker(slot: int) -> None:
        url = urls[slot % len(urls)]
        env: Any = None
        try:
            while not stopping():
                try:
                    item = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                if env is None:
                    env = GenericEnvClient(url, token=token, message_timeout=spec.step_timeout)
                row = await run_episode(env, plays, item, spec)
                kind = row["error_kind"]
                if kind.startswith("env:CONNECTION") or kind == ENV_TIMEOUT:
                    await _close(env)  # a broken session: the next episode gets a new one
                    env = None
                finished.append(row)
                progress.done += 1
                if row["error"]:
                    progress.errors += 1
                    failures.add(kind, row["error"])
                progress.reward_sum += row["total_reward"]
                flush()
                if on_progress:
                    on_progress(progress)
        finally:
            if env is not None:
                await _close(env)

    workers = [asyncio.create_task(worker(i)) for i in range(min(spec.concurrency, len(todo)))]
    try:
        await asyncio.gather(*workers)
    finally:
        for task in workers:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*workers, return_exceptions=True)
        if finished and not store.started and not _failed(failures, progress, spec):
            store.start()  # a run within its error rate keeps its episodes, errors and all
        flush(force=True)  # what finished is kept, even on Ctrl-C


async def _close(env: Any) -> None:
    with contextlib.suppress(Exception):
        await env.close()


def require_packages(spec: CollectSpec, command: str) -> None:
    """The optional packages a run of ``spec`` needs, checked before it starts (an error
    names the extra to install)."""
    from openenv_cli.extras import require

    modules = ["aiohttp", "orjson"]  # the rollouts' mapping and model client
    if spec.format == "parquet":
        modules.append("pyarrow")
    if spec.policy == "model":
        modules.append("openai")
    elif spec.policy == "random":
        modules.append("jsf")
    require(command, *modules)


def validate_spec(spec: CollectSpec) -> None:
    """Refuse impossible options before anything starts."""
    if spec.episodes < 1:
        raise UsageError("--episodes must be at least 1.")
    if spec.group_size < 1 or spec.concurrency < 1 or spec.max_turns < 1:
        raise UsageError("--group-size, --concurrency and --max-turns must be at least 1.")
    if spec.format not in ("parquet", "jsonl"):
        raise UsageError(f"--format {spec.format!r}: choose parquet or jsonl.")
    for url in (*spec.targets, spec.llm or ""):
        if "@" in urlsplit(url).netloc:
            raise UsageError(
                f"{urlsplit(url).hostname}: a URL with a user name or password would be recorded "
                "in the dataset's provenance.",
                hint="Pass server tokens with --token or OPENENV_API_KEY instead.",
            )
    if spec.tokens and spec.policy != "model":
        raise UsageError("--tokens records the model's token ids: it needs a model policy.")

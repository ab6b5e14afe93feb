"""One episode against one session, played by the rollouts' episode player, as a dataset row.

The row it returns is the dataset's unit (see ``store.ROW_FIELDS``). A failure of the
environment or the model ends the episode with ``error`` and ``error_kind`` set (the kinds of
``openenv_runtime.failures``); the runner decides whether the run goes on.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from openenv_runtime import EnvError, GenericEnvClient
from openenv_runtime.failures import ModelFailure, env_kind
from openenv_runtime.rollouts.episode import Episode, Player
from openenv_runtime.rollouts.mapping import default_to_message

from .policies import Policy
from .spec import SCHEMA_VERSION, CollectSpec, EpisodePlan


def new_row(plan: EpisodePlan) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "episode_id": plan.episode_id,
        "group_id": plan.group_id,
        "seed": plan.seed,
        "task_id": plan.task_id or "",
        "messages": [],
        "actions": [],
        "observations": [],
        "rewards": [],
        "total_reward": 0.0,
        "num_steps": 0,
        "done": False,
        "truncated": False,
        "error": "",
        "error_kind": "",
        "invalid_actions": 0,
        "duration_s": 0.0,
        "env_latencies_s": [],
        "model_latencies_s": [],
        "prompt_ids": [],
        "completion_ids": [],
        "logprobs": [],
        "env_mask": [],
        "token_drift": False,
    }


def player(policy: Policy, spec: CollectSpec) -> Player:
    """The player of every episode of a run of ``spec``."""
    return Player(
        policy=policy,
        to_message=default_to_message,
        max_turns=spec.max_turns,
        system_prompt=spec.system_prompt,
        env_timeout=spec.step_timeout,
        record_calls=spec.tokens,
    )


async def run_episode(
    env: GenericEnvClient, player: Player, plan: EpisodePlan, spec: CollectSpec
) -> dict[str, Any]:
    """Play ``plan`` on the connected ``env``; returns the episode's row."""
    episode = Episode(
        plan.index,
        0,
        0,
        plan.seed,
        None,  # no prompt: the reset observation is the first user message
        task_id=plan.task_id or None,
        rng=random.Random(plan.seed * 1_000_003 + plan.index),
    )
    started = time.perf_counter()
    row = new_row(plan)
    try:
        await player.play(episode, env)
    except EnvError as error:
        row["error"], row["error_kind"] = error.message or str(error), env_kind(error)
    except ModelFailure as failure:
        row["error"], row["error_kind"] = str(failure), failure.kind
    except TimeoutError as error:
        row["error"], row["error_kind"] = "timed out", env_kind(error)
    except Exception as error:  # a broken policy callable: recorded, the run goes on
        row["error"], row["error_kind"] = f"{type(error).__name__}: {error}", "policy"
    _fill(row, episode)
    row["duration_s"] = time.perf_counter() - started
    return row


def _fill(row: dict[str, Any], episode: Episode) -> None:
    """The row's record of ``episode``: its conversation (the final observation included),
    steps, rewards, latencies and its first token sample (of the calls recorded: --tokens)."""
    row["observations"] = [json.dumps(dict(o), sort_keys=True) for o in episode.observations]
    row["actions"] = [json.dumps(a, sort_keys=True) for a in episode.actions]
    row["rewards"] = episode.rewards
    row["total_reward"] = float(sum(episode.rewards))
    row["num_steps"] = episode.steps
    row["invalid_actions"] = episode.invalid_actions
    row["env_latencies_s"] = episode.env_seconds
    row["model_latencies_s"] = episode.model_seconds
    messages = [_message(m) for m in episode.messages]
    if episode.done and episode.steps and not row["error"]:
        last = default_to_message(dict(episode.observations[-1]))
        messages.append({"role": "user", "content": last})
    row["messages"] = messages
    if not row["error"]:
        row["done"] = episode.done
        row["truncated"] = not episode.done
    _assemble_tokens(row, episode)


def _assemble_tokens(row: dict[str, Any], episode: Episode) -> None:
    """The episode's token arrays: the first sample ``llm.samples.assemble`` makes of its
    calls.

    A later prompt that does not extend the earlier prompt and completion token for token
    starts a new sample there; the row keeps the first and sets ``token_drift``.
    """
    entries = [e for e in episode.entries if e.completion_token_ids]
    if not entries:
        return
    from openenv_runtime.llm.samples import assemble

    samples = assemble(entries)
    first = samples[0]
    row["prompt_ids"] = first.prompt_ids
    row["completion_ids"] = first.completion_ids
    row["logprobs"] = first.logprobs
    row["env_mask"] = first.env_mask
    row["token_drift"] = len(samples) > 1


def _message(message: dict[str, Any]) -> dict[str, str]:
    content = message.get("content")
    return {
        "role": str(message.get("role", "")),
        "content": content if isinstance(content, str) else json.dumps(content),
    }

"""One episode against one session: reset, then turns of policy and step until done.

The row it returns is the dataset's unit (see ``store.ROW_FIELDS``). A failure of the
environment or the model ends the episode with ``error`` and ``error_kind`` set (the kinds of
``openenv_runtime.failures``); the runner decides whether the run goes on.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

from openenv_runtime import EnvError, GenericEnvClient
from openenv_runtime.failures import ModelFailure, env_kind

from .policies import Decision, Policy, observation_text
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


async def run_episode(
    env: GenericEnvClient,
    policy: Policy,
    plan: EpisodePlan,
    spec: CollectSpec,
) -> dict[str, Any]:
    """Play ``plan`` on the connected ``env`` with ``policy``; returns the episode's row."""
    row = new_row(plan)
    rng = random.Random(plan.seed * 1_000_003 + plan.index)
    started = time.perf_counter()
    try:
        reset_kwargs: dict[str, Any] = {"seed": plan.seed}
        if plan.task_id:
            reset_kwargs["task_id"] = plan.task_id
        result = await _timed(row, env.reset(**reset_kwargs), spec.step_timeout)
        observation = dict(result.observation)
        row["observations"].append(json.dumps(observation, sort_keys=True))
        messages: list[dict[str, Any]] = []
        if spec.system_prompt:
            messages.append({"role": "system", "content": spec.system_prompt})
        messages.append({"role": "user", "content": observation_text(observation)})
        done = bool(result.done)
        for _turn in range(spec.max_turns):
            if done:
                break
            decision = await policy.act(messages, observation, rng)
            row["model_latencies_s"].append(decision.model_seconds)
            _record_tokens(row, decision)
            messages.append(decision.message)
            if decision.action is None:
                row["invalid_actions"] += 1
                messages.append({"role": "user", "content": decision.problem})
                continue
            try:
                result = await _timed(row, env.step(decision.action), spec.step_timeout)
            except EnvError as error:
                if error.code != "VALIDATION_ERROR":
                    raise
                row["invalid_actions"] += 1
                messages.append({"role": "user", "content": f"Invalid action: {error.message}"})
                continue
            observation = dict(result.observation)
            reward = float(result.reward or 0.0)
            row["actions"].append(json.dumps(decision.action, sort_keys=True))
            row["observations"].append(json.dumps(observation, sort_keys=True))
            row["rewards"].append(reward)
            row["total_reward"] += reward
            row["num_steps"] += 1
            done = bool(result.done)
            messages.append({"role": "user", "content": observation_text(observation)})
        row["done"] = done
        row["truncated"] = not done
    except EnvError as error:
        row["error"], row["error_kind"] = error.message or str(error), env_kind(error)
    except ModelFailure as failure:
        row["error"], row["error_kind"] = str(failure), failure.kind
    except TimeoutError as error:
        row["error"], row["error_kind"] = "timed out", env_kind(error)
    except Exception as error:  # a broken policy callable: recorded, the run goes on
        row["error"], row["error_kind"] = f"{type(error).__name__}: {error}", "policy"
    row["messages"] = [_message(m) for m in messages] if "messages" in locals() else []
    _assemble_tokens(row)
    row["duration_s"] = time.perf_counter() - started
    return row


async def _timed(row: dict[str, Any], call: Any, timeout: float) -> Any:
    started = time.perf_counter()
    result = await asyncio.wait_for(call, timeout)
    row["env_latencies_s"].append(time.perf_counter() - started)
    return result


def _record_tokens(row: dict[str, Any], decision: Decision) -> None:
    """Keep one model call's tokens as a trace entry (assembled when the episode ends)."""
    if decision.completion_ids:
        row.setdefault("_entries", []).append(
            {
                "session_id": row["episode_id"],
                "turn": len(row.get("_entries", [])),
                "timestamp": 0.0,
                "prompt_token_ids": decision.prompt_ids,
                "completion_token_ids": decision.completion_ids,
                "per_token_logps": decision.logprobs,
            }
        )


def _assemble_tokens(row: dict[str, Any]) -> None:
    """The episode's token arrays: the first sample ``capture.assemble`` makes of its calls.

    A later prompt that does not extend the earlier prompt and completion token for token
    starts a new sample there; the row keeps the first and sets ``token_drift``.
    """
    entries = row.pop("_entries", [])
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

"""The same episodes for other trainers, duck-typed (the frameworks are not imported).

- verl: ``to_verl(episode)`` has ``AgentLoopOutput``'s fields (``AgentLoopOutput(**d)``).
- ART: ``to_art(episode)`` has ``Trajectory``'s fields; assistant turns are OpenAI ``Choice``
  dicts carrying the sampled tokens' log-probabilities (``token_id:<id>`` tokens).
- SkyRL: ``SkyRLTextEnv(url)`` is a text environment with ``BaseTextEnv``'s methods
  (``init(prompt)``, ``step(action) -> {observations, reward, done, metadata}``, ``close()``).
"""

from __future__ import annotations

import json
from typing import Any

from ..http_reads import read_schema
from ..llm.client import LLMResponse
from .episode import Episode
from .mapping import ActionError, default_to_action, default_to_message


def to_verl(episode: Episode) -> dict[str, Any]:
    """verl's ``AgentLoopOutput`` fields: response tokens with their mask and log-probabilities."""
    sample = episode.sample
    return {
        "prompt_ids": sample.prompt_ids,
        "response_ids": sample.completion_ids,
        "response_mask": sample.env_mask,
        "response_logprobs": sample.logprobs,
        "reward_score": episode.reward,
        "num_turns": len(episode.messages),
        "metrics": {},
        "extra_fields": {
            "rollout_failed": episode.failed,
            "error": episode.error,
            "invalid_actions": episode.invalid_actions,
            "samples": len(episode.samples),
        },
    }


def to_art(episode: Episode) -> dict[str, Any]:
    """ART's ``Trajectory`` fields; ``art.Trajectory(**to_art(e))`` where ART is installed."""
    calls = iter(episode.entries)
    items: list[Any] = []
    for message in episode.messages:
        if message.get("role") != "assistant":
            items.append(message)
            continue
        entry = next(calls, None)
        content: list[dict[str, Any]] = [
            {"token": f"token_id:{t}", "logprob": lp, "bytes": None, "top_logprobs": []}
            for t, lp in zip(
                entry.completion_token_ids or [] if entry else [],
                entry.per_token_logps or [] if entry else [],
                strict=True,
            )
        ]
        items.append(
            {
                "index": 0,
                "finish_reason": (entry.finish_reason if entry else None) or "stop",
                "message": message,
                "logprobs": {"content": content},
            }
        )
    return {
        "messages_and_choices": items,
        "reward": episode.reward,
        "metrics": {"turns": episode.turns, "invalid_actions": episode.invalid_actions},
        "metadata": {"rollout_failed": episode.failed, "error": episode.error or ""},
    }


class SkyRLTextEnv:
    """An environment server as a SkyRL text environment (one session per instance)."""

    def __init__(self, url: str, *, seed: int | None = None, **client_kwargs: Any) -> None:
        from ..client import GenericEnvClient

        schema = read_schema(url, token=client_kwargs.get("token")).get("action") or {}
        self._to_action = default_to_action(schema)
        self._client = GenericEnvClient(url, **client_kwargs).sync()
        self._seed = seed
        self.turns = 0

    def init(self, prompt: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Reset; the first observation joins the prompt as a user message."""
        result = self._client.reset(seed=self._seed)
        self.turns = 0
        text = default_to_message(result.observation)
        return [*prompt, {"role": "user", "content": text}] if text else list(prompt), {}

    def step(self, action: str) -> dict[str, Any]:
        """One action from the model's text: ``observations``, ``reward``, ``done``, ``metadata``."""
        self.turns += 1
        try:
            parsed = self._to_action(LLMResponse(action))
        except ActionError as refused:
            message = {"role": "user", "content": str(refused)}
            return {"observations": [message], "reward": 0.0, "done": False, "metadata": {}}
        result = self._client.step(parsed)
        observation = {"role": "user", "content": default_to_message(result.observation)}
        return {
            "observations": [] if result.done else [observation],
            "reward": float(result.reward or 0.0),
            "done": bool(result.done),
            "metadata": {"observation": json.loads(json.dumps(dict(result.observation)))},
        }

    def close(self) -> None:
        self._client.close()

"""The reference's TRL rollout builder on the episodes of ``benchmarks/training/rollouts.py``.

Run by ``benchmarks/training/rollouts.py --parts reference`` with the python of the reference
``openenv`` 0.10.0 virtualenv (``tests/support/reference.py`` builds it); it imports only the
reference and httpx. It drives ``build_harness_rollout_func`` (``openenv.core.harness``) with
its ``MCPHarnessAdapter`` and ``StepEnvSessionAdapter`` over its ``GenericEnvClient``, on the
same environment server and stand-in model server as ours, and prints one JSON object.

What this script supplies, because the reference leaves it to the user: the model step (the
reference's ``OpenAIClient`` returns no token ids or log-probabilities, so one blocking httpx
call per turn asks the server for them, as vLLM's fields carry them), the session factory (a
seed per group, the prompt plus the reset observation as the first message) and one ``say``
tool built from the environment's action (``{"text": ...}``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import httpx
from openenv.core import GenericAction, GenericEnvClient
from openenv.core.env_server.mcp_types import Tool
from openenv.core.harness import (
    HarnessRunLimits,
    MCPHarnessAdapter,
    ModelStepResult,
    ResourceSessionFactory,
    StepEnvSessionAdapter,
    build_harness_rollout_func,
)
from openenv.core.llm_client import LLMResponse, ToolCall

SAY = Tool(
    name="say",
    description="Say something to the environment.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
)
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": SAY.name,
            "description": SAY.description,
            "parameters": SAY.input_schema,
        },
    }
]


class Sessions(ResourceSessionFactory[StepEnvSessionAdapter]):
    """One environment session per episode; the members of a group share a seed."""

    def __init__(self, env_url: str, group: int) -> None:
        self.env_url = env_url
        self.group = group
        self.created = 0

    def create(self, task: Any, seed: int | None = None, episode_id: str | None = None) -> Any:
        seed = self.created // self.group if seed is None else seed
        self.created += 1
        return StepEnvSessionAdapter(
            GenericEnvClient(base_url=self.env_url),
            task=task,
            seed=seed,
            tool_specs=[SAY],
            action_builder=lambda name, arguments: GenericAction(**arguments),
            initial_messages_builder=lambda result, task: [
                {"role": "user", "content": f"{task}\n\n{result.observation.get('text', '')}"}
            ],
        )


def model_step_builder(llm: str, model: str, client: httpx.Client, calls: list[int]) -> Any:
    def build(trainer: Any, session: Any) -> Any:
        def step(messages: list[Any], tools: list[Any], sampling: dict[str, Any]) -> Any:
            body = {
                "model": model,
                "messages": messages,
                "tools": OPENAI_TOOLS,
                "return_token_ids": True,
                "logprobs": True,
                **sampling,
            }
            answer = client.post(f"{llm}/v1/chat/completions", json=body)
            calls.append(1)
            answer.raise_for_status()
            data = answer.json()
            choice = data["choices"][0]
            message = choice["message"]
            tool_calls = [
                ToolCall(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in message.get("tool_calls") or []
            ]
            return ModelStepResult(
                response=LLMResponse(content=message.get("content") or "", tool_calls=tool_calls),
                prompt_ids=list(data["prompt_token_ids"]),
                completion_ids=list(choice["token_ids"]),
                logprobs=[e["logprob"] for e in choice["logprobs"]["content"]],
            )

        return step

    return build


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", required=True)
    parser.add_argument("--llm", required=True)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=96)
    args = parser.parse_args()
    prompts = [f"prompt {i}" for i in range(args.prompts) for _ in range(args.group)]
    calls: list[int] = []
    with httpx.Client(timeout=60) as client:
        rollout = build_harness_rollout_func(
            session_factory=Sessions(args.env, args.group),
            harness_adapter=MCPHarnessAdapter(),
            model_step_builder=model_step_builder(args.llm, "m", client, calls),
            limits=HarnessRunLimits(max_turns=args.turns, sampling={"max_tokens": args.max_tokens}),
        )
        rollout(prompts[:1], None)  # warm-up: the first connections
        calls.clear()
        started = time.perf_counter()
        out = rollout(prompts, None)
        wall = time.perf_counter() - started
    json.dump(
        {
            "builder": "openenv 0.10.0 build_harness_rollout_func + MCPHarnessAdapter",
            "episodes": len(out["prompt_ids"]),
            "wall_s": wall,
            "completion_tokens": sum(len(c) for c in out["completion_ids"]),
            "steps_reported": sum(m.get("step_count", 0) for m in out["verify_metrics"]),
            "model_calls": len(calls),
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()

"""Run openenv 0.10.0's clients against a server; print what they saw as JSON.

Usage: python ref10_clients.py --mcp URL --plain URL   (with the reference's python)
"""

import argparse
import json
from typing import Any, Dict

from openenv.auto import AutoEnv
from openenv.core import GenericEnvClient, GenericAction, MCPToolClient
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.types import Action, Observation, State


class PlainAction(Action):
    message: str


class PlainObservation(Observation):
    echoed_message: str = ""
    message_length: int = 0


class PlainClient(EnvClient[PlainAction, PlainObservation, State]):
    # written the way the reference's `openenv init` template writes clients
    def _step_payload(self, action: PlainAction) -> Dict[str, Any]:
        return {"message": action.message}

    def _parse_result(self, payload: Dict[str, Any]) -> StepResult[PlainObservation]:
        obs = payload.get("observation", {})
        observation = PlainObservation(
            echoed_message=obs.get("echoed_message", ""),
            message_length=obs.get("message_length", 0),
            done=payload.get("done", False),
            reward=payload.get("reward"),
            metadata=obs.get("metadata", {}),
        )
        return StepResult(
            observation=observation,
            reward=payload.get("reward"),
            done=payload.get("done", False),
            metadata=payload.get("metadata"),
        )

    def _parse_state(self, payload: Dict[str, Any]) -> State:
        return State(episode_id=payload.get("episode_id"), step_count=payload.get("step_count", 0))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mcp", required=True)
    parser.add_argument("--plain", required=True)
    args = parser.parse_args()
    out: Dict[str, Any] = {}

    with MCPToolClient(base_url=args.mcp).sync() as tools:  # its tool calls are async-only
        tools.reset()
        out["mcp_tools"] = sorted(t.name for t in tools.list_tools())
        out["mcp_echo"] = tools.call_tool("echo", message="hi")
        out["mcp_add"] = tools.call_tool("add", a=2, b=3)

    with GenericEnvClient(base_url=args.plain) as env:
        env.reset()
        result = env.step(GenericAction(message="Hello"))
        out["generic"] = {"observation": result.observation, "reward": result.reward, "done": result.done}

    with PlainClient(base_url=args.plain) as env:  # plain blocking calls, no .sync()
        env.reset()
        result = env.step(PlainAction(message="abc"))
        out["typed"] = {
            "echoed": result.observation.echoed_message,
            "reward": result.reward,
            "metadata": result.metadata,
            "step_count": env.state().step_count,
        }

    auto = AutoEnv.from_env("plain", base_url=args.plain, skip_install=True)
    with auto as env:
        env.reset()
        result = env.step({"message": "auto"})
        out["auto"] = {"type": type(auto).__name__, "reward": result.reward}
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()

"""Serve an environment with openenv 0.10.0's own server (run with the reference's python).

Usage: python ref10_server.py --port P --kind mcp|plain
"""

import argparse
from typing import Any, Optional
from uuid import uuid4

import uvicorn
from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Action, Observation, State


class PlainAction(Action):
    message: str


class PlainObservation(Observation):
    echoed_message: str = ""
    message_length: int = 0


class PlainEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid4()))

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kw: Any) -> PlainObservation:
        self._state = State(episode_id=episode_id or str(uuid4()))
        return PlainObservation(echoed_message="ready", reward=0.0)

    def step(self, action: PlainAction, timeout_s: Optional[float] = None, **kw: Any) -> PlainObservation:
        self._state.step_count += 1
        return PlainObservation(
            echoed_message=action.message,
            message_length=len(action.message),
            reward=0.1 * len(action.message),
            metadata={"step": self._state.step_count},
        )

    @property
    def state(self) -> State:
        return self._state


class ToolEnvironment(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("tool_echo")

        @mcp.tool
        def echo(message: str) -> str:
            """Return the message."""
            return message

        @mcp.tool
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        super().__init__(mcp)
        self._state = State(episode_id=str(uuid4()))

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kw: Any) -> Observation:
        return Observation(metadata={"status": "ready"})

    def _step_impl(self, action: Action, timeout_s: Optional[float] = None, **kw: Any) -> Observation:
        return Observation()

    @property
    def state(self) -> State:
        return self._state


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--kind", choices=["mcp", "plain"], required=True)
    parser.add_argument("--max-concurrent-envs", type=int, default=4)
    args = parser.parse_args()
    if args.kind == "mcp":
        app = create_app(ToolEnvironment, CallToolAction, CallToolObservation, env_name="tool_echo", max_concurrent_envs=4)
    else:
        app = create_app(PlainEnvironment, PlainAction, PlainObservation, env_name="plain", max_concurrent_envs=args.max_concurrent_envs)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

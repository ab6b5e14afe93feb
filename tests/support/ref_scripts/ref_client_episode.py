"""Drive one echo episode with openenv-core's client (run with the reference venv).

    python ref_client_episode.py URL [--mode sync|async]

reset, step "Hello", step "abc", state, a step with an invalid action (to see what the
reference client raises), a step after the error (is the session still usable?), close.
Prints one JSON document with everything observed; exits 0 unless the script itself
breaks (errors from the server are recorded, not raised).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import traceback
from typing import Any, Dict

from openenv.core import EnvClient
from openenv.core.client_types import StepResult
from openenv.core.env_server.types import Action, Observation, State


class EchoAction(Action):
    message: str


class EchoObservation(Observation):
    echoed_message: str = ""
    message_length: int = 0


class EchoEnv(EnvClient[EchoAction, EchoObservation, State]):
    """A typed client, the way openenv-core users write one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.raw_payloads: list[Dict[str, Any]] = []  # what _parse_result was handed

    def _step_payload(self, action: EchoAction) -> Dict[str, Any]:
        return {"message": action.message}

    def _parse_result(self, payload: Dict[str, Any]) -> StepResult[EchoObservation]:
        self.raw_payloads.append(payload)
        obs = payload.get("observation", {})
        observation = EchoObservation(
            echoed_message=obs.get("echoed_message", ""),
            message_length=obs.get("message_length", 0),
            done=payload.get("done", False),
            reward=payload.get("reward"),
            metadata=obs.get("metadata", {}),
        )
        return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: Dict[str, Any]) -> State:
        return State(**payload)


def _result(result: StepResult[EchoObservation], raw: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "observation": result.observation.model_dump(exclude={"reward", "done", "metadata"}),
        "reward": result.reward,
        "done": result.done,
        "metadata": result.observation.metadata,
        "metadata_on_wire": "metadata" in raw.get("observation", {}),
        "raw": raw,
    }


def _error(exc: BaseException) -> Dict[str, Any]:
    return {
        "type": type(exc).__name__,
        "module": type(exc).__module__,
        "message": str(exc),
        "attributes": sorted(k for k in vars(exc) if not k.startswith("_")),
    }


class _Sync:
    """Adapts the ``.sync()`` wrapper to the awaitable calls the episode makes."""

    def __init__(self, client: Any) -> None:
        self._client = client

    async def reset(self, **kw: Any) -> Any:
        return self._client.reset(**kw)

    async def step(self, action: Any) -> Any:
        return self._client.step(action)

    async def state(self) -> Any:
        return self._client.state()


async def _episode(env: Any, raw: EchoEnv, out: Dict[str, Any]) -> None:
    res = await env.reset()
    out["reset"] = _result(res, raw.raw_payloads[-1])
    out["steps"] = []
    for message in ("Hello", "abc"):
        res = await env.step(EchoAction(message=message))
        out["steps"].append(_result(res, raw.raw_payloads[-1]))
    state = await env.state()
    out["state"] = state.model_dump()
    out["state_type"] = type(state).__name__

    # An action whose message is not a string: built without validation, so the
    # client sends it and the server must reject it.
    bad = EchoAction.model_construct(message=12345)
    try:
        await env.step(bad)
        out["error"] = None
    except Exception as exc:  # noqa: BLE001 - recording what the reference raises
        out["error"] = _error(exc)

    try:
        res = await env.step(EchoAction(message="after"))
        out["after_error"] = _result(res, raw.raw_payloads[-1])
    except Exception as exc:  # noqa: BLE001
        out["after_error"] = {"exception": _error(exc)}


def _close_info(ws: Any) -> Dict[str, Any]:
    if ws is None:
        return {"code": None, "reason": None}
    return {"code": getattr(ws, "close_code", None), "reason": getattr(ws, "close_reason", None)}


async def run_async(url: str) -> Dict[str, Any]:
    client = EchoEnv(base_url=url)
    out: Dict[str, Any] = {"mode": "async", "ws_url": client._ws_url}
    async with client as env:
        ws = client._ws
        await _episode(env, client, out)
    out["closed"] = client._ws is None
    out["close"] = _close_info(ws)
    return out


async def run_sync(url: str) -> Dict[str, Any]:
    client = EchoEnv(base_url=url)
    out: Dict[str, Any] = {"mode": "sync", "ws_url": client._ws_url}
    sync_client = client.sync()
    with sync_client:
        ws = client._ws
        await _episode(_Sync(sync_client), client, out)
    out["closed"] = client._ws is None
    out["close"] = _close_info(ws)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--mode", choices=["sync", "async"], default="sync")
    args = parser.parse_args()
    import importlib.metadata

    try:
        runner = run_sync if args.mode == "sync" else run_async
        out = asyncio.run(runner(args.url))
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return 1
    out["reference_version"] = importlib.metadata.version("openenv-core")
    json.dump(out, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

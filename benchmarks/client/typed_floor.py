"""The least work a typed client on pydantic does per step: the floor the client benchmarks measure.

Not a script: ``client_cost.py`` (CPU time) and ``client_callgrind.py`` (instructions) import
it, so both measure the same floor beside the lean client and ``EnvClient``.

Per step the floor serializes the action with its pydantic serializer, sends it in the
protocol's step frame over the lean connection, and reads the reply with one pydantic-core
call (the envelope validated straight from the JSON, the observation built on the way), then
makes a ``StepResult``. That is the cheapest way pydantic offers, measured under callgrind
(about 12,900 instructions for the bench's reply, against 16,300 for decoding it with
``pydantic_core.from_json`` and validating the observation's dict). It skips everything
``EnvClient`` adds: no checks of the session's state, no resume numbering, no fallback for
replies it does not expect, and ``reward``/``done`` are not copied into the observation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter
from typing_extensions import TypedDict

from openenv_cli.bench.wsclient import LeanConnection
from openenv_runtime import Observation, StepResult
from openenv_runtime.protocol import step_frame

FloorReader = Callable[[str | bytes], StepResult[Any]]

# TypedDict's functional form, typed as a plain call: the observation's type is a run-time value.
_typed_dict: Any = TypedDict


def floor_reader(observation: type[Observation]) -> FloorReader:
    """Reads an ``observation`` reply of ``observation``'s class in one pydantic-core call."""
    data = _typed_dict(
        "Data",
        {"observation": observation, "reward": float | int | bool | None, "done": bool},
    )
    envelope = _typed_dict("Envelope", {"type": Literal["observation"], "data": data})
    validate = TypeAdapter(envelope).validator.validate_json

    def read(raw: str | bytes) -> StepResult[Any]:
        body = validate(raw)["data"]
        return StepResult(body["observation"], body["reward"], body["done"])

    return read


async def floor_step(conn: LeanConnection, action: BaseModel, read: FloorReader) -> StepResult[Any]:
    """One typed step at the floor's cost."""
    frame = step_frame(action.__pydantic_serializer__.to_json(action).decode())
    return read(await conn.request(frame))

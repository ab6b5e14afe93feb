"""The checkpoint check: for an environment that opts in (``SUPPORTS_CHECKPOINT = True``).

Over two WebSocket sessions of the served app: the first resets, takes a random number of
steps, checkpoints, and takes one more step (the uninterrupted twin). The second, a fresh
instance with no reset, restores the checkpoint and takes the same step. The two next steps
(observation, reward, done) and the states after them must be equal. An environment that
does not opt in gets the check skipped, with how to opt in.
"""

from __future__ import annotations

import random
from typing import Any

from openenv_cli.validation.results import CheckResult, failed, passed, skipped
from openenv_cli.validation.wire import Refused, ws_request, ws_url

MAX_STEPS_BEFORE = 5
NOT_OFFERED = ("CHECKPOINT_UNSUPPORTED", "UNKNOWN_TYPE")


def check_checkpoint(
    prefix: str,
    base_url: str,
    action: dict[str, Any],
    timeout: float,
    token: str | None = None,
    seed: int | None = None,
) -> CheckResult:
    """Checkpoint mid-episode, restore into a fresh instance, compare the next step."""
    from websockets.exceptions import WebSocketException
    from websockets.sync.client import connect

    name = f"{prefix}.checkpoint"
    seed = random.randrange(1 << 30) if seed is None else seed
    rng = random.Random(seed)
    before = rng.randint(1, MAX_STEPS_BEFORE)
    headers = {"Authorization": f"Bearer {token}"} if token else None
    url = ws_url(base_url)

    def opened() -> Any:
        return connect(url, open_timeout=timeout, additional_headers=headers, max_size=64 << 20)

    def request(ws: Any, frame: dict[str, Any], expect: str) -> dict[str, Any]:
        return ws_request(ws, frame, expect, timeout)

    step = {"type": "step", "data": action}
    try:
        with opened() as twin, opened() as fresh:
            request(twin, {"type": "reset", "data": {"seed": seed}}, "observation")
            taken = 0
            for _ in range(before):
                data = request(twin, step, "observation")
                taken += 1
                if data.get("done"):
                    request(twin, {"type": "reset", "data": {"seed": seed}}, "observation")
                    taken = 0
            ckpt = request(twin, {"type": "checkpoint"}, "checkpoint")
            expected = request(twin, step, "observation")
            expected_state = request(twin, {"type": "state"}, "state")
            restore = {"type": "restore", "data": {"id": ckpt["id"], "digest": ckpt["digest"]}}
            request(fresh, restore, "restore")
            got = request(fresh, step, "observation")
            got_state = request(fresh, {"type": "state"}, "state")
    except Refused as exc:
        if exc.code in NOT_OFFERED:
            return skipped(
                name,
                "The environment does not opt in to checkpoints (set SUPPORTS_CHECKPOINT = True "
                "and implement export_state()/import_state() to have them checked).",
            )
        return failed(
            name,
            f"{exc}",
            "Make export_state() return everything the next step depends on, as JSON data "
            "or bytes, and import_state(state) rebuild it.",
            details={"seed": seed, "steps_before": before},
        )
    except (OSError, TimeoutError, WebSocketException, ValueError) as exc:
        return failed(
            name,
            f"The checkpoint check could not talk to the server: {type(exc).__name__}: {exc}",
            "Look at the server log.",
            details={"seed": seed},
        )
    found = differences(expected, got) + [
        f"state.{d}" for d in differences(expected_state, got_state)
    ]
    details = {"seed": seed, "steps_before": taken, "checkpoint_bytes": ckpt.get("size")}
    if found:
        return failed(
            name,
            f"After a restore at step {taken} the next step differs from the uninterrupted "
            f"episode's in: {', '.join(found[:8])}.",
            "Include every part of the state the next step reads in export_state() (random "
            "generators' state too) and restore all of it in import_state().",
            details={**details, "expected": expected, "got": got},
        )
    return passed(
        name,
        f"Checkpoint at step {taken} ({ckpt.get('size')} bytes) restored into a fresh instance: "
        "the next step equals the uninterrupted episode's.",
        details=details,
    )


def differences(expected: Any, got: Any, path: str = "") -> list[str]:
    """Dotted paths where two JSON values differ."""
    if isinstance(expected, dict) and isinstance(got, dict):
        out: list[str] = []
        for key in sorted(set(expected) | set(got)):
            where = f"{path}.{key}" if path else str(key)
            if key not in expected or key not in got:
                out.append(where)
            else:
                out.extend(differences(expected[key], got[key], where))
        return out
    return [] if expected == got else [path or "(value)"]

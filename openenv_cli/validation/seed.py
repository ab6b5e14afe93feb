"""The seed check: two resets with the same seed must start the same episode.

Groups of episodes that are compared with each other (``EnvPool.reset_group``, GRPO's
groups in the rollouts) reset every member with one seed and rely on identical first
observations. Over two WebSocket sessions of the served app, one after the other (an
environment that serves one session at a time is checked too), each resets with the same
seed and takes the same few steps; the first observations, then the steps, must be equal.
An environment whose first observation differs ignores its seed (or seeds only part of what
reset draws): reported with the fix. There is no declaration of seeded resets to read:
every environment gets a seed over the wire, and a deterministic one passes.
"""

from __future__ import annotations

import random
from typing import Any

from openenv_cli.validation.checkpoint import differences
from openenv_cli.validation.results import CheckResult, failed, passed, warned
from openenv_cli.validation.wire import Refused, ws_request, ws_url

STEPS = 3
SEED_FIX = (
    "Make reset() draw everything from its `seed` argument: seed every random generator it "
    "uses (random.Random(seed), numpy.random.default_rng(seed), the simulator's own seed) and "
    "keep `seed` in reset's signature (the server passes it only to a reset that accepts it)."
)


def check_seeded_reset(
    prefix: str,
    base_url: str,
    action: dict[str, Any],
    timeout: float,
    token: str | None = None,
    seed: int | None = None,
    steps: int = STEPS,
) -> CheckResult:
    """Two sessions reset with one seed and take the same ``steps``; compare what they saw."""
    from websockets.exceptions import WebSocketException
    from websockets.sync.client import connect

    name = f"{prefix}.seed"
    seed = random.randrange(1 << 30) if seed is None else seed
    headers = {"Authorization": f"Bearer {token}"} if token else None
    url = ws_url(base_url)

    def episode() -> list[dict[str, Any]]:
        """The reset's reply, then each step's, of one session."""
        with connect(
            url, open_timeout=timeout, additional_headers=headers, max_size=64 << 20
        ) as ws:
            seen = [
                ws_request(ws, {"type": "reset", "data": {"seed": seed}}, "observation", timeout)
            ]
            for _ in range(steps):
                if seen[-1].get("done"):
                    break
                seen.append(
                    ws_request(ws, {"type": "step", "data": action}, "observation", timeout)
                )
            return seen

    try:
        first, second = episode(), episode()
    except Refused as exc:
        return failed(
            name,
            f"A seeded episode could not be played: {exc}",
            "reset(seed=...) and the example action must be accepted; see the server log.",
            details={"seed": seed},
        )
    except (OSError, TimeoutError, WebSocketException, ValueError) as exc:
        return failed(
            name,
            f"The seed check could not talk to the server: {type(exc).__name__}: {exc}",
            "Look at the server log.",
            details={"seed": seed},
        )
    details: dict[str, Any] = {"seed": seed, "steps": min(len(first), len(second)) - 1}
    start = differences(first[0], second[0])
    if start:
        return warned(
            name,
            f"Two resets with seed {seed} gave different first observations (in "
            f"{', '.join(start[:8])}): the environment ignores its seed, so the members of a "
            "group (EnvPool.reset_group, GRPO rollouts) do not start from the same state.",
            SEED_FIX,
            details={**details, "first": first[0], "second": second[0]},
        )
    for index, (one, other) in enumerate(zip(first[1:], second[1:], strict=False), start=1):
        where = differences(one, other)
        if where:
            return warned(
                name,
                f"Two episodes reset with seed {seed} start alike, but step {index} with the "
                f"same action differs (in {', '.join(where[:8])}): the steps draw from "
                "randomness the seed does not set.",
                SEED_FIX,
                details={**details, "step": index, "first": one, "second": other},
            )
    return passed(
        name,
        f"Two resets with seed {seed} gave identical first observations, and the same "
        f"{details['steps']} steps after them.",
        details=details,
    )

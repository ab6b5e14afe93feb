"""``openenv bench``'s choice of what to measure: a URL, a family target to serve, or --serve."""

from __future__ import annotations

import pytest

from openenv_cli.bench.options import check_choices
from openenv_cli.errors import UsageError

COMMON = {"mode": "throughput", "transport": "ws", "client": "lean", "sync": False}


def test_workers_apply_to_a_family_target_the_command_serves() -> None:
    assert check_choices(
        url="gymnasium:CartPole-v1", serve=False, workers=2, starts_server=True, **COMMON
    ) == ("throughput", "ws")


def test_workers_and_sync_are_refused_for_a_running_server() -> None:
    with pytest.raises(UsageError, match="--workers"):
        check_choices(url="http://127.0.0.1:8000", serve=False, workers=2, **COMMON)
    with pytest.raises(UsageError, match="--sync"):
        check_choices(
            url="gymnasium:CartPole-v1",
            serve=False,
            workers=1,
            starts_server=True,
            **{**COMMON, "sync": True},
        )

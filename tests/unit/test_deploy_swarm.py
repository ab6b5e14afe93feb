"""openenv_cli.deploy.swarm: reading the stack file's values the way `docker stack` does."""

from __future__ import annotations

import pytest

from openenv_cli.deploy.swarm import _duration, _literal, _memory


@pytest.mark.parametrize(
    ("text", "nanoseconds"),
    [
        ("5s", 5_000_000_000),
        ("1m30s", 90_000_000_000),
        ("250ms", 250_000_000),
        (2, 2_000_000_000),
        (None, None),
    ],
)
def test_durations(text: str | int | None, nanoseconds: int | None) -> None:
    assert _duration(text) == nanoseconds


def test_memory_and_dollar_escapes() -> None:
    assert _memory("512M") == 512 << 20 and _memory("2G") == 2 << 30 and _memory(None) is None
    assert _literal('OPENENV_API_KEY="$$(cat /run/secrets/token)"') == (
        'OPENENV_API_KEY="$(cat /run/secrets/token)"'
    )

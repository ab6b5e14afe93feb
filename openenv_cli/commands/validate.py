"""``openenv validate``: placeholder until the validation package lands."""

from __future__ import annotations


def command() -> None:
    """Check an environment project (or a running server) the way CI would."""

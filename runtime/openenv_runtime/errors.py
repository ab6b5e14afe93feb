"""Errors of the runtime. Each message says what to do about it."""

from __future__ import annotations

from typing import Any


class EnvironmentContractError(TypeError):
    """An ``Environment`` subclass (or the arguments of ``create_app``) breaks the contract."""


class EnvError(Exception):
    """The server answered with an error, or could not be reached.

    ``code`` is one of the protocol's codes (``VALIDATION_ERROR``, ``EXECUTION_ERROR``,
    ``CAPACITY_REACHED``, ...) or ``CONNECTION_ERROR`` / ``TIMEOUT`` / ``CLOSED`` for
    failures on the client's side. ``details`` holds any further fields of the reply.
    """

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message
        self.details = details or {}

"""Errors of the runtime. Each message says what to do about it."""

from __future__ import annotations

from typing import Any


class EnvironmentContractError(TypeError):
    """An ``Environment`` subclass (or the arguments of ``create_app``) breaks the contract."""


# Failures the client meets itself: the server said nothing, so they are not "Server error"s.
CLIENT_SIDE_CODES = frozenset({"CONNECTION_ERROR", "TIMEOUT", "CLOSED"})


class EnvError(RuntimeError):
    """The server answered with an error, or could not be reached.

    ``code`` is one of the protocol's codes (``VALIDATION_ERROR``, ``EXECUTION_ERROR``,
    ``CAPACITY_REACHED``, ...) or ``CONNECTION_ERROR`` / ``TIMEOUT`` / ``CLOSED`` for
    failures on the client's side. ``details`` holds any further fields of the reply.

    It is a ``RuntimeError`` whose text reads like openenv-core's client errors
    (``Server error: <message> (code: <CODE>)``) when the server answered with an error, so
    code written against that client keeps working; a failure on the client's side (no
    connection, a timeout, a closed session) reads ``<message> (code: <CODE>)``.
    """

    def __new__(cls, code: str, message: str, details: dict[str, Any] | None = None) -> EnvError:
        # A connection failure is also a ConnectionError, which the reference's client raises.
        if cls is EnvError and code == "CONNECTION_ERROR":
            return EnvConnectionError.__new__(EnvConnectionError, code, message, details)
        if issubclass(cls, ConnectionError):
            return ConnectionError.__new__(cls)
        return super().__new__(cls)

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        prefix = "" if code in CLIENT_SIDE_CODES else "Server error: "
        super().__init__(f"{prefix}{message} (code: {code})")
        self.code = code
        self.message = message
        self.details = details or {}


class EnvConnectionError(EnvError, ConnectionError):
    """``EnvError`` with code ``CONNECTION_ERROR``: catchable as ``ConnectionError`` too."""


class AdapterError(ValueError):
    """A ``FAMILY:NAME`` target cannot be served: its package is missing, its name is unknown,
    or the environment uses something the adapter cannot type (a space, an option).

    The message names what to install or change.
    """

"""The reference server's exception types, for code that raises or catches them."""

from __future__ import annotations


class OpenEnvError(Exception):
    """Base of the reference server's errors."""


class ConcurrencyConfigurationError(OpenEnvError):
    """More than one session asked of an environment not marked ``SUPPORTS_CONCURRENT_SESSIONS``."""

    def __init__(
        self, environment_name: str, max_concurrent_envs: int, message: str | None = None
    ) -> None:
        self.environment_name = environment_name
        self.max_concurrent_envs = max_concurrent_envs
        super().__init__(
            message
            or f"{environment_name} does not set SUPPORTS_CONCURRENT_SESSIONS = True, so it cannot "
            f"serve max_concurrent_envs={max_concurrent_envs}; use 1, or isolate its sessions and set the flag."
        )


class SessionCapacityError(OpenEnvError):
    def __init__(self, active_sessions: int, max_sessions: int, message: str | None = None) -> None:
        self.active_sessions = active_sessions
        self.max_sessions = max_sessions
        super().__init__(
            message or f"Server is at capacity ({active_sessions}/{max_sessions} sessions)."
        )


class SessionNotFoundError(OpenEnvError):
    def __init__(self, session_id: str, message: str | None = None) -> None:
        self.session_id = session_id
        super().__init__(message or f"No session {session_id!r}.")


class SessionCreationError(OpenEnvError):
    def __init__(self, reason: str, message: str | None = None) -> None:
        self.reason = reason
        super().__init__(message or f"Could not create the session: {reason}")


class EnvironmentFactoryError(OpenEnvError):
    def __init__(self, factory_name: str, message: str | None = None) -> None:
        self.factory_name = factory_name
        super().__init__(message or f"The environment factory {factory_name!r} failed.")

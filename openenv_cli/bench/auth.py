"""The access token ``openenv bench`` sends to a server started with ``OPENENV_API_KEY``.

Where it comes from follows the project's settings rule: ``--token``, then
``$OPENENV_API_KEY``, then none. It travels only in the ``Authorization: Bearer`` header of
every request (the ``/schema`` and ``/health`` reads, each WebSocket handshake, each HTTP
request) and reaches the load-generator processes inside the pickled target, over their
socket pair: never in a URL, a worker's argv, a report, a log line or an error message.

A refused token (or none) is detected twice: once before any run, when ``/schema`` answers
401/403 (:class:`Unauthorized`), and after each run, when most of its sessions were refused
at the handshake or at reset (:func:`mostly_unauthorized`), so the user gets one clear error
instead of a table of failed sessions.
"""

from __future__ import annotations

from collections.abc import Mapping

from openenv_cli.config import Resolved, Setting, parse_str
from openenv_cli.errors import OpenEnvError, UsageError

TOKEN_ENV = "OPENENV_API_KEY"
TOKEN = Setting("token", env=TOKEN_ENV, parse=parse_str)
AUTH_STATUSES = (401, 403)
CLOSE_POLICY_VIOLATION = 1008  # what an OpenEnv server closes a refused WebSocket with
_REFUSED = frozenset(
    [
        f"{phase}: HTTP {status}"
        for phase in ("connect", "reset", "step")
        for status in AUTH_STATUSES
    ]
    + [f"{phase}: connection closed ({CLOSE_POLICY_VIOLATION})" for phase in ("connect", "reset")]
)


def resolve_api_key(flag: str | None) -> Resolved[str]:
    """The token (``--token``, then ``$OPENENV_API_KEY``) and where it came from; value None when neither.

    A token a header cannot carry (spaces, control or non-ASCII characters: a newline would
    inject a header) is a :class:`UsageError` that names its source, never its value.
    """
    resolved = TOKEN.resolve(flag=flag or None)
    value = resolved.value
    if value is not None and not all("!" <= char <= "~" for char in value):
        raise UsageError(
            f"The access token from {resolved.origin} has characters an HTTP header cannot "
            "carry (spaces, line breaks or non-ASCII characters).",
            hint=f"Set {TOKEN_ENV} to the key exactly as the server has it, without a trailing newline.",
        )
    return resolved


def auth_headers(token: str | None) -> dict[str, str]:
    """The request headers that carry ``token`` (none without one)."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def is_auth_refusal(label: str) -> bool:
    """Whether an error label says the server refused the credentials (401/403, close 1008)."""
    return label in _REFUSED


def mostly_unauthorized(errors: Mapping[str, int], attempted: int) -> str | None:
    """The refusal label when at least half of ``attempted`` sessions were refused for auth."""
    refused = {label: n for label, n in errors.items() if is_auth_refusal(label)}
    total = sum(refused.values())
    if not total or total * 2 < max(attempted, 1):
        return None
    return max(refused, key=lambda label: refused[label])


class Unauthorized(OpenEnvError):
    """The server wants a (different) token: says how to give one, never what was sent."""

    def __init__(self, url: str, what: str, source: str | None) -> None:
        if source is None:
            message = (
                f"{url} refused the benchmark ({what}): it requires an access token "
                "(a server started with OPENENV_API_KEY), and none was given."
            )
            hint = (
                f"Set the server's key in the environment and rerun: export {TOKEN_ENV}=<key> "
                "(rather than --token: a flag shows in ps and in your shell history)."
            )
        else:
            message = f"{url} refused the token from {source} ({what})."
            hint = f"Set {TOKEN_ENV} to the key the server was started with, then rerun."
        super().__init__(message, hint=hint)

"""Talking to the Hub safely: the token, redaction of secrets, and one clear error per failure.

Secret values live only in memory: they are never written to the staging folder, never
shown, and :func:`redacting` scrubs them (and the token) from every error that passes through.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from openenv_cli.errors import OpenEnvError


def find_token(
    flag: str | None, environ: Mapping[str, str] | None = None
) -> tuple[str, str] | None:
    """The token and where it came from: ``--token``, then ``HF_TOKEN``, then the stored
    login; None when there is none (reading public Spaces needs no token)."""
    environ = os.environ if environ is None else environ
    if flag and flag.strip():
        return flag.strip(), "--token"
    if environ.get("HF_TOKEN", "").strip():
        return environ["HF_TOKEN"].strip(), "HF_TOKEN"
    from huggingface_hub import get_token

    stored = get_token()
    if stored:
        return stored, "the stored login"
    return None


def resolve_token(flag: str | None, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """:func:`find_token`, for commands that cannot work without a token."""
    found = find_token(flag, environ)
    if found is not None:
        return found
    raise OpenEnvError(
        "You are not logged in to the Hugging Face Hub.",
        hint="Run `hf auth login` with a token that has write access, or pass --token (or set HF_TOKEN).",
    )


class Redactor:
    """Replaces known secret strings with ``***`` in any text."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: set[str] = set()
        for value in values:
            self.add(value)

    def add(self, value: str | None) -> None:
        if value and len(value) >= 3:  # shorter values would garble unrelated text
            self._values.add(value)

    def __call__(self, text: str) -> str:
        for value in sorted(self._values, key=len, reverse=True):
            text = text.replace(value, "***")
        return text


@contextmanager
def redacting(redactor: Redactor) -> Iterator[None]:
    """Let no secret out through an exception: errors leave as :class:`OpenEnvError` with
    scrubbed text and no chained cause (so ``--debug`` tracebacks carry no values either)."""
    try:
        yield
    except OpenEnvError as error:
        error.message = redactor(error.message)
        error.hint = redactor(error.hint) if error.hint else error.hint
        error.args = (error.message,)
        raise error from None
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as error:
        raise OpenEnvError(
            redactor(f"Unexpected {type(error).__name__} while talking to the Hub: {error}"),
            hint="This may be a bug in openenv; please report it (without your secrets).",
        ) from None


def network_errors() -> tuple[type[BaseException], ...]:
    found: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for module, name in (
        ("httpx2", "TransportError"),
        ("httpx", "TransportError"),
        ("requests", "ConnectionError"),
        ("requests", "Timeout"),
    ):
        try:
            found.append(getattr(__import__(module), name))
        except (ImportError, AttributeError):
            pass
    return tuple(found)


@dataclass
class HubContext:
    endpoint: str
    token_source: str
    repo_id: str | None = None
    user: str | None = None


@contextmanager
def hub_call(what: str, ctx: HubContext) -> Iterator[None]:
    """Turn a failed Hub call into one :class:`OpenEnvError` line saying what to do."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    try:
        yield
    except OfflineModeIsEnabled:
        raise OpenEnvError(
            "huggingface_hub is in offline mode (HF_HUB_OFFLINE is set).",
            hint="Unset HF_HUB_OFFLINE and run again.",
        ) from None
    except HfHubHTTPError as exc:
        raise http_error(exc, what, ctx) from None
    except network_errors() as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise OpenEnvError(
            f"Cannot reach the Hugging Face Hub at {ctx.endpoint} while {what}: {reason}.",
            hint="Check the network connection, proxy settings and HF_ENDPOINT, then run again.",
        ) from None


def http_error(exc: Any, what: str, ctx: HubContext) -> OpenEnvError:
    response = exc.response
    status = response.status_code
    server = (
        (exc.server_message or response.headers.get("X-Error-Message") or "").strip().splitlines()
    )
    detail = f": {server[0]}" if server else ""
    repo = ctx.repo_id or "the Space"
    tokens = f"{ctx.endpoint}/settings/tokens"
    if status == 401:
        return OpenEnvError(
            f"The Hub at {ctx.endpoint} rejected the token from {ctx.token_source} (invalid or expired) while {what}.",
            hint=f"Create a write token at {tokens}, then run `hf auth login` or pass --token.",
        )
    if status == 403:
        return OpenEnvError(
            f"No write access to {repo} for {ctx.user or 'this token'}{detail}.",
            hint=f"Push to a namespace you can write to (--repo-id {ctx.user or 'YOUR_USER'}/NAME), or use a token with write access ({tokens}).",
        )
    if status == 404:
        return OpenEnvError(
            f"{repo} was not found on {ctx.endpoint} while {what}{detail}.", hint="Check --repo-id."
        )
    if status == 409:
        return OpenEnvError(f"The name {repo} is taken{detail}.", hint="Choose another --repo-id.")
    if status == 402:
        return OpenEnvError(
            f"The Hub requires a paid plan for {what}{detail}.",
            hint="Check your plan and the Space's hardware.",
        )
    if status == 429:
        return OpenEnvError(
            f"The Hub rate-limited the request while {what}.", hint="Wait a minute and run again."
        )
    return OpenEnvError(
        f"The Hub answered {status} while {what}{detail}.",
        hint="Run again; if it persists, check the Hub status page."
        if status >= 500
        else "Fix the cause above and run again.",
    )


@contextmanager
def no_request_logging() -> Iterator[None]:
    """With HF_DEBUG, huggingface_hub logs request bodies; secret values must not be among them."""
    logger = logging.getLogger("huggingface_hub.utils._http")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


@contextmanager
def quiet_client() -> Iterator[None]:
    """huggingface_hub warns "No files have been modified" on a push that changes nothing; we
    say it ourselves, once."""
    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)

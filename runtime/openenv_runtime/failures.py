"""Why an episode failed, as a kind, and which failures stop a run.

The one home of this classification: ``build_rollout_func`` and ``openenv collect`` both
use it, so they stop on the same failures.

* A model failure that every episode would meet the same way (the server does not serve the
  model, refuses the key, cannot be reached, or reports no token ids) stops the run: going
  on would only write (or train on) episodes that are all errors.
* Any other failure ends its episode only (marked, never dropped); the run stops when more
  than ``max_error_rate`` of its episodes failed.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict

from .errors import EnvError
from .llm.tokens import MissingTokenIdsError

MODEL_NOT_FOUND = "model:not_found"
MODEL_UNAUTHORIZED = "model:unauthorized"
MODEL_UNREACHABLE = "model:unreachable"
MODEL_NO_TOKEN_IDS = "model:no_token_ids"
MODEL_HTTP = "model:http_error"
MODEL_TIMEOUT = "model:timeout"
MODEL_OTHER = "model:error"
ENV_TIMEOUT = "env:timeout"

STOPS_RUN = frozenset({MODEL_NOT_FOUND, MODEL_UNAUTHORIZED, MODEL_UNREACHABLE, MODEL_NO_TOKEN_IDS})
DEFAULT_MAX_ERROR_RATE = 0.5
SHOWN_PER_KIND = 3

_WHAT_TO_DO = {
    MODEL_NOT_FOUND: "the model server does not serve this model name: check the model "
    "(GET <llm>/v1/models lists the names it serves)",
    MODEL_UNAUTHORIZED: "the model server refused the API key: check it",
    MODEL_UNREACHABLE: "nothing answered at the model server's address: start the server "
    "or fix its URL",
    MODEL_NO_TOKEN_IDS: "the model server reports no token ids: serve the model with "
    "vLLM >= 0.10.2 (or another server that returns them)",
}


class ModelFailure(RuntimeError):
    """A model call failed; ``kind`` says how (one of this module's ``MODEL_*`` kinds)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class RolloutError(RuntimeError):
    """A run stopped: a failure every episode would meet, or too many failed episodes."""


def describe(error: BaseException) -> str:
    """``Type: message`` (the type alone when the message is empty)."""
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def model_failure(error: BaseException) -> ModelFailure:
    """The failure of a model call, classified (the ``openai`` package's errors, aiohttp's,
    httpx's, ``TokenClient``'s and ``MissingTokenIdsError`` alike)."""
    if isinstance(error, ModelFailure):
        return error
    return ModelFailure(_model_kind(error), describe(error))


def env_kind(error: BaseException) -> str:
    """The kind of an environment failure: ``env:<protocol code>``, or ``env:timeout``."""
    if isinstance(error, EnvError):
        return f"env:{error.code}"
    if isinstance(error, (TimeoutError, asyncio.TimeoutError)):
        return ENV_TIMEOUT
    return "env:CONNECTION_ERROR"


def stops_run(kind: str) -> bool:
    """Whether a failure of ``kind`` stops the run at once (every episode would meet it)."""
    return kind in STOPS_RUN


def too_many(failed: int, total: int, max_error_rate: float) -> bool:
    """Whether ``failed`` of ``total`` episodes is more than ``max_error_rate`` of them."""
    return total > 0 and failed > max_error_rate * total


class FailureLog:
    """Failed episodes by kind: how many, and the first distinct messages of each kind
    (bounded memory however many fail)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = defaultdict(list)

    def add(self, kind: str, message: str) -> None:
        self.counts[kind] += 1
        shown = self.examples[kind]
        text = _short(message)
        if len(shown) < SHOWN_PER_KIND and text not in shown:
            shown.append(text)

    @property
    def failed(self) -> int:
        return sum(self.counts.values())

    @property
    def stops_run(self) -> bool:
        """Whether a failure every episode would meet is among them."""
        return any(stops_run(kind) for kind in self.counts)

    def report(self, total: int) -> str:
        """The first errors of each kind, most frequent kind first, with what to do about the
        kinds that stop a run."""
        lines = [f"{self.failed} of {total} episodes failed:"]
        for kind, count in sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"  {kind} ({count}){_what_to_do(kind)}")
            lines += [f"    - {message}" for message in self.examples[kind]]
        return "\n".join(lines)


def _what_to_do(kind: str) -> str:
    advice = _WHAT_TO_DO.get(kind)
    return f": {advice}" if advice else ""


def _short(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _model_kind(error: BaseException) -> str:
    if isinstance(error, MissingTokenIdsError):
        return MODEL_NO_TOKEN_IDS
    status = _status(error)
    if status == 404:
        return MODEL_NOT_FOUND
    if status in (401, 403):
        return MODEL_UNAUTHORIZED
    if status is not None:
        return MODEL_HTTP
    if _is_timeout(error):
        return MODEL_TIMEOUT
    if _is_unreachable(error):
        return MODEL_UNREACHABLE
    return MODEL_OTHER


def _status(error: BaseException) -> int | None:
    """The HTTP status of an answered call (``TokenClient``'s ``status``, openai's
    ``status_code``)."""
    for name in ("status", "status_code"):
        value = getattr(error, name, None)
        if isinstance(value, int) and 400 <= value < 600:
            return value
    return None


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _is_timeout(error: BaseException) -> bool:
    kinds: list[type[BaseException]] = [TimeoutError, asyncio.TimeoutError]
    try:
        import openai

        kinds.append(openai.APITimeoutError)
    except ImportError:
        pass
    return isinstance(error, tuple(kinds))


def _is_unreachable(error: BaseException) -> bool:
    """A connection that could not be made (refused, no such host), wherever in the chain."""
    kinds: list[type[BaseException]] = [ConnectionRefusedError]
    try:
        import aiohttp

        kinds.append(aiohttp.ClientConnectorError)
    except ImportError:
        pass
    try:
        import httpx

        kinds.append(httpx.ConnectError)
    except ImportError:
        pass
    try:
        import openai

        kinds.append(openai.APIConnectionError)
    except ImportError:
        pass
    return any(isinstance(link, tuple(kinds)) for link in _chain(error))

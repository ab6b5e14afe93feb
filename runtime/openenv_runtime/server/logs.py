"""Log hygiene: no credential that reaches the server ever reaches a log line."""

from __future__ import annotations

import logging
import re
from typing import Any

# `access_token`, `token`, `api_key` (and spellings like `api-key`, `apikey`) in a query string.
_SECRET_QUERY = re.compile(r"(?i)([?&;](?:access[_-]?token|token|api[_-]?key|apikey)=)[^&;#\s\"']*")
# A credential in a header line, as protocol debug logs print them.
_SECRET_HEADER = re.compile(r"(?i)\b(bearer|basic)(\s+)[^\s,;\"']+")
_SECRET_SUBPROTOCOL = re.compile(r"(?i)(openenv\.bearer\.)[A-Za-z0-9_=-]+")
REDACTED = "[redacted]"
_LOGGERS = ("uvicorn.access", "uvicorn.error", "uvicorn", "openenv_runtime", "fastapi")


def redact(text: str) -> str:
    """``/ws?access_token=s3cret&x=1`` → ``/ws?access_token=[redacted]&x=1``; likewise
    ``Bearer <token>`` and the ``openenv.bearer.<token>`` subprotocol."""
    text = _SECRET_QUERY.sub(lambda m: m.group(1) + REDACTED, text)
    text = _SECRET_HEADER.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
    return _SECRET_SUBPROTOCOL.sub(lambda m: m.group(1) + REDACTED, text)


def _clean(value: Any) -> Any:
    return redact(value) if isinstance(value, str) else value


class RedactSecrets(logging.Filter):
    """Rewrites a record so no credential prints: the message is formatted, then redacted.

    Formatting first catches a secret split over arguments (``"< %s: %s"`` with
    ``authorization`` and ``Bearer …``). uvicorn's access formatter reads the arguments
    by position, so for its records the arguments are redacted in place instead.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "uvicorn.access" and isinstance(record.args, tuple):
            record.args = tuple(_clean(a) for a in record.args)
            return True
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to the handler to report
            return True
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


_FILTER = RedactSecrets()


def install_redaction() -> None:
    """Attach the filter to the server's loggers and to every handler they (or the root) write to.

    A logger's filter does not see records propagated from its children, and a handler
    may be shared: both places get it. Idempotent; call again after logging is reconfigured.
    """
    loggers = [logging.getLogger(name) for name in _LOGGERS] + [logging.getLogger()]
    for logger in loggers:
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
        for handler in logger.handlers:
            if _FILTER not in handler.filters:
                handler.addFilter(_FILTER)

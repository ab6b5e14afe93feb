"""Log hygiene: no credential that arrives in a URL ever reaches a log line."""

from __future__ import annotations

import logging
import re
from typing import Any

# `access_token`, `token`, `api_key` (and spellings like `api-key`, `apikey`) in a query string.
_SECRET_QUERY = re.compile(r"(?i)([?&;](?:access[_-]?token|token|api[_-]?key|apikey)=)[^&;#\s\"']*")
REDACTED = "[redacted]"
_LOGGERS = ("uvicorn.access", "uvicorn.error", "uvicorn", "openenv_runtime", "fastapi")


def redact(text: str) -> str:
    """``/ws?access_token=s3cret&x=1`` → ``/ws?access_token=[redacted]&x=1``."""
    return _SECRET_QUERY.sub(lambda m: m.group(1) + REDACTED, text)


def _clean(value: Any) -> Any:
    return redact(value) if isinstance(value, str) else value


class RedactSecrets(logging.Filter):
    """Rewrites a record's message and arguments so query-string credentials never print."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_clean(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: _clean(v) for k, v in record.args.items()}
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

"""Log hygiene: no credential that reaches the server (or leaves a client) ever reaches a log line.

What is redacted, wherever it appears in a formatted record:

* ``name=value`` pairs (query strings, form bodies, ``key=value`` log text) whose name, once
  percent-decoded, ends with a word for a secret: ``token``, ``key``, ``auth``,
  ``password``/``pwd``/``passphrase``, ``secret``, ``session``/``session_id``, ``credentials``,
  ``signature``/``sig`` (signed URLs: ``sig=``, ``X-Amz-Signature=``), ``hmac``, ``jwt``, ``otp``,
  ``cookie`` (so ``access_token=``, ``api-key=``, ``auth=``, ``password=``, ``sig=``,
  ``access%5Ftoken=``, ``session_id=`` all are; ``max_tokens=`` is not);
* headers as protocol debug logs print them (``> X-OpenEnv-Resume-Token: ...``,
  ``(b'authorization', b'...')``) and quoted mappings (``'session_id': '...'``) under such names;
* ``Bearer``/``Basic`` credentials and the ``openenv.bearer.<token>`` subprotocol.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import unquote

_SECRET_ENDINGS = re.compile(
    r"(token|key|auth|authorization|password|passwd|pwd|passphrase|secret|session|sessionid"
    r"|credentials?|signature|sig|hmac|jwt|otp|cookie)$"
)
# name=value: the name may be percent-encoded; the value runs to a separator.
_PAIR = re.compile(r"(?P<name>[A-Za-z0-9_.%\-\[\]]+)=(?P<value>[^&;#\s\"',)\]}>]+)")
# `Name: value` lines of protocol debug logs ("> X-Api-Key: abc", "< Authorization: ...").
_HEADER_LINE = re.compile(r"(?m)^(?P<lead>[<>]?\s*)(?P<name>[A-Za-z0-9-]+):[ \t]+(?P<value>\S.*)$")
# ('name', 'value') and (b'name', b'value') pairs, as ASGI scopes print their headers.
_TUPLE = re.compile(r"\((?P<q1>b?['\"])(?P<name>[^'\"]+)['\"],\s*(?P<q2>b?['\"])(?P<value>[^'\"]*)")
# 'name': 'value' and "name": "value" in a printed mapping or JSON.
_MAPPED = re.compile(r"(?P<q>['\"])(?P<name>[\w\-]+)(?P=q)\s*:\s*(?P<q2>b?['\"])(?P<value>[^'\"]*)")
_SECRET_HEADER = re.compile(r"(?i)\b(bearer|basic)(\s+)[^\s,;\"']+")
_SECRET_SUBPROTOCOL = re.compile(r"(?i)(openenv\.bearer\.)[A-Za-z0-9_=-]+")
REDACTED = "[redacted]"
SERVER_LOGGERS = ("uvicorn.access", "uvicorn.error", "uvicorn", "openenv_runtime", "fastapi")
CLIENT_LOGGERS = ("websockets", "websockets.client", "websockets.server", "httpx", "httpcore")


def secret_name(name: str) -> bool:
    """True when a parameter or header name ends with a word for a credential, once
    percent-decoded and stripped of separators (``access%5Ftoken``, ``X-Api-Key``, ``auth``)."""
    plain = re.sub(r"[^a-z0-9]", "", unquote(unquote(name)).lower())
    return _SECRET_ENDINGS.search(plain) is not None


def _pair(match: re.Match[str]) -> str:
    if not secret_name(match.group("name")) or match.group("value").startswith(REDACTED[:-1]):
        return match.group(0)
    return match.group("name") + "=" + REDACTED


def _value_of(match: re.Match[str]) -> str:
    if not secret_name(match.group("name")) or match.group("value").startswith(REDACTED[:-1]):
        return match.group(0)
    start, end = match.span("value")
    offset = match.start()
    text = match.group(0)
    return text[: start - offset] + REDACTED + text[end - offset :]


def redact(text: str) -> str:
    """``/ws?access_token=s3cret&x=1`` → ``/ws?access_token=[redacted]&x=1``; likewise other
    secret-named parameters, headers and mappings, ``Bearer <token>`` and the
    ``openenv.bearer.<token>`` subprotocol."""
    if "=" in text:
        text = _PAIR.sub(_pair, text)
    if ":" in text:
        text = _HEADER_LINE.sub(_value_of, text)
        text = _MAPPED.sub(_value_of, text)
    if "(" in text:
        text = _TUPLE.sub(_value_of, text)
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


def install_redaction(names: tuple[str, ...] = SERVER_LOGGERS + CLIENT_LOGGERS) -> None:
    """Attach the filter to the given loggers and to every handler they (or the root) write to.

    A logger's filter does not see records propagated from its children, and a handler
    may be shared: both places get it. Idempotent; call again after logging is reconfigured.
    Clients call it too (``websockets`` logs ``Authorization`` headers at DEBUG).
    """
    loggers = [logging.getLogger(name) for name in names] + [logging.getLogger()]
    for logger in loggers:
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
        for handler in logger.handlers:
            if _FILTER not in handler.filters:
                handler.addFilter(_FILTER)

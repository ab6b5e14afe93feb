"""Log hygiene of the server: see :mod:`openenv_runtime.redaction` (shared with the client)."""

from __future__ import annotations

from ..redaction import REDACTED, RedactSecrets, install_redaction, redact, secret_name

__all__ = ["REDACTED", "RedactSecrets", "install_redaction", "redact", "secret_name"]

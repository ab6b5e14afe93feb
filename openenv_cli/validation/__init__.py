"""``openenv validate``: checks of an environment project (or a running server) for CI.

Each check returns :class:`CheckResult` values (pass / warn / fail / skip, a message, and for
problems the fix); :func:`validate_project` and :func:`validate_url` gather them in a
:class:`Report`.
"""

from openenv_cli.validation.results import CheckResult, Report, Status
from openenv_cli.validation.runner import DEFAULT_TIMEOUT, validate_project, validate_url

__all__ = ["DEFAULT_TIMEOUT", "CheckResult", "Report", "Status", "validate_project", "validate_url"]

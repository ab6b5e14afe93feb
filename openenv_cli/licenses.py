"""The licence of a generated project (``openenv init --license``).

Any SPDX licence expression is accepted and written, in its canonical form, to the project's
``pyproject.toml`` (``license = "..."``, PEP 639). For the common short permissive licences
(:data:`WITH_TEXT`) the full text is written to ``LICENSE`` as well; for every other
expression the user adds the text (``init`` says so).
"""

from __future__ import annotations

from pathlib import Path

from openenv_cli.errors import UsageError

DEFAULT_LICENSE = "BSD-3-Clause"
NO_LICENSE = "none"
WITH_TEXT = ("BSD-3-Clause", "BSD-2-Clause", "MIT", "ISC")
LICENSES_FOLDER = "licenses"


def canonical_license(value: str) -> str | None:
    """The canonical SPDX expression for ``value`` (``mit`` → ``MIT``); ``None`` for ``none``."""
    if value.strip().lower() == NO_LICENSE:
        return None
    from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression

    try:
        return str(canonicalize_license_expression(value))
    except InvalidLicenseExpression as exc:
        raise UsageError(
            f"--license {value!r} is not an SPDX licence expression ({exc}).",
            hint="Use an identifier from https://spdx.org/licenses/ such as MIT, Apache-2.0 or "
            f"BSD-3-Clause, an expression such as 'MIT OR Apache-2.0', or `{NO_LICENSE}`.",
        ) from None


def license_text(expression: str, templates: Path, holder: str, year: int) -> str | None:
    """The ``LICENSE`` text for ``expression`` if it is one of :data:`WITH_TEXT`, else None."""
    if expression not in WITH_TEXT:
        return None
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(
        loader=FileSystemLoader(str(templates / LICENSES_FOLDER)),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    return env.get_template(f"{expression}.jinja").render(holder=holder, year=year)

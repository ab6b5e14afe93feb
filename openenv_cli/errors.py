"""The one user-facing error type of the CLI.

Commands raise :class:`OpenEnvError` (exit code 1) or :class:`UsageError` (exit code 2);
``openenv_cli.main.main`` renders it once, at the top, and exits. Nothing else should
print an error and exit on its own.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape


class OpenEnvError(Exception):
    """A failure the user can act on: what went wrong, and (``hint``) what to do next."""

    exit_code: int = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n{self.hint}"


class UsageError(OpenEnvError):
    """The command was called wrongly (bad argument, bad name, bad path): exit code 2."""

    exit_code = 2


def render_error(error: OpenEnvError, console: Console) -> None:
    """Print ``error`` the way every command shows failures."""
    # soft_wrap: an error stays one line in CI logs and pipes, whatever the console width.
    console.print(f"[bold red]Error:[/] {escape(error.message)}", highlight=False, soft_wrap=True)
    if error.hint:
        console.print(f"[yellow]Hint:[/] {escape(error.hint)}", highlight=False, soft_wrap=True)

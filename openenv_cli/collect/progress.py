"""Progress of a collection: a live bar on a terminal, a line every few seconds elsewhere."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from openenv_cli.console import err_console

from .runner import Progress

LINE_EVERY_S = 5.0


def _describe(p: Progress) -> str:
    eta = f"{p.eta_s:.0f} s" if p.eta_s is not None else "?"
    return f"{p.skipped + p.done}/{p.total} episodes, {p.rate:.1f}/s, {p.errors} errors, ETA {eta}"


@contextlib.contextmanager
def progress_display(total: int) -> Iterator[Callable[[Progress], None]]:
    """A callback to hand to ``collect``; shows progress on stderr."""
    if err_console.is_terminal:
        from rich.progress import BarColumn, TextColumn
        from rich.progress import Progress as Bar

        with Bar(
            TextColumn("{task.description}"), BarColumn(), console=err_console, transient=True
        ) as bar:
            task = bar.add_task("starting", total=total)

            def show(p: Progress) -> None:
                bar.update(task, completed=p.skipped + p.done, description=_describe(p))

            yield show
        return
    last = 0.0

    def line(p: Progress) -> None:
        nonlocal last
        if time.monotonic() - last >= LINE_EVERY_S or p.skipped + p.done == p.total:
            last = time.monotonic()
            err_console.print(_describe(p), highlight=False, soft_wrap=True)

    yield line

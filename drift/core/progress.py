"""Rich progress on stderr, so stdout stays clean under `dvc repro` and `--json`."""
from __future__ import annotations

import contextlib
import sys

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

stderr = Console(stderr=True)


class _Bar:
    def __init__(self, progress: Progress, task):
        self._progress, self._task = progress, task

    def advance(self, n: int = 1) -> None:
        self._progress.advance(self._task, n)

    def update(self, **kwargs) -> None:
        self._progress.update(self._task, **kwargs)


@contextlib.contextmanager
def progress(description: str, total: int | None = None):
    """A progress bar on stderr; rows/steps are counted with bar.advance(n)."""
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=stderr, transient=not sys.stderr.isatty(), disable=False) as p:
        yield _Bar(p, p.add_task(description, total=total))

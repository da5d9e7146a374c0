"""Progress on stderr, so stdout stays clean under `dvc repro` and `--json`: a Rich bar (done / total, rate,
time left) on a terminal; otherwise (under DVC, in CI, piped) one plain line every DRIFT_PROGRESS_INTERVAL
seconds (10 by default) while the work runs, from a timer thread, so a slow step never leaves the log silent
for longer."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from drift.core.errors import DriftError

stderr = Console(stderr=True)
INTERVAL_ENV = "DRIFT_PROGRESS_INTERVAL"
DEFAULT_INTERVAL = 10.0


def interval() -> float:
    """Seconds between plain progress lines: $DRIFT_PROGRESS_INTERVAL, else 10."""
    raw = os.environ.get(INTERVAL_ENV)
    if not raw:
        return DEFAULT_INTERVAL
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise DriftError(
            f"{INTERVAL_ENV}={raw!r} is not a positive number of seconds: unset it or set e.g. 10"
        )
    return value


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def progress_line(description: str, done: float, total: float | None, elapsed: float) -> str:
    """One plain line: `description: done/total (pct), rate/s, elapsed h:mm:ss, left h:mm:ss` (what is known)."""
    rate = done / elapsed if elapsed > 0 else 0.0
    parts = [f"{description}: {done:,.0f}" + (f"/{total:,.0f} ({100 * done / total:.0f}%)" if total else "")]
    parts.append(f"{rate:,.1f}/s" if rate < 100 else f"{rate:,.0f}/s")
    parts.append(f"elapsed {_duration(elapsed)}")
    if total and rate > 0:
        parts.append(f"left {_duration(max(total - done, 0) / rate)}")
    return ", ".join(parts)


class _Bar:
    def __init__(self, progress: Progress, task):
        self._progress, self._task = progress, task

    def advance(self, n: int = 1) -> None:
        self._progress.advance(self._task, n)

    def update(self, **kwargs) -> None:
        self._progress.update(self._task, **kwargs)


class _Lines:
    """The plain reporter: counts advance() calls; a timer thread prints a line every interval, and one at the
    end when any was printed (work shorter than the interval stays quiet)."""

    def __init__(self, description: str, total: int | None, every: float, stream):
        self.description, self.total, self.every, self.stream = description, total, every, stream
        self.done, self.start = 0.0, time.monotonic()
        self._lock, self._stop, self.printed = threading.Lock(), threading.Event(), 0
        self._thread = threading.Thread(target=self._tick, name="drift-progress", daemon=True)

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n

    def update(self, **kwargs) -> None:
        with self._lock:
            if kwargs.get("total") is not None:
                self.total = kwargs["total"]
            if kwargs.get("completed") is not None:
                self.done = kwargs["completed"]
            if kwargs.get("description"):
                self.description = kwargs["description"]

    def line(self) -> None:
        with self._lock:
            text = progress_line(self.description, self.done, self.total, time.monotonic() - self.start)
        print(text, file=self.stream, flush=True)
        self.printed += 1

    def _tick(self) -> None:
        while not self._stop.wait(self.every):
            self.line()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        if self.printed:
            self.line()


@contextlib.contextmanager
def progress(description: str, total: int | None = None):
    """Progress of counted work on stderr (bar.advance(n) per row, step or training done): a Rich bar with the
    rate and the time left on a terminal, plain lines at least every interval() seconds otherwise."""
    if not sys.stderr.isatty():
        with _Lines(description, total, interval(), sys.stderr) as lines:
            yield lines
        return
    columns = [
        TextColumn("{task.description}", style="bold", markup=False),  # a description is data, never markup
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=stderr, transient=False) as p:
        yield _Bar(p, p.add_task(description, total=total))

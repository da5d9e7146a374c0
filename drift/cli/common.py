"""What every `drift` command shares: the console, one-line errors, number formatting."""
from __future__ import annotations

import os

import typer
from rich.console import Console

PIPED_WIDTH = 1000  # a pipe or a file: tables at their natural width, never cut at 80 columns ($COLUMNS still wins)


def output_console() -> Console:
    """The console of stdout: a terminal's own width; piped, PIPED_WIDTH unless $COLUMNS says otherwise."""
    default = Console()
    if default.is_terminal or os.environ.get("COLUMNS"):
        return default
    return Console(width=PIPED_WIDTH)


console = output_console()


def fail(error: Exception):
    """A DriftError as one red line on stderr, exit status 2."""
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {error}", highlight=False)
    raise typer.Exit(2)


def fmt(value, digits: int = 3, sign: bool = False) -> str:
    return "—" if value is None else f"{value:{'+' if sign else ''}.{digits}f}"

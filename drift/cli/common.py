"""What every `drift` command shares: the console, one-line errors, number formatting."""
from __future__ import annotations

import os

import typer
from rich.console import Console, ConsoleDimensions

PIPED_WIDTH = 1000  # a pipe or a file: tables at their natural width, never cut at 80 columns ($COLUMNS still wins)


class OutputConsole(Console):
    """The console of stdout: a terminal's own width; piped, PIPED_WIDTH unless $COLUMNS says otherwise (read
    at each print, so a command run in-process sees the environment of that run)."""

    @property
    def size(self):
        if not self.is_terminal and not os.environ.get("COLUMNS"):
            return ConsoleDimensions(PIPED_WIDTH, 25)
        return super().size

    @size.setter
    def size(self, new_size):
        Console.size.fset(self, new_size)


def output_console() -> Console:
    return OutputConsole()


console = output_console()


def fail(error: Exception):
    """A DriftError as one red line on stderr, exit status 2."""
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {error}", highlight=False)
    raise typer.Exit(2)


def fmt(value, digits: int = 3, sign: bool = False) -> str:
    return "—" if value is None else f"{value:{'+' if sign else ''}.{digits}f}"

"""What every `drift` command shares: the console, one-line errors, Ctrl-C as one line (DriftApp), number formatting."""

from __future__ import annotations

import os
import sys

import typer
from rich.console import Console, ConsoleDimensions
from typer.core import TyperGroup

PIPED_WIDTH = (
    1000  # a pipe or a file: tables at their natural width, never cut at 80 columns ($COLUMNS still wins)
)


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


class Interrupted(BaseException):
    """Ctrl-C inside a command, named by its command path: a BaseException, so neither Click's "Aborted!" nor
    Typer's traceback handler catches it on the way out to DriftApp."""


class InterruptibleGroup(TyperGroup):
    """A command group whose subcommands turn Ctrl-C into Interrupted, naming the innermost command."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted(" ".join(filter(None, [ctx.command_path, ctx.invoked_subcommand]))) from None


class DriftApp(typer.Typer):
    """The `drift` app: Ctrl-C in any command ends in one line on stderr, "<command>: interrupted; re-run
    resumes", exit status 130 (what the commands write is whole: atomic replaces, resumable transfers)."""

    def __init__(self, **kwargs):
        super().__init__(cls=InterruptibleGroup, **kwargs)

    def __call__(self, *args, **kwargs):
        try:
            return super().__call__(*args, **kwargs)
        except Interrupted as e:
            print(f"{e}: interrupted; re-run resumes", file=sys.stderr)
            sys.exit(130)


def fail(error: Exception):
    """A DriftError as one red line on stderr, exit status 2."""
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {error}", highlight=False)
    raise typer.Exit(2)


def fmt(value, digits: int = 3, sign: bool = False) -> str:
    return "—" if value is None else f"{value:{'+' if sign else ''}.{digits}f}"

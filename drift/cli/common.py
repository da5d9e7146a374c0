"""What every `drift` command shares: the console, one-line errors, Ctrl-C as one line (DriftApp), number
formatting, and `esc`: names and labels are data, never markup. Every value from data, params or the command
line that reaches Rich as a markup string or a table cell goes through `esc` (or a Text of `visible(value)`),
so `[/bold]` or `[link=...]` prints as written, never as a style or a hyperlink, and an ESC byte never reaches
the terminal. Errors are redacted (drift.core.secrets) before they are printed."""

from __future__ import annotations

import os
import re
import sys

import typer
from rich.console import Console, ConsoleDimensions
from rich.markup import escape
from rich.text import Text
from typer.core import TyperGroup

from drift.core.interrupt import restore_interrupt
from drift.core.secrets import redact

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
    def size(self, new_size: tuple[int, int]) -> None:
        self.width, self.height = new_size  # as Console's own setter: both fixed


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
        restore_interrupt()  # drift.cli's import-time handler hands Ctrl-C back to the commands'
        try:
            return super().__call__(*args, **kwargs)
        except Interrupted as e:
            print(f"{e}: interrupted; re-run resumes", file=sys.stderr)
            sys.exit(130)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 but tab and newline, DEL, C1


def visible(value) -> str:
    """`value` as text, its control characters written \\xNN: an ESC in data never starts a terminal escape
    (a colour, a window title, an OSC 8 hyperlink)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))


def esc(value) -> str:
    """`value` for a Rich markup string or a table cell: visible(), with Rich's markup escaped; ordinary text
    (no control character, no `[` starting a tag) comes back unchanged."""
    return escape(visible(value))


def plain(value, style: str = "") -> Text:
    """`value` as a Rich Text: never parsed as markup, control characters visible."""
    return Text(visible(value), style=style)


def fail(error: Exception):
    """A DriftError as one red line on stderr, exit status 2: redacted, its text never markup."""
    Console(stderr=True, soft_wrap=True).print(
        f"[red]error:[/red] {esc(redact(str(error)))}", highlight=False
    )
    raise typer.Exit(2)


def fmt(value, digits: int = 3, sign: bool = False) -> str:
    return "—" if value is None else f"{value:{'+' if sign else ''}.{digits}f}"


def check_dataset(name: str, root, with_results, stage: str = "report") -> None:
    """The one check of a dataset name that every command taking one runs, so they answer alike. The valid
    names are the `datasets:` of root/params.yaml (without that file: `with_results`, the datasets this
    command has results for). A declared dataset outside `with_results` has no results yet (`stage` writes
    them); one inside it that params.yaml does not declare is another run's leftover. Each problem is a
    one-line DriftError naming the fix."""
    from pathlib import Path

    from drift.core.errors import DriftError, close_matches
    from drift.core.params import load_params

    params, found = Path(root) / "params.yaml", set(with_results)
    if not params.exists():
        if name in found:
            return
        if not found:
            raise DriftError(f"no results in {root}: run `dvc repro` first (from the repository root)")
        raise DriftError(f"unknown dataset {name!r}: {close_matches(name, found)}")
    declared = list(load_params(params).datasets)
    if name in declared:
        if name in found:
            return
        raise DriftError(f"no results for {name} yet: run `dvc repro` (or `dvc repro {stage}@{name}`)")
    if name in found:
        raise DriftError(
            f"{name} is not a dataset of this workspace's params.yaml (datasets: "
            f"{', '.join(declared) or 'none'}): add it there and run `dvc repro`"
        )
    if not declared:
        raise DriftError(
            f"unknown dataset {name!r}: {params} declares none (datasets:): add it there, or "
            f"`drift init {name} <file>`"
        )
    raise DriftError(f"unknown dataset {name!r}: {close_matches(name, declared)}")

"""What every `drift` command shares: the console, one-line errors, number formatting."""
from __future__ import annotations

import typer
from rich.console import Console

console = Console()


def fail(error: Exception):
    """A DriftError as one red line on stderr, exit status 2."""
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {error}", highlight=False)
    raise typer.Exit(2)


def fmt(value, digits: int = 3, sign: bool = False) -> str:
    return "—" if value is None else f"{value:{'+' if sign else ''}.{digits}f}"

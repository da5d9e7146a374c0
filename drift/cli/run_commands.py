"""`drift run <dataset>...`: DVC's `dvc repro` of the named datasets' stages alone (their report and
everything it needs), or `dvc exp run` of them when an experiment's settings are given, so a study of one's
own data never waits on the other datasets of params.yaml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer

from drift.cli.common import console, esc, fail
from drift.core.errors import DriftError, close_matches
from drift.core.params import load_params


def dvc_command(datasets: list[str], settings: list[str], name: str | None, dry: bool) -> list[str]:
    """The DVC command line that runs these datasets' stages: `repro`, or `exp run` with -S settings or a
    name. Every value is its own argument: nothing reaches a shell."""
    targets = [f"report@{dataset}" for dataset in datasets]
    if settings or name:
        command = ["exp", "run", *targets, *(arg for s in settings for arg in ("-S", s))]
        command += ["-n", name] if name else []
    else:
        command = ["repro", *targets]
    return [sys.executable, "-m", "dvc", *command, *(["--dry"] if dry else [])]


def run(
    datasets: list[str] = typer.Argument(
        ..., help="datasets of params.yaml `datasets:` to run, and only them"
    ),
    settings: list[str] = typer.Option(
        [], "-S", "--set-param", help="an experiment's setting (dvc exp run -S), e.g. -S mine.train.epochs=20"
    ),
    name: str | None = typer.Option(None, "-n", "--name", help="the experiment's name (dvc exp run -n)"),
    dry: bool = typer.Option(False, "--dry", help="list the stages DVC would run, run nothing"),
    root: Path = typer.Option(Path("."), "--root", help="the repository's root"),
):
    """Run these datasets' stages alone: `dvc repro report@<dataset>...`, or `dvc exp run` with -S or -n."""
    try:
        declared = list(load_params(root / "params.yaml").datasets)
        for dataset in datasets:
            if dataset not in declared:
                raise DriftError(
                    f"dataset {dataset!r} is not in params.yaml `datasets`: {close_matches(dataset, declared)}"
                )
    except DriftError as e:
        fail(e)
    command = dvc_command(list(dict.fromkeys(datasets)), settings, name, dry)
    console.print(f"[dim]{esc(' '.join(command[2:]))}[/dim]", highlight=False, soft_wrap=True)
    raise typer.Exit(subprocess.run(command, cwd=root, check=False).returncode)


COMMANDS = (run,)

"""`drift push` / `drift pull`: DVC's own push and pull (the data, the embedding feature files, the models and
matrices), with one line naming the remote, the cause and the fix when the remote fails."""

from __future__ import annotations

import typer

from drift.cli.common import console, esc, fail
from drift.core.errors import DriftError
from drift.run.remote import transfer


def _run(action: str, remote: str | None) -> None:
    try:
        console.print(esc(transfer(action, remote) or f"dvc {action}: done"), highlight=False, soft_wrap=True)
    except DriftError as e:
        fail(e)


def push(
    remote: str | None = typer.Option(None, "-r", "--remote", help="a DVC remote; the default one if unset"),
):
    """`dvc push`: upload what DVC caches (the feature files the encoders produced included) to the remote."""
    _run("push", remote)


def pull(
    remote: str | None = typer.Option(None, "-r", "--remote", help="a DVC remote; the default one if unset"),
):
    """`dvc pull`: download the outputs, so `dvc repro` on this machine runs no encoder."""
    _run("pull", remote)


COMMANDS = (push, pull)

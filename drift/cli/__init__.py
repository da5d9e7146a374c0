"""The `drift` command (console entry point drift.cli:main), one module per command group, rendering only
(what they read comes from the library; no module here is imported by it): drift_app.py (the Typer app they
make up), pipeline_commands.py (summary, models, fetch, track, preset, check), init.py (a table of your own
into params.yaml), report_commands.py (show, compare, plots, saliency), cache.py (cache list | verify |
compact | gc), plan_commands.py (the cost of a campaign), rehearse_commands.py (a preset's whole pipeline on a
small sample), policy_commands.py (retraining policies), remote_commands.py (push, pull: DVC's, with one-line
faults), run_commands.py (run chosen datasets alone), paper.py (the authors' published results beside ours).

Importing this package changes nothing; `main` sets the process up (Ctrl-C as one line, params.yaml's
compute.cpu_path before numpy and torch load) and runs the app."""

from __future__ import annotations

from typing import Any


def main() -> None:
    """The `drift` command: the process set up first, then the app (`drift.cli.drift_app.app`)."""
    from drift.core.interrupt import command_name, exit_on_interrupt

    exit_on_interrupt(command_name())  # first: a Ctrl-C while the commands' imports load is one line too
    from drift.core.environment import configured_cpu_path, use_cpu_path

    use_cpu_path(configured_cpu_path())  # params.yaml's compute.cpu_path, before numpy and torch load
    from drift.cli.drift_app import app

    app()


def __getattr__(name: str) -> Any:
    """`from drift.cli import app`: the Typer app, imported on first use (for CliRunner and the docs)."""
    if name == "app":
        from drift.cli.drift_app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

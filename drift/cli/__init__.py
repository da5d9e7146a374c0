"""The `drift` command (console entry point drift.cli:app), one module per command group, rendering only (what
they read comes from the library; no module here is imported by it): pipeline_commands.py (summary, models, fetch,
track, preset, check), init.py (a table of your own into params.yaml), report_commands.py (show, compare, plots,
saliency), cache.py (cache list | verify | compact | gc), plan_commands.py (the cost of a campaign),
rehearse_commands.py (a preset's whole pipeline on a small sample), policy_commands.py (retraining policies),
remote_commands.py (push, pull: DVC's, with one-line faults), run_commands.py (run chosen datasets alone),
paper.py (the authors' published results beside ours)."""

from drift.core.interrupt import command_name, exit_on_interrupt

exit_on_interrupt(command_name())  # first: a Ctrl-C while the commands' imports load is one line too

from drift.core.environment import configured_cpu_path, use_cpu_path  # noqa: E402

use_cpu_path(configured_cpu_path())  # params.yaml's compute.cpu_path, before numpy and torch load

import typer  # noqa: E402

from drift.cli import (  # noqa: E402
    cache,
    init,
    paper,
    pipeline_commands,
    plan_commands,
    policy_commands,
    rehearse_commands,
    remote_commands,
    report_commands,
    run_commands,
)
from drift.cli.common import DriftApp  # noqa: E402

app = DriftApp(
    add_completion=False,
    no_args_is_help=True,
    help="Measure how models decay over time: summaries of the DVC pipeline's drift matrices.",
)


def _version(value: bool):
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"drift {version('drift')}")
        except PackageNotFoundError:  # run from a source tree that was never installed
            from drift import __version__

            print(f"drift {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    show_version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="print the version and exit"
    ),
):
    """Measure how models decay over time: summaries of the DVC pipeline's drift matrices."""


for command in (
    pipeline_commands.COMMANDS
    + init.COMMANDS
    + report_commands.COMMANDS
    + plan_commands.COMMANDS
    + policy_commands.COMMANDS
    + paper.COMMANDS
    + rehearse_commands.COMMANDS
    + remote_commands.COMMANDS
    + run_commands.COMMANDS
):
    app.command()(command)
app.add_typer(cache.cache_app, name="cache")


def main():
    app()

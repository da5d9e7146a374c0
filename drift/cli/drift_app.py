"""The `drift` command's Typer app: every command group registered on one app (drift.cli `main` runs it)."""

import typer

import drift.cli.cache as cache
import drift.cli.init as init
import drift.cli.paper as paper
import drift.cli.pipeline_commands as pipeline_commands
import drift.cli.plan_commands as plan_commands
import drift.cli.policy_commands as policy_commands
import drift.cli.rehearse_commands as rehearse_commands
import drift.cli.remote_commands as remote_commands
import drift.cli.report_commands as report_commands
import drift.cli.run_commands as run_commands
from drift.cli.common import DriftApp

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

"""The `drift` command (console entry point drift.cli:app), one module per command group, rendering only (what
they read comes from the library; no module here is imported by it): pipeline.py (summary, models, fetch, track,
preset, check), init.py (a table of your own into params.yaml), report.py (show, compare, plots, saliency), cache.py
(cache list | verify | compact | gc), plan.py (the cost of a campaign), rehearse.py (a preset's whole pipeline on
a small sample), policy.py (retraining policies), remote.py (push, pull: DVC's, with one-line faults), paper.py (the authors' published results beside ours)."""
import typer

from drift.cli import cache, init, paper, pipeline, plan, policy, rehearse, remote, report

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Measure how models decay over time: summaries of the DVC pipeline's drift matrices.")
for command in (pipeline.COMMANDS + init.COMMANDS + report.COMMANDS + plan.COMMANDS + policy.COMMANDS + paper.COMMANDS
                + rehearse.COMMANDS + remote.COMMANDS):
    app.command()(command)
app.add_typer(cache.cache_app, name="cache")


def main():
    app()

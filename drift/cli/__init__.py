"""The `drift` command (console entry point drift.cli:app). Each module adds its commands:

    pipeline.py   summary, models, fetch, track, preset
    report.py     show, compare, plots, saliency (the report stage's outputs)
    cache.py      cache list | compact | gc (the embedding store)
    plan.py       plan (the cost of a campaign, drift/run/plan.py)
    policy.py     policy (retraining policies replayed from the matrices, drift/analysis/policy.py)
    paper.py      paper (the authors' published results, and the workspace's run beside them)
    rehearse.py   rehearse (a preset's whole pipeline on a small sample, drift/run/rehearse.py)

The commands render with Rich; what they read comes from the library (drift.report.results and the rest), so no
module here is imported by the library.
"""
import typer

from drift.cli import cache, paper, pipeline, plan, policy, rehearse, report

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Measure how models decay over time: summaries of the DVC pipeline's drift matrices.")
for command in pipeline.COMMANDS + report.COMMANDS + plan.COMMANDS + policy.COMMANDS + paper.COMMANDS + rehearse.COMMANDS:
    app.command()(command)
app.add_typer(cache.cache_app, name="cache")


def main():
    app()

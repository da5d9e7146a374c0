"""Stage report@<dataset>: metrics/, plots/ and tables/ of one dataset (see drift/report/outputs.py for the
list)."""

from drift.core.interrupt import exit_on_interrupt, stage_name

exit_on_interrupt(stage_name())  # first: a Ctrl-C while the imports below load is one line too

from drift.core.environment import configured_cpu_path, use_cpu_path

use_cpu_path(configured_cpu_path())  # compute.cpu_path, before numpy and torch load (they read it once)

from drift.analysis.policy import write_policy_report
from drift.analysis.shift import write_shift
from drift.core.params import load_params, roster
from drift.core.stage import require, run_stage
from drift.models.slice_data import SliceData, input_settings
from drift.report.html import write_html_report
from drift.report.outputs import load_eval, write_dataset_report


def main(argv: list[str]) -> None:
    name = argv[0]
    params = load_params(dataset=name)  # train and embed as this dataset's section overrides them
    p = require(name, "eval")
    grid = params.report.saliency.get(name)  # None: the default grid of an image dataset
    models = roster(params.train, name, params.info(name).modality)
    write_dataset_report(name, models, saliency_grid=grid)
    # drift without labels: the shift matrix and the novel rows, correlated with each model's true decay
    write_shift(
        SliceData(name, input_settings(params)),
        **params.report.shift.model_dump(),
        evals=load_eval(p["eval"], models),
    )
    write_policy_report(name, params.report.policy, params.train.epochs)  # replayed from the matrices
    write_html_report(name)  # reports/<name>.html: everything above in one offline page


if __name__ == "__main__":
    run_stage(main)

"""Stage report@<dataset>: metrics/, plots/ and tables/ of one dataset (see drift/report.py for the list)."""
from drift.params import load_params, roster
from drift.html_report import write_html_report
from drift.policy import write_policy_report
from drift.report import write_dataset_report
from drift.stage import require, run_stage


def main(argv):
    name = argv[0]
    params = load_params()
    require(name, "eval")
    grid = params.report.saliency.get(name)  # None: the default grid of an image dataset
    write_dataset_report(name, roster(params, name), saliency_grid=grid)
    write_policy_report(name)  # retraining policies replayed from the matrices
    write_html_report(name)  # reports/<name>.html: everything above in one offline page


if __name__ == "__main__":
    run_stage(main)

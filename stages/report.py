"""Stage report@<dataset>: metrics/, plots/ and tables/ of one dataset (see drift/report.py for the list)."""
from drift.config import load_params, run_stage
from drift.report import write_dataset_report


def main(argv):
    name = argv[0]
    params = load_params()
    write_dataset_report(name, params["train"]["models"][name])


if __name__ == "__main__":
    run_stage(main)

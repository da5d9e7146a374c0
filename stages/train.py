"""Stage train@<dataset>: for every model of the roster and seed, one checkpoint per cutoff k trained on
slices <= k (drift/train.py)."""
from drift.config import load_params, paths, roster, run_stage, validate
from drift.slice_data import SliceData
from drift.train import train_roster


def main(argv):
    name = argv[0]
    params = load_params()
    validate(params, name)
    train_roster(SliceData(params, name), roster(params, name), params.train, paths(name)["models"])


if __name__ == "__main__":
    run_stage(main)

"""Stage train@<dataset>: for every model of the roster and seed, one checkpoint per cutoff k trained on
slices <= k (drift/train.py)."""
from drift.params import load_params, roster
from drift.slice_data import SliceData
from drift.stage import run_stage
from drift.train import train_roster
from drift.roster import validate


def main(argv):
    name = argv[0]
    params = load_params()
    validate(params, name)
    data = SliceData(params, name)
    train_roster(data, roster(params, name), params.train, data.paths["models"])


if __name__ == "__main__":
    run_stage(main)

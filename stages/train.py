"""Stage train@<dataset>: for every model of the roster and seed, one checkpoint per cutoff k trained on
slices <= k (drift/train.py)."""
from drift.config import load_params, paths, roster, run_stage, validate
from drift.engine import train_cumulative_many
from drift.slice_data import SliceData
from drift.train import train_roster


def main(argv):
    name = argv[0]
    params = load_params()
    validate(params, name)
    # train.engine: "batched" trains the seeds and cutoffs of a model together (drift/engine.py)
    batched = getattr(params.train, "engine", "solo") == "batched"
    train_roster(SliceData(params, name), roster(params, name), params.train, paths(name)["models"],
                 train_all=train_cumulative_many if batched else None)


if __name__ == "__main__":
    run_stage(main)

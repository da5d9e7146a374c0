"""Stage train@<dataset>: for every model of the roster and seed, one checkpoint per cutoff k trained on
slices <= k (drift/train.py), or copied from the checkpoint cache when nothing that decides it has changed
(drift/cells.py); metrics/train/<dataset>.json counts both."""
from drift.cells import CellCache
from drift.params import load_params, roster
from drift.roster import validate
from drift.slice_data import SliceData
from drift.stage import run_stage, write_json
from drift.store import cache_dir
from drift.train import train_roster


def main(argv):
    name = argv[0]
    params = load_params()
    validate(params, name)
    data = SliceData(params, name)
    train_many = None
    if params.train.engine == "batched":  # drift/engine.py: every seed and cutoff of a model stacked
        from drift.engine import train_many
    counts = train_roster(data, roster(params, name), params.train, data.paths["models"], CellCache(cache_dir(params)),
                          params.compute, train_many)
    write_json(data.paths["train_metrics"], {"dataset": name, **counts})


if __name__ == "__main__":
    run_stage(main)

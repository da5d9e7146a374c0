"""Stage evaluate@<dataset>: every checkpoint on every slice -> one drift matrix per model and seed
(drift/evaluate.py `evaluate_roster`)."""
from drift.evaluate import evaluate_roster
from drift.params import load_params, roster
from drift.slice_data import SliceData
from drift.stage import require, run_stage, write_json


def main(argv):
    name = argv[0]
    params = load_params()
    data = SliceData(params, name)  # slice and embed first, then train: the first missing input is named
    p = require(name, "models")
    results = evaluate_roster(data, roster(params, name), p["models"], params.train.threads)
    for model, result in results.items():
        write_json(p["eval"] / f"{model}.json", result)


if __name__ == "__main__":
    run_stage(main)

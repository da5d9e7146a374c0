"""Stage evaluate@<dataset>: every checkpoint on every slice -> one drift matrix per model and seed."""
from drift.config import load_params, paths, roster, run_stage, write_json
from drift.engine import predict_many
from drift.evaluate import evaluate_model
from drift.slice_data import SliceData
from drift.train import deterministic, model_info, predict


def main(argv):
    name = argv[0]
    params = load_params()
    deterministic(params.train.threads)
    data = SliceData(params, name)
    p = paths(name)
    for model_name in roster(params, name):
        write_json(p["eval"] / f"{model_name}.json", {
            "dataset": name, "model": model_name, "family": model_info(model_name).family,
            "metric": data.task.metric, "higher_is_better": data.task.higher_is_better,
            "labels": [s["label"] for s in data.manifest["slices"]], "usable": data.usable,
            "seeds": evaluate_model(data, model_name, p["models"], predict, predict_many)})


if __name__ == "__main__":
    run_stage(main)

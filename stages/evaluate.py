"""Stage evaluate@<dataset>: every checkpoint on every slice → one drift matrix per model and seed."""
import numpy as np
import torch

from drift.config import load_params, paths, run_stage, write_json
from drift.evaluate import drift_matrix, to_json
from drift.models import create_model
from drift.slice_data import SliceData
from drift.train import model_info, predict


def main(argv):
    name = argv[0]
    params = load_params()
    data = SliceData(params, name)
    p = paths(name)
    labels = np.array(data.labels)
    rows = data.usable_rows()
    for model_name in params["train"]["models"][name]:
        inputs = data.inputs(model_name)
        seeds = {}
        for seed_dir in sorted((p["models"] / model_name).glob("seed*")):
            outputs = {}
            for checkpoint in sorted(seed_dir.glob("cutoff*.pt")):
                model = create_model(model_name, inputs.spec(), data.n_outputs)
                model.load_state_dict(torch.load(checkpoint, weights_only=True))
                full = np.zeros((len(labels), data.n_outputs), np.float32)
                full[rows] = predict(model.eval(), inputs, rows)
                outputs[int(checkpoint.stem.removeprefix("cutoff"))] = full
            matrix = drift_matrix(outputs, labels, data.slices, data.splits, data.usable, data.task)
            seeds[seed_dir.name.removeprefix("seed")] = to_json(matrix)
        write_json(p["eval"] / f"{model_name}.json", {
            "dataset": name, "model": model_name, "family": model_info(model_name).family,
            "metric": data.task.metric, "higher_is_better": data.task.higher_is_better,
            "labels": [s["label"] for s in data.manifest["slices"]], "usable": data.usable, "seeds": seeds})


if __name__ == "__main__":
    run_stage(main)

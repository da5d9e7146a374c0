"""Stage evaluate@<dataset>: every checkpoint on every slice → one drift matrix per model and seed."""
import json

import numpy as np
import torch

from drift.config import cache_dir, load_params, paths, run_stage, write_json
from drift.embed import open_store
from drift.evaluate import drift_matrix, to_json
from drift.inputs import load_inputs
from drift.models import create_model
from drift.store import read_slice_manifest, read_slice_table
from drift.tasks import get_task
from drift.train import model_info, predict


def main(argv):
    name = argv[0]
    params = load_params()
    p = paths(name)
    manifest = read_slice_manifest(p["slices"])
    task = get_task(manifest["task"])
    table = read_slice_table(p["slices"])
    slices = table.column("slice").to_numpy()
    splits = table.column("split").to_numpy(zero_copy_only=False)
    labels = np.array(table.column("label").to_pylist())
    usable = [s["usable"] for s in manifest["slices"]]
    embeddings = json.loads(p["embeddings"].read_text())
    store = open_store(embeddings, cache_dir(params)) if embeddings.get("encoder") else None
    rows = np.flatnonzero(np.isin(slices, [s["index"] for s in manifest["slices"] if s["usable"]]))
    loaded = {}
    for model_name in params["train"]["models"][name]:
        kind = model_info(model_name).input
        if kind not in loaded:
            loaded[kind] = load_inputs(kind, table, store)
        inputs = loaded[kind]
        n_outputs = task.n_outputs(len(manifest["label_names"]))
        seeds = {}
        for seed_dir in sorted((p["models"] / model_name).glob("seed*")):
            outputs = {}
            for checkpoint in sorted(seed_dir.glob("cutoff*.pt")):
                model = create_model(model_name, inputs.spec(), n_outputs)
                model.load_state_dict(torch.load(checkpoint, weights_only=True))
                full = np.zeros((len(slices), n_outputs), np.float32)
                full[rows] = predict(model.eval(), inputs, rows)
                outputs[int(checkpoint.stem.removeprefix("cutoff"))] = full
            seeds[seed_dir.name.removeprefix("seed")] = to_json(drift_matrix(outputs, labels, slices, splits, usable, task))
        write_json(p["eval"] / f"{model_name}.json", {
            "dataset": name, "model": model_name, "family": model_info(model_name).family,
            "metric": task.metric, "higher_is_better": task.higher_is_better,
            "labels": [s["label"] for s in manifest["slices"]], "usable": usable, "seeds": seeds})


if __name__ == "__main__":
    run_stage(main)

"""Stage train@<dataset>: for every model and seed, one checkpoint per cutoff k trained on slices <= k."""
import json
import shutil

import numpy as np
import torch

from drift.config import cache_dir, load_params, paths, run_stage, validate
from drift.embed import open_store
from drift.inputs import load_inputs
from drift.store import read_slice_manifest, read_slice_table
from drift.tasks import get_task
from drift.train import model_info, train_cumulative


def main(argv):
    name = argv[0]
    params = load_params()
    validate(params, name)
    p = paths(name)
    manifest = read_slice_manifest(p["slices"])
    train_cfg = params.get("train") or {}
    table = read_slice_table(p["slices"])
    slices = table.column("slice").to_numpy()
    splits = table.column("split").to_numpy(zero_copy_only=False)
    targets = get_task(manifest["task"]).target_tensor(table.column("label").to_pylist())
    embeddings = json.loads(p["embeddings"].read_text())
    store = open_store(embeddings, cache_dir(params)) if embeddings.get("encoder") else None
    shutil.rmtree(p["models"], ignore_errors=True)
    loaded = {}
    for model_name in train_cfg["models"][name]:
        kind = model_info(model_name).input
        if kind not in loaded:
            loaded[kind] = load_inputs(kind, table, store)
        for seed in train_cfg.get("seeds", [0]):
            out = p["models"] / model_name / f"seed{seed}"
            out.mkdir(parents=True, exist_ok=True)

            def save(k, model, out=out):
                torch.save(model.state_dict(), out / f"cutoff{k:03d}.pt")

            train_cumulative(model_name, loaded[kind], slices, splits, targets, manifest["slices"], manifest["task"],
                             len(manifest["label_names"]), train_cfg, seed, save)


if __name__ == "__main__":
    run_stage(main)

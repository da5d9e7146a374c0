"""Stage train@<dataset>: for every model and seed, one checkpoint per cutoff k trained on slices <= k."""
import shutil

import torch

from drift.config import load_params, paths, run_stage, validate
from drift.slice_data import SliceData
from drift.train import train_cumulative


def main(argv):
    name = argv[0]
    params = load_params()
    validate(params, name)
    data = SliceData(params, name)
    train_cfg = params.get("train") or {}
    targets = data.task.target_tensor(data.labels)
    out_root = paths(name)["models"]
    shutil.rmtree(out_root, ignore_errors=True)
    for model_name in train_cfg["models"][name]:
        inputs = data.inputs(model_name)
        for seed in train_cfg.get("seeds", [0]):
            out = out_root / model_name / f"seed{seed}"
            out.mkdir(parents=True, exist_ok=True)

            def save(k, model, out=out):
                torch.save(model.state_dict(), out / f"cutoff{k:03d}.pt")

            train_cumulative(model_name, inputs, data.slices, data.splits, targets, data.manifest["slices"],
                             data.manifest["task"], len(data.manifest["label_names"]), train_cfg, seed, save)


if __name__ == "__main__":
    run_stage(main)

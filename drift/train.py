"""Cumulative training over cutoffs (paper Sections 4.1 and 4.3).

For each model, seed and usable slice k, a fresh model f_k is trained on the train split of every slice <= k
for a fixed number of epochs; the final checkpoint is the model. Image models train with Adam, text heads and
probes with AdamW; learning rates per family come from params (`train.lr`). Deterministic for a seed on CPU.
"""
from __future__ import annotations

import numpy as np
import torch

from drift.errors import DriftError, close_matches
from drift.inputs import Inputs, length_bucketed_batches
from drift.models import ALIASES, MODELS, create_model
from drift.progress import progress
from drift.tasks import get_task


def model_info(name: str):
    name = ALIASES.get(name, name)
    if name not in MODELS:
        raise DriftError(f"unknown model {name!r}: {close_matches(name, MODELS)}")
    return MODELS[name]


def check_roster(models: list[str], modality: str, text_encoder: str | None, encoders=()) -> None:
    """Stop before any compute when a model cannot run on this dataset with these encoders."""
    from drift.encoders import get_encoder_spec

    for name in models:
        info = model_info(name)
        if modality == "image" and info.input == "tokens":
            raise DriftError(f"{name} is a text head; it cannot run on an image dataset")
        if modality == "text" and info.input == "pixels":
            raise DriftError(f"{name} is an image model; it cannot run on a text dataset")
        if info.input == "pooled":
            encoder = info.name.removeprefix("probe-")
            if get_encoder_spec(encoder).modality != modality:
                raise DriftError(f"{name} probes a {get_encoder_spec(encoder).modality} encoder; "
                                 f"it cannot run on a {modality} dataset")
            available = ([text_encoder] if modality == "text" else []) + list(encoders)
            if encoder not in available:
                raise DriftError(f"{name} needs embeddings from encoder {encoder}, which this run does not compute: "
                                 f"add it to embed.encoders (now {list(encoders)}) or drop {name}")


def learning_rate(lr_cfg, family: str) -> float:
    if isinstance(lr_cfg, (int, float)):
        return float(lr_cfg)
    return float(lr_cfg.get(family.lower(), lr_cfg.get("default", 1e-3)))


def train_one(name: str, inputs: Inputs, rows: np.ndarray, targets: torch.Tensor, task, n_outputs: int,
              cfg: dict, seed: int, bar=None) -> torch.nn.Module:
    """One model on the given training rows; returns it in eval mode."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = create_model(name, inputs.spec(), n_outputs)
    image = inputs.kind == "pixels"
    lr = learning_rate(cfg.get("lr", 1e-3), getattr(model, "family", "default"))
    if image:
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=float(cfg.get("weight_decay", 0.01)))
    loss_fn = task.loss(targets[torch.from_numpy(rows)])
    lengths = inputs.lengths if inputs.kind == "tokens" else None
    model.train()
    for _ in range(int(cfg.get("epochs", 5))):
        for batch in length_bucketed_batches(rows, lengths, int(cfg.get("batch_size", 64)), rng):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(*inputs.batch(batch)), targets[torch.from_numpy(batch)])
            loss.backward()
            optimizer.step()
        if bar is not None:
            bar.advance()
    return model.eval()


@torch.inference_mode()
def predict(model: torch.nn.Module, inputs: Inputs, rows: np.ndarray, batch_size: int = 256) -> np.ndarray:
    """Raw outputs [n, n_outputs] for the given rows, in their order."""
    lengths = inputs.lengths if inputs.kind == "tokens" else None
    # token rows run sorted by length (little padding), then go back to the caller's order
    perm = np.arange(len(rows)) if lengths is None else np.argsort(lengths[rows], kind="stable")
    outputs = [model(*inputs.batch(rows[perm[i:i + batch_size]])) for i in range(0, len(rows), batch_size)]
    if not outputs:
        return np.zeros((0, 1), np.float32)
    out = torch.cat(outputs).float().numpy()
    result = np.empty_like(out)
    result[perm] = out
    return result


def train_cumulative(name: str, inputs: Inputs, slices: np.ndarray, splits: np.ndarray, targets: torch.Tensor,
                     slice_info: list[dict], task_name: str, n_labels: int, cfg: dict, seed: int, save) -> None:
    """f_k for every usable slice k, trained on the train split of all slices <= k; `save(k, model)` keeps it."""
    task = get_task(task_name)
    n_outputs = task.n_outputs(n_labels)
    cutoffs = [s["index"] for s in slice_info if s["usable"]]
    with progress(f"train {name} seed {seed}", total=len(cutoffs) * int(cfg.get("epochs", 5))) as bar:
        for k in cutoffs:
            rows = np.flatnonzero((slices <= k) & (splits == "train"))
            model = train_one(name, inputs, rows, targets, task, n_outputs, cfg, seed * 100_003 + k, bar)
            save(k, model)

"""Cumulative training over cutoffs (paper Sections 4.1 and 4.3).

For each model, seed and trainable slice k, a fresh model f_k is trained on the train split of every slice <= k
for a fixed number of epochs; the final checkpoint is the model. Every model of an image dataset trains with
Adam, every model of a text dataset with AdamW; one learning rate per task (`train.lr`), or per family as an
explicit option. The references (`baseline-*`) are fitted in closed form on the same rows. Bit-identical for a
seed on CPU (`deterministic`).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import torch

from drift.checkpoints import PixelStandardised, Standardised, build_model, checkpoint_path, list_checkpoints, save_checkpoint
from drift.errors import DriftError, close_matches
from drift.inputs import Inputs, length_bucketed_batches
from drift.models import ALIASES, MODELS
from drift.params import TrainParams
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
    """One rate per task (a number, the paper's protocol), or per family as an explicit option:
    {default: ..., vit: ..., frozen: ...} (train.lr as drift.params reads it: `default` always there)."""
    if isinstance(lr_cfg, (int, float)):
        return float(lr_cfg)
    return float(lr_cfg[family.lower()] if family.lower() in lr_cfg else lr_cfg["default"])


def make_optimizer(model: torch.nn.Module, modality: str, cfg: TrainParams | dict) -> torch.optim.Optimizer:
    """Adam for every model of an image dataset (its probes too), AdamW for every model of a text dataset:
    the optimiser follows the modality, not the input (paper Section 4.3)."""
    cfg = TrainParams.of(cfg)
    lr = learning_rate(cfg.lr, getattr(model, "family", "default"))
    if modality == "image":
        return torch.optim.Adam(model.parameters(), lr=lr)
    return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=cfg.weight_decay)


def deterministic(threads: int) -> None:
    """Bit-identical runs for a seed: deterministic kernels and a fixed thread count (a reduction split over
    another number of threads adds in another order)."""
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(max(1, int(threads)))


def prepare_model(model: torch.nn.Module, inputs: Inputs, rows: np.ndarray, train_targets: torch.Tensor, task):
    """What a fresh model fixes from its cutoff's training rows before the first step: pixel and target
    standardisation, the loss with its class weights, and the loss factor `norm`. Returns (loss_fn, norm).
    Shared by train_one and drift.engine so both train the same thing."""
    loss_fn = task.loss(train_targets)
    norm = 1.0
    pixels = model.inner if isinstance(model, Standardised) else model
    if isinstance(pixels, PixelStandardised):
        pixels.fit_inputs(inputs.batch(rows[i:i + 4096]) for i in range(0, len(rows), 4096))
    if isinstance(model, Standardised):
        model.fit_scale(train_targets)
        norm = float(model.scale) ** -2  # the weighted MSE in standardised units: the same steps at any scale
    return loss_fn, norm


def train_one(name: str, inputs: Inputs, rows: np.ndarray, targets: torch.Tensor, task, n_outputs: int,
              cfg: TrainParams | dict, seed: int, modality: str = "text", bar=None) -> torch.nn.Module:
    """One model on the given training rows (`cfg`: the train params, drift.params.TrainParams or its mapping);
    returns it in eval mode."""
    cfg = TrainParams.of(cfg)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = build_model(name, inputs.spec(), n_outputs, task.name)
    epochs = cfg.epochs
    train_targets = targets[torch.from_numpy(rows)]
    if getattr(model, "closed_form", False):  # the references: fitted once on all training rows
        model.fit(inputs.batch(rows)[0], train_targets, task.name)
        if bar is not None:
            bar.advance(epochs)
        return model.eval()
    loss_fn, norm = prepare_model(model, inputs, rows, train_targets, task)
    optimizer = make_optimizer(model, modality, cfg)
    lengths = inputs.lengths if inputs.kind == "tokens" else None
    model.train()
    for _ in range(epochs):
        for batch in length_bucketed_batches(rows, lengths, cfg.batch_size, rng):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(*inputs.batch(batch)), targets[torch.from_numpy(batch)]) * norm
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


def trainable_cutoffs(slice_info: list[dict]) -> list[int]:
    """The cutoffs k that get a model f_k: slices with enough rows and at least one training row."""
    return [s["index"] for s in slice_info if s.get("trainable", s["usable"])]


def train_cumulative(name: str, inputs: Inputs, slices: np.ndarray, splits: np.ndarray, targets: torch.Tensor,
                     slice_info: list[dict], task_name: str, n_labels: int, cfg: TrainParams | dict, seed: int, save,
                     modality: str = "text") -> None:
    """f_k for every usable slice k, trained on the train split of all slices <= k; `save(k, model)` keeps it."""
    cfg = TrainParams.of(cfg)
    task = get_task(task_name)
    n_outputs = task.n_outputs(n_labels)
    cutoffs = trainable_cutoffs(slice_info)
    with progress(f"train {name} seed {seed}", total=len(cutoffs) * cfg.epochs) as bar:
        for k in cutoffs:
            rows = np.flatnonzero((slices <= k) & (splits == "train"))
            model = train_one(name, inputs, rows, targets, task, n_outputs, cfg, seed * 100_003 + k, modality, bar)
            save(k, model)


def train_roster(data, models: list[str], cfg: TrainParams | dict, models_dir: Path, train_all=None) -> None:
    """Every model of the roster, every seed: f_k for each trainable cutoff, saved under `models_dir`.

    The references are seed-independent (closed form): fitted once, the same checkpoint kept for every seed so
    the evaluate stage averages seeds alike for every model. `train_all`: None trains seed after seed, cutoff
    after cutoff (train_cumulative); drift.engine.train_cumulative_many trains every seed and cutoff of a model
    together, equal to it to float tolerance (passed in by the caller, so that this module never imports the
    engine and every stage importing it does not depend on drift/engine.py)."""
    cfg = TrainParams.of(cfg)
    deterministic(cfg.threads)
    shutil.rmtree(models_dir, ignore_errors=True)
    targets = data.task.target_tensor(data.labels)
    seeds = list(cfg.seeds)
    for name in models:
        inputs = data.inputs(name)
        closed_form = model_info(name).family == "Reference"
        if train_all is not None and not closed_form:
            def save_any(seed, k, model):
                save_checkpoint(model, checkpoint_path(models_dir, name, seed, k))
            train_all(name, inputs, data.slices, data.splits, targets, data.manifest["slices"], data.manifest["task"],
                      len(data.manifest["label_names"]), cfg, seeds, save_any, data.modality)
            continue
        for seed in seeds[:1] if closed_form else seeds:
            def save(k, model, seed=seed):
                save_checkpoint(model, checkpoint_path(models_dir, name, seed, k))
            train_cumulative(name, inputs, data.slices, data.splits, targets, data.manifest["slices"],
                             data.manifest["task"], len(data.manifest["label_names"]), cfg, seed, save,
                             data.modality)
        if closed_form:
            for seed in seeds[1:]:
                for k, path in list_checkpoints(models_dir, name)[seeds[0]].items():
                    target = checkpoint_path(models_dir, name, seed, k)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target)

"""Cumulative training over cutoffs (paper Sections 4.1 and 4.3).

For each model, seed and trainable slice k, a fresh model f_k is trained on the train split of every slice <= k
for a fixed number of epochs; the final checkpoint is the model. Every model of an image dataset trains with
Adam, every model of a text dataset with AdamW; one learning rate per task (`train.lr`), or per family as an
explicit option. The references (`baseline-*`) are fitted in closed form on the same rows. Bit-identical for a
seed on CPU (`deterministic`).
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
import tempfile
from pathlib import Path

import numpy as np
import torch

from drift.cells import TRAIN_CODE, CellCache, checkpoint_key, code_version, place, rows_digest
from drift.checkpoints import PixelStandardised, Standardised, build_model, checkpoint_path, save_checkpoint
from drift.inputs import Inputs, length_bucketed_batches
from drift.models import get_model_info
from drift.params import TrainParams
from drift.progress import progress


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
        # the next batches are read from disk on a background thread while this one trains
        for batch, x in inputs.prefetch(length_bucketed_batches(rows, lengths, cfg.batch_size, rng)):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(*x), targets[torch.from_numpy(batch)]) * norm
            loss.backward()
            optimizer.step()
        if bar is not None:
            bar.advance()
    return model.eval()


@torch.inference_mode()
def predict_many(models: list[torch.nn.Module], inputs: Inputs, rows: np.ndarray, batch_size: int = 256) -> list[np.ndarray]:
    """Raw outputs [n, n_outputs] of every model for the given rows, in their order, reading each batch once for
    all of them (evaluation runs every checkpoint that needs a slice over it together). Token rows run sorted by
    length (little padding), then go back to the caller's order; a model's outputs do not depend on which other
    models share the batches."""
    lengths = inputs.lengths if inputs.kind == "tokens" else None
    perm = np.arange(len(rows)) if lengths is None else np.argsort(lengths[rows], kind="stable")
    batches = [rows[perm[i:i + batch_size]] for i in range(0, len(rows), batch_size)]
    outputs: list[list[torch.Tensor]] = [[] for _ in models]
    for _, x in inputs.prefetch(batches):  # the next batches are read on a background thread
        for out, model in zip(outputs, models):
            out.append(model(*x))
    results = []
    for out in outputs:
        if not out:
            results.append(np.zeros((0, 1), np.float32))
            continue
        ordered = torch.cat(out).float().numpy()
        result = np.empty_like(ordered)
        result[perm] = ordered
        results.append(result)
    return results


def predict(model: torch.nn.Module, inputs: Inputs, rows: np.ndarray, batch_size: int = 256) -> np.ndarray:
    """Raw outputs [n, n_outputs] of one model for the given rows, in their order."""
    return predict_many([model], inputs, rows, batch_size)[0]


def trainable_cutoffs(slice_info: list[dict]) -> list[int]:
    """The cutoffs k that get a model f_k: slices with enough rows and at least one training row."""
    return [s["index"] for s in slice_info if s.get("trainable", s["usable"])]


def training_id(name: str, modality: str, cfg: TrainParams, inputs: Inputs) -> dict:
    """The training parameters that decide what a checkpoint of `name` holds (the cell cache's key part)."""
    family = get_model_info(name).family
    return {"epochs": cfg.epochs, "batch_size": cfg.batch_size, "weight_decay": cfg.weight_decay,
            "lr": learning_rate(cfg.lr, family), "optimizer": "adam" if modality == "image" else "adamw",
            "max_tokens": inputs.max_tokens, "threads": cfg.threads, "engine": cfg.engine}


@dataclass
class Job:
    """One model to train, as train_one takes it: its training rows and its seed."""
    rows: np.ndarray
    seed: int


def train_roster(data, models: list[str], cfg: TrainParams | dict, models_dir: Path, cache: CellCache | None = None,
                 train_many=None) -> dict:
    """Every model of the roster, every seed: f_k for each trainable cutoff, saved under `models_dir`.

    A checkpoint whose key (drift/cells.py: model, seed, training rows, inputs, training parameters, code) is in
    `cache` is copied from it, not trained; what is trained goes into the cache. The references are
    seed-independent (closed form): their key leaves the seed out, so every seed after the first reuses the first's
    fit and the evaluate stage averages seeds alike for every model. Returns the counts {trained, reused}.

    `train_many` (drift.engine.train_many, passed by the train stage when train.engine is "batched", so this
    module never imports the engine) trains every checkpoint of a model that is not cached, all seeds and cutoffs
    at once, equal to train_one to float tolerance; None trains them one by one."""
    cfg = TrainParams.of(cfg)
    deterministic(cfg.threads)
    shutil.rmtree(models_dir, ignore_errors=True)
    cache = cache or CellCache(Path(tempfile.mkdtemp(prefix="drift-cells-")))
    targets = data.task.target_tensor(data.labels)
    code = code_version(TRAIN_CODE)
    cutoffs = trainable_cutoffs(data.manifest["slices"])
    counts = {"trained": 0, "reused": 0}
    for name in models:
        inputs = data.inputs(name)
        info = get_model_info(name)
        closed_form = info.family == "Reference"
        spec = f"{info!r}|{inputs.spec()!r}|{data.n_outputs}|{data.task.name}"
        training, input_id = training_id(name, data.modality, cfg, inputs), data.input_id(name)
        todo = []  # (seed, k, key, rows, target) of every checkpoint no run has trained yet
        for seed in cfg.seeds:
            for k in cutoffs:
                rows = np.flatnonzero((data.slices <= k) & (data.splits == "train"))
                key = checkpoint_key(spec, None if closed_form else seed, rows_digest(data.row_hashes, rows),
                                     input_id, training, code)
                target = checkpoint_path(models_dir, name, seed, k)
                cached = cache.checkpoint(key)
                if cached is None and closed_form and any(t[2] == key for t in todo):
                    continue  # a later seed of a reference: placed from the first seed's fit below
                if cached is not None:
                    place(cached, target)
                    counts["reused"] += 1
                else:
                    todo.append((seed, k, key, rows, target))
        if todo:
            jobs = [Job(rows, seed * 100_003 + k) for seed, k, _, rows, _ in todo]
            with progress(f"train {name} seeds {','.join(str(s) for s in cfg.seeds)}",
                          total=len(jobs) * cfg.epochs) as bar:
                if train_many is not None and not closed_form:
                    trained = train_many(name, inputs, jobs, targets, data.task, data.n_outputs, cfg, data.modality, bar)
                else:
                    trained = (train_one(name, inputs, job.rows, targets, data.task, data.n_outputs, cfg, job.seed,
                                         data.modality, bar) for job in jobs)
                for (seed, k, key, rows, target), model in zip(todo, trained):
                    save_checkpoint(model, target)
                    cache.put_checkpoint(key, target)
                    counts["trained"] += 1
        if closed_form:  # every seed holds the same fit (its key has no seed)
            for seed in cfg.seeds:
                for k in cutoffs:
                    target = checkpoint_path(models_dir, name, seed, k)
                    if not target.exists():
                        place(checkpoint_path(models_dir, name, cfg.seeds[0], k), target)
                        counts["reused"] += 1
    return counts


"""Cumulative training over cutoffs (paper Sections 4.1 and 4.3).

For each model, seed and trainable slice k, a fresh model f_k is trained on the train split of every slice <= k
for a fixed number of epochs; the final checkpoint is the model. Every model of an image dataset trains with
Adam, every model of a text dataset with AdamW; one learning rate per task (`train.lr`), or per family as an
explicit option. The references (`baseline-*`) are fitted in closed form on the same rows. Bit-identical for a
seed on CPU (`deterministic`).
"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from drift.cells import TRAIN_CODE, CellCache, checkpoint_key, code_version, place, rows_digest
from drift.checkpoints import PixelStandardised, Standardised, build_model, checkpoint_path, save_checkpoint
from drift.inputs import Inputs, length_bucketed_batches
from drift.models import get_model_info
from drift.executor import check_reachable, run_tasks, workers
from drift.params import ComputeParams, TrainParams
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
    loss_fn = task.loss(train_targets)
    norm = 1.0
    pixels = model.inner if isinstance(model, Standardised) else model
    if isinstance(pixels, PixelStandardised):
        pixels.fit_inputs(inputs.batch(rows[i:i + 4096]) for i in range(0, len(rows), 4096))
    if isinstance(model, Standardised):
        model.fit_scale(train_targets)
        norm = float(model.scale) ** -2  # the weighted MSE in standardised units: the same steps at any scale
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
def predict(model: torch.nn.Module, inputs: Inputs, rows: np.ndarray, batch_size: int = 256) -> np.ndarray:
    """Raw outputs [n, n_outputs] for the given rows, in their order."""
    lengths = inputs.lengths if inputs.kind == "tokens" else None
    # token rows run sorted by length (little padding), then go back to the caller's order
    perm = np.arange(len(rows)) if lengths is None else np.argsort(lengths[rows], kind="stable")
    batches = [rows[perm[i:i + batch_size]] for i in range(0, len(rows), batch_size)]
    outputs = [model(*x) for _, x in inputs.prefetch(batches)]
    if not outputs:
        return np.zeros((0, 1), np.float32)
    out = torch.cat(outputs).float().numpy()
    result = np.empty_like(out)
    result[perm] = out
    return result


def trainable_cutoffs(slice_info: list[dict]) -> list[int]:
    """The cutoffs k that get a model f_k: slices with enough rows and at least one training row."""
    return [s["index"] for s in slice_info if s.get("trainable", s["usable"])]


def training_id(name: str, modality: str, cfg: TrainParams, inputs: Inputs) -> dict:
    """The training parameters that decide what a checkpoint of `name` holds (the cell cache's key part)."""
    family = get_model_info(name).family
    return {"epochs": cfg.epochs, "batch_size": cfg.batch_size, "weight_decay": cfg.weight_decay,
            "lr": learning_rate(cfg.lr, family), "optimizer": "adam" if modality == "image" else "adamw",
            "max_tokens": inputs.max_tokens, "threads": cfg.threads}


@dataclass
class TrainGroup:
    """One task of the training grid: the cutoffs of one (model, seed) not in the checkpoint cache, [(k, key)].
    Small when pickled: SliceData travels as its recipe (params, dataset, repository) and is rebuilt by the worker."""
    data: object
    name: str
    seed: int
    cfg: TrainParams
    todo: list[tuple[int, str]]
    cache_root: Path


def cutoff_rows(data, k: int) -> np.ndarray:
    """The training rows of f_k: the train split of every slice <= k."""
    return np.flatnonzero((data.slices <= k) & (data.splits == "train"))


def train_group(group: TrainGroup) -> list[str]:
    """Train a group's cutoffs into the checkpoint cache (each written atomically); returns their keys. A cutoff
    already there (a retried task: the dead attempt finished it) is not trained again. Runs in the stage's
    process or in a Ray worker, with the same seeds and thread count: the same bytes either way."""
    data, cfg = group.data, group.cfg
    deterministic(cfg.threads)
    inputs, targets = data.inputs(group.name), data.task.target_tensor(data.labels)
    cache = CellCache(group.cache_root)
    with progress(f"train {group.name} seed {group.seed}", total=len(group.todo) * cfg.epochs) as bar, \
            tempfile.TemporaryDirectory(prefix="drift-train-") as tmp:
        for k, key in group.todo:
            if cache.checkpoint(key) is not None:
                bar.advance(cfg.epochs)
                continue
            model = train_one(group.name, inputs, cutoff_rows(data, k), targets, data.task, data.n_outputs, cfg,
                              group.seed * 100_003 + k, data.modality, bar)
            # saved under its final file name: torch writes the name into the archive, so into the bytes
            path = Path(tmp) / checkpoint_path(tmp, group.name, group.seed, k).name
            save_checkpoint(model, path)
            cache.put_checkpoint(key, path)
    return [key for _, key in group.todo]


def train_roster(data, models: list[str], cfg: TrainParams | dict, models_dir: Path, cache: CellCache | None = None,
                 compute: ComputeParams | dict | None = None) -> dict:
    """Every model of the roster, every seed: f_k for each trainable cutoff, saved under `models_dir`.

    A checkpoint whose key (drift/cells.py: model, seed, training rows, inputs, training parameters, code) is in
    `cache` is copied from it, not trained; the others are trained into the cache, one task per (model, seed) on
    the `compute` executor (drift/executor.py), then copied. The references are seed-independent (closed form):
    their key leaves the seed out, so every seed after the first reuses the first's fit and the evaluate stage
    averages seeds alike for every model. Returns the counts {trained, reused} and the executor and its workers."""
    cfg = TrainParams.of(cfg)
    compute = ComputeParams.of(compute or {})
    deterministic(cfg.threads)
    shutil.rmtree(models_dir, ignore_errors=True)
    cache = cache or CellCache(Path(tempfile.mkdtemp(prefix="drift-cells-")))
    code = code_version(TRAIN_CODE)
    cutoffs = trainable_cutoffs(data.manifest["slices"])
    counts = {"trained": 0, "reused": 0}
    groups, scheduled, copies = [], set(), []  # copies: a reference's fit another seed's task computes
    for name in models:
        inputs = data.inputs(name)  # builds the feature files here, before any task reads them
        info = get_model_info(name)
        closed_form = info.family == "Reference"
        spec = f"{info!r}|{inputs.spec()!r}|{data.n_outputs}|{data.task.name}"
        training, input_id = training_id(name, data.modality, cfg, inputs), data.input_id(name)
        for seed in cfg.seeds:
            todo = []
            for k in cutoffs:
                rows = rows_digest(data.row_hashes, cutoff_rows(data, k))
                key = checkpoint_key(spec, None if closed_form else seed, rows, input_id, training, code)
                cached = cache.checkpoint(key)
                if cached is not None or key in scheduled:
                    copies.append((key, checkpoint_path(models_dir, name, seed, k)))
                    counts["reused"] += 1
                else:
                    todo.append((k, key))
                    scheduled.add(key)
            if todo:
                groups.append(TrainGroup(data, name, seed, cfg, todo, Path(cache.root).resolve()))
    if groups:
        cache.root.mkdir(parents=True, exist_ok=True)
        check_reachable([cache.root, data.paths["slices"], data.paths["features"]], compute)
    for group, keys in zip(groups, run_tasks(train_group, groups, compute)):
        for (k, _), key in zip(group.todo, keys):
            place(cache.checkpoint(key), checkpoint_path(models_dir, group.name, group.seed, k))
            counts["trained"] += 1
    for key, target in copies:
        place(cache.checkpoint(key), target)
    return {**counts, "executor": compute.executor, "workers": workers(compute) if groups else 0}

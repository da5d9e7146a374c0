"""Cumulative training over cutoffs (paper Sections 4.1 and 4.3).

For each model, seed and trainable slice k, a fresh model f_k is trained on the train split of every slice <=
k for a fixed number of epochs; the final checkpoint is the model. It keeps its mean training loss of each
epoch (drift.models.checkpoints.epoch_losses), so a run can say when the loss was still falling at the last
one. Every model of an image dataset trains with Adam, every model of a text dataset with AdamW; one learning
rate per task (`train.lr`), or per family as an explicit option; `train.grad_clip` clips each model's gradient
norm before its step. The references (`baseline-*`) are fitted in closed form on the same rows. Bit-identical
for a seed on CPU (`deterministic`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypedDict, cast

import numpy as np
import torch

from drift.core.environment import deterministic
from drift.core.errors import DriftError
from drift.core.executor import check_reachable, run_tasks, ships_inputs, workers
from drift.core.objectstore import location
from drift.core.params import ComputeParams, ModelTraining, TrainParams, model_training
from drift.core.progress import progress
from drift.models import get_model_info, model_module, model_modules
from drift.models.checkpoints import (
    PixelScaled,
    PixelStandardised,
    Standardised,
    build_model,
    checkpoint_path,
    keep_losses,
    loss_curves,
    reading_inputs,
    save_checkpoint,
)
from drift.models.inputs import Inputs, epoch_batches, shuffle_draws
from drift.models.slice_data import SliceData
from drift.protocol.summary import still_falling, still_falling_message
from drift.store.cells import (
    CHECKPOINT_KEYS,
    CorruptTally,
    ResultCache,
    checkpoint_key,
    code_version,
    rows_digest,
)
from drift.store.slices import trainable_cutoffs


def make_optimizer(model: torch.nn.Module, training: ModelTraining) -> torch.optim.Optimizer:
    """The optimiser `training` (drift.core.params.model_training) names, at its learning rate: Adam for every
    model of an image dataset (its probes too), AdamW for every model of a text dataset (paper Section 4.3).
    """
    if training.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=training.lr, fused=True)
    # fused: one ATen kernel per step whose sqrt is the CPU's exact one; the default step takes torch.sqrt
    # through MKL's vector math, whose last bits follow the CPU model (AVX2-only AMD vs others) whatever
    # MKL_CBWR says
    return torch.optim.AdamW(
        model.parameters(), lr=training.lr, weight_decay=training.weight_decay, fused=True
    )


def training_record(
    name: str, modality: str, cfg: TrainParams, inputs: Inputs, engine: str | None = None
) -> ModelTraining:
    """Model `name`'s training resolved from the train params: the one record its checkpoint key hashes and
    its optimiser reads. `engine`: the one training it (else `cfg.engine`, already solo or batched)."""
    info = get_model_info(name)
    return model_training(cfg, info.family, modality, info.dropout, inputs.max_tokens, engine)


def model_to_train(name: str, inputs: Inputs, n_outputs: int, task, cfg: TrainParams) -> torch.nn.Module:
    """The untrained module of `name` that train_one and the batched engine start from, with the train params'
    dropout, target and pixel standardisation, pixel scale and (a reference) C."""
    return build_model(
        name,
        inputs.spec(),
        n_outputs,
        task.name,
        cfg.dropout,
        cfg.standardise_targets,
        cfg.standardise_pixels,
        cfg.pixel_scale,
        cfg.modules,
        cfg.reference_C,
    )


def prepare_model(
    model: torch.nn.Module,
    inputs: Inputs,
    rows: np.ndarray,
    train_targets: torch.Tensor,
    task,
    weight_targets: torch.Tensor | None = None,
):
    """What a fresh model fixes from its cutoff's training rows before the first step: pixel and target
    standardisation, the loss with its class weights (from `weight_targets` when given: train.loss_weights
    split), and the loss factor `norm`. Returns (loss_fn, norm). Shared by train_one and drift.train.engine so
    both train the same thing."""
    loss_fn = task.loss(train_targets if weight_targets is None else weight_targets)
    norm = 1.0
    pixels = model.inner if isinstance(model, Standardised) else model
    if isinstance(pixels, PixelScaled):  # the statistics of the values the inner model reads: as stored
        pixels = pixels.inner
    if isinstance(pixels, PixelStandardised):
        reading = reading_inputs(model, inputs)
        pixels.fit_inputs(reading.batch(rows[i : i + 4096]) for i in range(0, len(rows), 4096))
    if isinstance(model, Standardised):
        model.fit_scale(train_targets)
        norm = float(model.scale) ** -2  # the weighted MSE in standardised units: the same steps at any scale
    return loss_fn, norm


def train_one(
    name: str,
    inputs: Inputs,
    rows: np.ndarray,
    targets: torch.Tensor,
    task,
    n_outputs: int,
    cfg: TrainParams,
    seed: int,
    modality: str = "text",
    bar=None,
    weight_rows: np.ndarray | None = None,
) -> torch.nn.Module:
    """One model on the given training rows (`cfg`: the train params); returns it in eval mode, carrying the
    mean training loss of each epoch (keep_losses: the loss each step minimised, averaged over the epoch's
    rows; none for a reference). `weight_rows`: the rows the loss's class weights come from
    (loss_weight_rows), else `rows`."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = model_to_train(name, inputs, n_outputs, task, cfg)
    draws = shuffle_draws(cfg.shuffle_draws)
    inputs = reading_inputs(model, inputs)
    epochs = cfg.epochs
    train_targets = targets[torch.from_numpy(rows)]
    if getattr(model, "closed_form", False):  # the references: fitted once on all training rows
        # a reference's fit method (drift/models/reference.py); nn.Module types an attribute as Tensor |
        # Module
        fit = cast(Callable[..., torch.nn.Module], model.fit)
        fit(inputs.batch(rows)[0], train_targets, task.name)
        if bar is not None:
            bar.advance(epochs)
        return model.eval()
    weights = None if weight_rows is None else targets[torch.from_numpy(weight_rows)]
    loss_fn, norm = prepare_model(model, inputs, rows, train_targets, task, weights)
    optimizer = make_optimizer(model, training_record(name, modality, cfg, inputs, engine="solo"))
    lengths = inputs.lengths if inputs.kind == "tokens" else None
    model.train()
    curve: list[float] = []
    for epoch in range(epochs):
        # the next batches are read from disk on a background thread while this one trains
        batches = epoch_batches(rows, lengths, cfg.batch_size, rng, cfg.batch_order, seed, epoch, draws)
        total, seen = 0.0, 0
        for batch, x in inputs.prefetch(batches):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(*x), targets[torch.from_numpy(batch)]) * norm
            loss.backward()
            if cfg.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            total, seen = total + float(loss.detach()) * len(batch), seen + len(batch)
        if seen:  # no rows, no steps: no point on the curve
            curve.append(total / seen)
        if bar is not None:
            bar.advance()
    return keep_losses(model.eval(), curve)


def still_falling_lines(dataset: str, models: list[str], models_dir: Path) -> list[str]:
    """The train stage's warnings: one line for each of `models` whose training loss, over its checkpoints
    under `models_dir` (every seed and cutoff), was still falling at the last epoch
    (drift.protocol.summary.still_falling)."""
    lines = []
    for model in models:
        curves = [curve for cutoffs in loss_curves(models_dir, model).values() for curve in cutoffs.values()]
        if still_falling(curves):
            lines.append(still_falling_message(dataset, model, curves))
    return lines


@dataclass
class Job:
    """One model to train, as train_one takes it: its training rows, its seed, and the rows its loss's class
    weights come from (None: its training rows)."""

    rows: np.ndarray
    seed: int
    weight_rows: np.ndarray | None = None


def slice_time(label: str) -> int:
    """A slice's time value as the authors key it: its year ("1930"), or a half-year counted from 2000
    ("2014-H1" = 28); other labels are a one-line error."""
    year, _, half = label.partition("-H")
    if not year.isdigit() or half not in ("", "1", "2"):
        raise DriftError(
            f"train.slice_seed hash needs yearly or half-yearly slices, got slice {label!r}: "
            f"set train.slice_seed to offset"
        )
    return (int(year) - 2000) * 2 + int(half) - 1 if half else int(year)


# their text probes' keys name the checkpoint's size (model/text/frozen_backbone.py FROZEN_TEXT_BACKBONES);
# MiniLM's name already does (minilm_l6_frozen)
_BASE_PROBES = ("distilbert", "electra", "bert", "mpnet", "roberta", "modernbert", "deberta-v3")


def trainer_key(name: str) -> str:
    """A model's name as the authors' runs key it: "-" as "_", a probe as "<encoder>_frozen", a text probe of
    a base-size checkpoint as "<encoder>_base_frozen" (cnn-l: cnn_l, probe-dinov3-s: dinov3_s_frozen,
    probe-deberta-v3: deberta_v3_base_frozen, probe-minilm-l6: minilm_l6_frozen)."""
    if name.startswith("probe-") and name.removeprefix("probe-") in _BASE_PROBES:
        name = f"{name}-base"
    key = name.replace("-", "_")
    return f"{key.removeprefix('probe_')}_frozen" if key.startswith("probe_") else key


def cutoff_seed(seed: int, name: str, k: int, label: str | None, how: str = "offset") -> int:
    """The seed f_k trains from (train.slice_seed): offset: seed * 100003 + k; hash: the authors' per-slice
    seed, the first 4 bytes (big-endian) of sha256(f"{seed}:{trainer_key(name)}:{slice_time(label)}")."""
    if how == "offset":
        return seed * 100_003 + k
    assert label is not None, "the hash seed is keyed by the slice's label"
    digest = hashlib.sha256(f"{seed}:{trainer_key(name)}:{slice_time(label)}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def cutoff_rows(data: SliceData, k: int, order: str = "time") -> np.ndarray:
    """The training rows of f_k: the train split of every slice <= k, in train.row_order's order: time (the
    slice table's: slice, time, id) or split (slice after slice, each in its split's order:
    SliceData.split_order)."""
    if order == "split":
        rows = data.split_order()
        return rows[data.slices[rows] <= k]
    return np.flatnonzero((data.slices <= k) & (data.splits == "train"))


def loss_weight_rows(data: SliceData, cfg: TrainParams) -> np.ndarray | None:
    """The rows every cutoff's loss weights come from under train.loss_weights split: the whole training
    split, every slice (the authors' runs); None under cutoff (each cutoff's own training rows)."""
    return np.flatnonzero(data.splits == "train") if cfg.loss_weights == "split" else None


# drift.train.engine.train_many: (name, inputs, jobs, targets, task, n_outputs, cfg, modality, bar) -> the
# models
TrainMany = Callable[
    [str, Inputs, list[Job], torch.Tensor, Any, int, TrainParams, str, Any], list[torch.nn.Module]
]


@dataclass
class TrainGroup:
    """One task of the training grid: checkpoints of one model not in the cache, [(seed, k, key)]: one seed's
    cutoffs, or every seed's when the batched engine stacks them (`train_many`). Small when pickled: SliceData
    travels as its recipe (params, dataset, repository) and is rebuilt by a Ray worker."""

    data: SliceData
    name: str
    todo: list[tuple[int, int, str]]
    cfg: TrainParams
    cache_root: Path
    train_many: TrainMany | None = None


class Trained(NamedTuple):
    """What a training task returns: its checkpoints' keys and the seconds it took where it ran."""

    keys: list[str]
    seconds: float


# on_trained(model, [(seed, cutoff) of each checkpoint trained], seconds): one call per training task
OnTrained = Callable[[str, list[tuple[int, int]], float], None]


def train_group(group: TrainGroup) -> Trained:
    """Train a group's checkpoints into the checkpoint cache (each written atomically); returns their keys and
    the task's seconds. One already there (a retried task: the dead attempt finished it) is not trained again.
    Runs in the stage's process or in a Ray worker, with the same seeds and thread count: the same bytes
    either way."""
    started = time.perf_counter()
    data, cfg, name = group.data, group.cfg, group.name
    deterministic(cfg.threads)
    cache = ResultCache(group.cache_root)
    todo = [(seed, k, key) for seed, k, key in group.todo if not cache.has_checkpoint(key)]
    if todo:
        inputs, targets = data.inputs(name), data.task.target_tensor(data.labels)
        weight_rows = loss_weight_rows(data, cfg)
        labels = {s.index: s.label for s in data.manifest.slices}  # read by the hash seed only
        jobs = [
            Job(
                cutoff_rows(data, k, cfg.row_order),
                cutoff_seed(seed, name, k, labels[k], cfg.slice_seed),
                weight_rows,
            )
            for seed, k, _ in todo
        ]
        seeds = ",".join(str(s) for s in dict.fromkeys(seed for seed, _, _ in todo))
        with (
            progress(f"train {name} seed {seeds}", total=len(jobs) * cfg.epochs) as bar,
            tempfile.TemporaryDirectory(prefix="drift-train-") as tmp,
        ):
            trained: Iterable[torch.nn.Module]
            if group.train_many is not None:
                trained = group.train_many(
                    name, inputs, jobs, targets, data.task, data.n_outputs, cfg, data.modality, bar
                )
            else:
                trained = (
                    train_one(
                        name,
                        inputs,
                        job.rows,
                        targets,
                        data.task,
                        data.n_outputs,
                        cfg,
                        job.seed,
                        data.modality,
                        bar,
                        job.weight_rows,
                    )
                    for job in jobs
                )
            for (seed, k, key), model in zip(todo, trained):
                # saved under its final file name: torch writes the name into the archive, so into the bytes
                path = Path(tmp) / checkpoint_path(Path(tmp), name, seed, k).name
                save_checkpoint(model, path)
                cache.put_checkpoint(key, path)
    return Trained([key for _, _, key in group.todo], time.perf_counter() - started)


class TrainCounts(TypedDict):
    """What the train stage records of a roster's training (drift.train.train_run.TrainRun): checkpoints
    trained and copied from the cache, cached ones trained again because they failed their checksum, the
    executor and its workers (0 when nothing was trained)."""

    trained: int
    reused: int
    recomputed: CorruptTally
    executor: str
    workers: int


class TrainedRoster(NamedTuple):
    """What train_roster returns: its counts, and the damaged cache files it found (printed, not recorded)."""

    counts: TrainCounts
    corrupt: list[str]


class Copy(NamedTuple):
    """A checkpoint the cache holds (or a fit another seed computes): its key and its place under models_dir."""

    key: str
    target: Path


@dataclass
class TrainingPlan:
    """What a roster needs: the training tasks, in training order, and the checkpoints copied from the cache."""

    groups: list[TrainGroup]
    copies: list[Copy]


@dataclass(frozen=True)
class KeyParts:
    """What one model's checkpoint keys hash besides the seed and the training rows (drift.store.cells
    checkpoint_key): a reference's key leaves the seed out (closed form)."""

    spec: str
    closed_form: bool
    input_id: str
    training: dict
    code: str

    def key(self, seed: int, rows: str) -> str:
        seed_part = None if self.closed_form else seed
        return checkpoint_key(self.spec, seed_part, rows, self.input_id, self.training, self.code)


def key_parts(data: SliceData, name: str, cfg: TrainParams) -> KeyParts:
    """Model `name`'s KeyParts under `cfg`; builds its feature files first, before any task reads them."""
    inputs = data.inputs(name)
    info = get_model_info(name)
    training = training_record(name, data.modality, cfg, inputs).model_dump()
    weight_rows = loss_weight_rows(data, cfg)
    if weight_rows is not None and data.task.name in ("regression", "multilabel"):
        # the rows the loss weights come from: part of the key
        training = {**training, "loss_weights": rows_digest(data.row_hashes, weight_rows)}
    return KeyParts(
        spec=f"{info!r}|{inputs.spec()!r}|{data.n_outputs}|{data.task.name}",
        closed_form=info.family == "Reference",
        input_id=data.input_id(name),
        training=training,
        # its own head's module, not the others'
        code=code_version("train", model_module(name), model_modules()),
    )


def plan_model(
    data: SliceData,
    name: str,
    cfg: TrainParams,
    models_dir: Path,
    cache: ResultCache,
    scheduled: set[str],
    train_many: TrainMany | None,
) -> TrainingPlan:
    """One model's part of the plan, seed after seed and cutoff after cutoff: a checkpoint whose key is in the
    cache or already `scheduled` (adding those it schedules) is a copy; the others are one task per seed, or
    one for every seed when batched."""
    parts = key_parts(data, name, cfg)
    batched = train_many is not None and not parts.closed_form and cfg.engine != "solo"
    cache_root = location(cache.root).resolve()
    cutoffs = trainable_cutoffs(data.manifest.slices)
    rows = {k: rows_digest(data.row_hashes, cutoff_rows(data, k, cfg.row_order)) for k in cutoffs}
    plan = TrainingPlan([], [])
    model_todo = []  # batched: every seed's checkpoints, one task
    for seed in cfg.seeds:
        todo = []
        for k in cutoffs:
            key = parts.key(seed, rows[k])
            if key in scheduled or cache.has_checkpoint(key):
                plan.copies.append(Copy(key, checkpoint_path(models_dir, name, seed, k)))
            else:
                todo.append((seed, k, key))
                scheduled.add(key)
        if todo and not batched:
            plan.groups.append(TrainGroup(data, name, todo, cfg, cache_root))
        model_todo += todo
    if model_todo and batched:
        plan.groups.append(TrainGroup(data, name, model_todo, cfg, cache_root, train_many))
    return plan


def plan_training(
    data: SliceData,
    models: list[str],
    cfg: TrainParams,
    models_dir: Path,
    cache: ResultCache,
    train_many: TrainMany | None = None,
    engines: dict[str, str] | None = None,
) -> TrainingPlan:
    """Every model's plan (plan_model), in the roster's order; with `engines` (train.engine auto) each model
    trains under the engine it names, which its key carries, as an explicit choice's."""
    plan = TrainingPlan([], [])
    scheduled: set[str] = set()  # the keys of the checkpoints a task trains
    for name in models:
        model_cfg = cfg.model_copy(update={"engine": engines[name]}) if engines else cfg
        part = plan_model(data, name, model_cfg, models_dir, cache, scheduled, train_many)
        plan.groups += part.groups
        plan.copies += part.copies
    return plan


def check_task_inputs(data: SliceData, cache: ResultCache, compute: ComputeParams) -> None:
    """Before the training tasks run: the cache's folder exists, and their inputs reach the workers: shipped
    with the tasks to workers that see only the store, else the paths every node must see."""
    cache.root.mkdir(parents=True, exist_ok=True)
    if ships_inputs(compute, cache.root):
        check_reachable([cache.root], compute)
        data.ship()
    else:
        check_reachable([cache.root, data.paths["slices"], data.paths["features"]], compute)


def run_training(
    groups: list[TrainGroup],
    models_dir: Path,
    cache: ResultCache,
    compute: ComputeParams,
    on_trained: OnTrained | None = None,
) -> int:
    """Run the training tasks on the `compute` executor and place each checkpoint they trained under
    `models_dir`; returns how many. `on_trained` hears of each task as it returns."""
    trained = 0
    for group, done in zip(groups, run_tasks(train_group, groups, compute)):
        for (seed, k, _), key in zip(group.todo, done.keys):
            cache.place(key, checkpoint_path(models_dir, group.name, seed, k))
            trained += 1
        if on_trained is not None:
            on_trained(group.name, [(seed, k) for seed, k, _ in group.todo], done.seconds)
    return trained


def write_checkpoint_keys(plan: TrainingPlan, models_dir: Path) -> None:
    """models_dir/CHECKPOINT_KEYS: each checkpoint's cache key by its path under models_dir, which cache
    entries this workspace uses (what `drift cache gc` keeps)."""
    keys = {str(copy.target.relative_to(models_dir)): copy.key for copy in plan.copies}
    keys.update(
        {
            str(checkpoint_path(models_dir, g.name, seed, k).relative_to(models_dir)): key
            for g in plan.groups
            for seed, k, key in g.todo
        }
    )
    models_dir.mkdir(parents=True, exist_ok=True)
    (models_dir / CHECKPOINT_KEYS).write_text(json.dumps(dict(sorted(keys.items())), indent=0) + "\n")


def train_roster(
    data: SliceData,
    models: list[str],
    cfg: TrainParams,
    models_dir: Path,
    cache: ResultCache | None = None,
    compute: ComputeParams | None = None,
    train_many: TrainMany | None = None,
    engines: dict[str, str] | None = None,
    on_trained: OnTrained | None = None,
) -> TrainedRoster:
    """Every model of the roster, every seed: f_k for each trainable cutoff, saved under `models_dir`; returns
    the counts and the damaged cache files found (TrainedRoster).

    A checkpoint whose key (KeyParts: model, seed, training rows, inputs, training parameters, code) is in
    `cache` is copied from it, not trained (a cached one that fails its checksum is trained again); the others
    are trained into the cache, one task per (model, seed) on the `compute` executor (drift/core/executor.py;
    None: this process), then copied: plan_training, then run_training. `train_many`
    (drift.train.engine.train_many, passed by the train stage when train.engine is "batched", so this module
    never imports the engine) trains all of a model's missing checkpoints, every seed and cutoff, as one task
    of stacked computations, equal to train_one to float tolerance; with `engines` ({model: "solo" |
    "batched"}, train.engine auto) only the models it names batched are stacked. A reference's key leaves the
    seed out (closed form): every seed after the first reuses the first's fit, so the evaluate stage averages
    seeds alike for every model. `on_trained` (the stage's timings) hears of each training task as it returns:
    its model, the (seed, cutoff) of each checkpoint it trained and its seconds; it changes nothing trained.
    """
    compute = compute or ComputeParams()
    deterministic(cfg.threads)
    shutil.rmtree(models_dir, ignore_errors=True)
    cache = cache or ResultCache(Path(tempfile.mkdtemp(prefix="drift-cells-")))
    plan = plan_training(data, models, cfg, models_dir, cache, train_many, engines)
    if plan.groups:
        check_task_inputs(data, cache, compute)
    trained = run_training(plan.groups, models_dir, cache, compute, on_trained)
    for copy in plan.copies:
        cache.place(copy.key, copy.target)
    write_checkpoint_keys(plan, models_dir)
    counts: TrainCounts = {
        "trained": trained,
        "reused": len(plan.copies),
        "recomputed": {"corrupt": len(cache.corrupt)},
        "executor": compute.executor,
        "workers": workers(compute) if plan.groups else 0,
    }
    return TrainedRoster(counts, cache.corrupt)

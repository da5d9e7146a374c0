"""The evaluate stage's work: every checkpoint of a (model, seed) over the slices -> its drift matrix and the
label-free estimates of the same cells, in three steps around the protocol's definition
(drift/protocol/matrix.py `drift_matrix`): look up the cells the cache holds, predict what is missing
(batched), then let the definition score the rest and store it. Cells are scored under params.yaml `evaluate:`
(the task's `scoring`); a cell's cache key names the rule where the value depends on it (Task.cached_as).
Beside each cell's score, from the same outputs and cached alike: each class's own score of the cell
(`class_scores`) and, for one cell, the confusion counts (`confusion_counts`), which the report names by
class."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple, NotRequired, TypedDict

import numpy as np

from drift.core.environment import deterministic
from drift.core.executor import check_reachable, run_tasks, ships_inputs, workers
from drift.core.objectstore import location
from drift.core.params import ComputeParams, EvaluateParams
from drift.core.progress import progress
from drift.evaluate.estimate import METHODS, calibrate, estimated_matrix, source_rows
from drift.evaluate.eval_result import CLASS_METRICS, MAX_RATINGS, EvalResult
from drift.evaluate.predict import predict_many
from drift.models import get_model_info, model_module, model_modules
from drift.models.checkpoints import checkpoint_path, list_checkpoints, load_checkpoint
from drift.models.slice_data import SliceData
from drift.protocol.matrix import drift_matrix, scored_cells, to_json
from drift.protocol.metrics import binary_auc
from drift.protocol.tasks import Task, sigmoid32
from drift.store.cells import (
    CHECKPOINT_KEYS,
    CorruptTally,
    ResultCache,
    cell_key,
    code_version,
    file_digest,
    rows_digest,
)

Rows = list[list[float | None]]  # a drift matrix as JSON rows (drift.protocol.matrix.to_json)
Cells = dict[tuple[int, int], float | None]  # {(i, j): a cell's score, None where the metric cannot score it}


class CellTally(TypedDict):
    computed: int
    reused: int


class SeedCounts(TypedDict):
    """One (model, seed) task's counts (evaluate_seed)."""

    computed: int
    reused: int
    estimates: CellTally
    corrupt: list[str]
    seconds: float


class SeedClasses(TypedDict):
    """One (model, seed) task's per-class results: `scores` one K x K matrix per class as JSON rows; `cell`
    the cell [i, j] of `confusion` (its counts), both None when no cell is scored."""

    scores: list[Rows]
    cell: list[int] | None
    confusion: list[list[int]] | None


class RosterCounts(TypedDict):
    """evaluate_roster's counts, what the evaluate stage records (drift.evaluate.eval_result.EvaluateRun); the
    executor and its workers are added once every task returned."""

    computed: int
    reused: int
    estimates: CellTally
    recomputed: CorruptTally
    executor: NotRequired[str]
    workers: NotRequired[int]


class EvaluatedRoster(NamedTuple):
    """What evaluate_roster returns: each model's evaluation, the counts, and the damaged cache files it found
    (printed, not recorded)."""

    results: dict[str, EvalResult]
    counts: RosterCounts
    corrupt: list[str]


class Evaluation(TypedDict):
    """One model's evaluation as EvalResult parses it (drift/evaluate/eval_result.py)."""

    dataset: str
    model: str
    family: str
    metric: str
    higher_is_better: bool
    labels: list[str]
    usable: list[bool]
    seeds: dict[str, Rows]
    estimated: dict[str, dict[str, Rows]]
    also: NotRequired[dict[str, dict[str, Rows]]]
    per_class: NotRequired[dict]


def class_levels(data) -> tuple[np.ndarray, list[str]] | None:
    """(the classes a cell is scored per, their names): the class ids 0..C-1 or label columns with the slice
    manifest's label names (their indices where it has none for each), or for regression every rating the
    table holds, named by its value ("4", "4.5"); None for a regression target of more than MAX_RATINGS
    values."""
    if data.task.name == "regression":
        levels = np.unique(np.asarray(data.labels, dtype=np.float64))
        return (levels, [f"{v:g}" for v in levels]) if len(levels) <= MAX_RATINGS else None
    names = list(data.manifest.label_names)
    n = data.n_outputs
    return np.arange(n), names if len(names) == n else [str(c) for c in range(n)]


def class_scores(task: Task, y, outputs, levels: np.ndarray) -> list[float | None]:
    """One cell's score per class of `levels`, None where the cell cannot score it: binary and multiclass the
    recall of each class (the share of its rows predicted as it; None: no row of it), multilabel each label's
    ROC AUC of what macro AUC ranks (None: all its rows alike; the cell's macro AUC is their mean), regression
    the MSE of each rating's rows (None: no row of it; the cell's balanced MSE is their mean)."""
    y, outputs = np.asarray(y), np.asarray(outputs)
    if task.name == "multilabel":
        ranked = sigmoid32(outputs) if task.auc_scores == "sigmoid32" else outputs
        ranked = np.asarray(ranked).reshape(y.shape)
        return [binary_auc(y[:, c], ranked[:, c]) for c in levels]
    if task.name == "regression":
        y, pred = y.astype(np.float64).reshape(-1), outputs.astype(np.float64).reshape(-1)
        return [float(np.mean((pred[y == r] - r) ** 2)) if (y == r).any() else None for r in levels]
    y = y.reshape(-1)
    pred = outputs.reshape(len(y), -1).argmax(axis=1)
    return [float(np.mean(pred[y == c] == c)) if (y == c).any() else None for c in levels]


def confusion_counts(task: Task, y, outputs, levels: np.ndarray) -> list[list[int]]:
    """One cell's counts: binary and multiclass [true class][predicted class] (the argmax); regression [true
    rating][the rating nearest the prediction, a tie to the lower]; multilabel one row per label, [tn, fp, fn,
    tp] with a label predicted where its logit is above 0."""
    y, outputs = np.asarray(y), np.asarray(outputs, dtype=np.float64)
    if task.name == "multilabel":
        truth, said = y.reshape(len(y), -1) != 0, outputs.reshape(len(y), -1) > 0
        return [
            [int(np.sum(~t & ~p)), int(np.sum(~t & p)), int(np.sum(t & ~p)), int(np.sum(t & p))]
            for t, p in zip(truth.T, said.T)
        ]
    if task.name == "regression":
        truth = np.searchsorted(levels, y.astype(np.float64).reshape(-1))
        said = np.abs(outputs.reshape(-1, 1) - levels.reshape(1, -1)).argmin(axis=1)
    else:
        truth, said = y.reshape(-1).astype(np.int64), outputs.reshape(len(y), -1).argmax(axis=1)
    counts = np.zeros((len(levels), len(levels)), dtype=np.int64)
    np.add.at(counts, (truth, said), 1)
    return counts.tolist()


def class_entries(task: Task, names: list[str]) -> tuple[str, str]:
    """What the cell cache calls a cell's per-class scores and its confusion counts: with the scoring rule
    (Task.cached_as), and for regression the table's ratings (a new rating changes every cell's list)."""
    ratings = f"/{','.join(names)}" if task.name == "regression" else ""
    return task.cached_as("per_class") + ratings, "confusion" + ratings


def confusion_cell(job: EvalJob) -> tuple[int, int] | None:
    """The cell whose confusion counts are kept: the last cutoff on the last usable slice it scores (its
    test rows when that is its own slice), None when it scores none."""
    data = job.data
    if not job.checkpoints or class_levels(data) is None:
        return None
    i = max(job.checkpoints)
    scored = [j for j, _ in scored_cells(i, data.usable, data.slices, data.splits)]
    return (i, scored[-1]) if scored else None


@dataclass
class KnownClasses:
    """What the cache holds of the per-class results: {(i, j): one score per class} and the confusion counts
    of `cell` (None: not cached, or no cell)."""

    scores: dict[tuple[int, int], list] = field(default_factory=dict)
    cell: tuple[int, int] | None = None
    confusion: list | None = None


@dataclass
class EvalJob:
    """One task of the evaluation: every cell of one (model, seed), from its checkpoints {cutoff: path}, or
    {cutoff: cache key or bytes} (`from_cache`: for a worker that shares no filesystem with the stage, which
    reads them from the checkpoint cache), scored under `rules` (params.yaml `evaluate:`). SliceData travels
    as its recipe or shipped (drift/models/slice_data.py)."""

    data: SliceData
    name: str
    seed: int
    checkpoints: dict[int, Path] | dict[int, str | bytes]
    cache_root: Path
    threads: int
    code: (
        str  # drift.store.cells.code_version("evaluate", its model's module), computed where the checkout is
    )
    from_cache: bool = False
    rules: EvaluateParams = field(default_factory=EvaluateParams)

    @property
    def task(self) -> Task:
        """The dataset's task scoring under `rules`."""
        return self.data.task.scoring(self.rules.empty_cell, self.rules.auc_scores)


@dataclass
class CutoffPlan:
    """What cutoff i still needs: its cells {j: key} and estimate cells {j: key} missing from the cache, its
    calibration (cached or not) and the slices its checkpoint must predict."""

    path: Path
    checkpoint: str
    missing: dict[int, str] = field(default_factory=dict)
    missing_estimates: dict[int, str] = field(default_factory=dict)
    # {(metric, j): key} of the task's `also` metrics
    missing_also: dict[tuple[str, int], str] = field(default_factory=dict)
    missing_classes: dict[int, str] = field(default_factory=dict)  # {j: key} of the per-class scores
    missing_confusion: tuple[int, str] | None = None  # (j, key) of the confusion counts
    calibration_key: str = ""
    calibration: dict | None = None  # drift.evaluate.estimate.calibrate's
    has_calibration: bool = False
    needed: set[int] = field(default_factory=set)


def look_up(
    job: EvalJob, cache: ResultCache, methods
) -> tuple[
    Cells, dict[tuple[int, int], dict[str, float]], dict[int, CutoffPlan], dict[str, Cells], KnownClasses
]:
    """(cells the cache holds {(i, j): value}, estimates it holds {(i, j): {method: value}}, {i: CutoffPlan}
    of the cutoffs with anything missing, the `also` metrics' cells it holds {metric: {(i, j): value}}, the
    per-class results it holds). A cell's key: the checkpoint's bytes, the cell's rows, the metric (with its
    scoring rule, Task.cached_as), the code; an estimate's adds the cutoff's source rows."""

    data, code, task = job.data, job.code, job.task
    hashes = data.row_hashes
    known: Cells = {}
    known_estimates: dict[tuple[int, int], dict[str, float]] = {}
    plans: dict[int, CutoffPlan] = {}
    known_also: dict[str, Cells] = {metric: {} for metric in data.task.also}
    known_classes = KnownClasses(cell=confusion_cell(job))
    classes = class_levels(data)
    per_class, confusion = class_entries(task, classes[1]) if classes else ("", "")
    for i, path in job.checkpoints.items():
        assert isinstance(path, Path), "a job from the cache has its checkpoints placed as files first"
        plan = CutoffPlan(path, file_digest(path))
        source = source_rows(i, data.slices, data.splits, data.usable)
        source_digest = rows_digest(hashes, source)
        for j, rows in scored_cells(i, data.usable, data.slices, data.splits):
            digest = rows_digest(hashes, rows)
            found, value = cache.cell(
                plan.checkpoint, key := cell_key(plan.checkpoint, digest, task.cached_as(task.metric), code)
            )
            if found:
                known[i, j] = value
            else:
                plan.missing[j] = key
            for metric in data.task.also:
                found, value = cache.cell(
                    plan.checkpoint, key := cell_key(plan.checkpoint, digest, task.cached_as(metric), code)
                )
                if found:
                    known_also[metric][i, j] = value
                else:
                    plan.missing_also[metric, j] = key
            if classes is not None:
                found, value = cache.cell(
                    plan.checkpoint, key := cell_key(plan.checkpoint, digest, per_class, code)
                )
                if found:
                    known_classes.scores[i, j] = value
                else:
                    plan.missing_classes[j] = key
            if (i, j) == known_classes.cell:  # None when there are no classes
                found, value = cache.cell(
                    plan.checkpoint, key := cell_key(plan.checkpoint, digest, confusion, code)
                )
                if found:
                    known_classes.confusion = value
                else:
                    plan.missing_confusion = (j, key)
            if methods:
                found, values = cache.cell(
                    plan.checkpoint,
                    key := cell_key(
                        plan.checkpoint, digest + source_digest, task.cached_as("estimates"), code
                    ),
                )
                if found:
                    known_estimates[i, j] = values or {}
                else:
                    plan.missing_estimates[j] = key
        if not (
            plan.missing
            or plan.missing_estimates
            or plan.missing_also
            or plan.missing_classes
            or plan.missing_confusion
        ):
            continue
        plan.calibration_key = cell_key(plan.checkpoint, source_digest, task.cached_as("calibration"), code)
        plan.has_calibration, plan.calibration = cache.cell(plan.checkpoint, plan.calibration_key)
        plan.needed = set(plan.missing) | set(plan.missing_estimates) | {j for _, j in plan.missing_also}
        plan.needed |= set(plan.missing_classes) | (
            {plan.missing_confusion[0]} if plan.missing_confusion else set()
        )
        if plan.missing_estimates and not plan.has_calibration:
            plan.needed |= {int(j) for j in np.unique(data.slices[source])}
        plans[i] = plan
    return known, known_estimates, plans, known_also, known_classes


def predict_needed(job: EvalJob, plans: dict[int, CutoffPlan]) -> dict[int, np.ndarray | None]:
    """{cutoff: outputs over every row of the slice table} filled on the slices its plan needs (None for a
    cutoff the cache answers whole). Every checkpoint that needs slice j runs over it together: each batch is
    read once, in the same batches whatever else is missing, so a cell's value does not depend on what was
    cached."""

    data = job.data
    inputs = data.inputs(job.name)
    models = {
        i: load_checkpoint(job.name, inputs.spec(), data.n_outputs, data.task.name, plan.path)
        for i, plan in plans.items()
    }
    outputs: dict[int, np.ndarray | None] = {i: None for i in job.checkpoints}
    filled = {i: np.zeros((len(data.labels), data.n_outputs), np.float32) for i in plans}
    outputs.update(filled)
    for j in sorted(set().union(*(plan.needed for plan in plans.values()))):
        rows = np.flatnonzero(data.slices == j)
        group = [i for i, plan in plans.items() if j in plan.needed]
        for i, predicted in zip(group, predict_many([models[i] for i in group], inputs, rows)):
            filled[i][rows] = predicted
    return outputs


def evaluate_seed(job: EvalJob) -> tuple[Rows, dict[str, Rows], SeedCounts, dict[str, Rows]]:
    """The drift matrix of one model and seed as JSON rows, the label-free estimates of the same cells
    {method: JSON rows} (drift/evaluate/estimate.py; none for regression), the counts {computed, reused,
    estimates, seconds: the task's, where it ran}, and the task's `also` metrics' matrices {metric: JSON rows}
    (multiclass: macro_f1). Cached cells are read, the rest predicted and scored by the protocol's
    drift_matrix, then stored (atomically); the same values in the stage's process or in a Ray worker."""
    return evaluate_seed_by_class(job)[:4]


def evaluate_seed_by_class(
    job: EvalJob,
) -> tuple[Rows, dict[str, Rows], SeedCounts, dict[str, Rows], SeedClasses]:
    """evaluate_seed's four parts and the per-class results of the same cells (SeedClasses: each class's score
    of every cell, the confusion counts of confusion_cell), cached and read back alike."""

    started = time.perf_counter()
    if job.from_cache:
        with tempfile.TemporaryDirectory(prefix="drift-checkpoints-") as tmp:
            cache = ResultCache(job.cache_root)
            paths: dict[int, Path] = {}
            for i, shipped in job.checkpoints.items():  # under its name in data/models/
                paths[i] = checkpoint_path(Path(tmp), job.name, job.seed, i)
                if isinstance(shipped, bytes):
                    paths[i].parent.mkdir(parents=True, exist_ok=True)
                    paths[i].write_bytes(shipped)
                else:
                    assert isinstance(shipped, str), "a job from the cache holds cache keys or bytes"
                    cache.place(shipped, paths[i])  # verified by its checksum
            out = evaluate_seed_by_class(replace(job, checkpoints=paths, from_cache=False))
            out[2]["seconds"] = time.perf_counter() - started
            return out
    data, task = job.data, job.task
    deterministic(job.threads)
    cache = ResultCache(job.cache_root)
    methods = METHODS[task.name]
    labels = np.array(data.labels)
    trainable = [s.trainable for s in data.manifest.slices]
    known, known_estimates, plans, known_also, known_classes = look_up(job, cache, methods)
    outputs: dict[int, np.ndarray | None] = (
        predict_needed(job, plans) if plans else {i: None for i in job.checkpoints}
    )
    matrix = drift_matrix(
        outputs, labels, data.slices, data.splits, data.usable, task, known=known, trainable=trainable
    )
    also: dict[str, np.ndarray] = {}
    for metric in task.also:  # the same cells scored by another metric (multiclass: macro-F1)
        scorer = replace(task, metric=metric)
        also[metric] = drift_matrix(
            outputs,
            labels,
            data.slices,
            data.splits,
            data.usable,
            scorer,
            known=known_also[metric],
            trainable=trainable,
        )
        for i, plan in plans.items():
            for (m, j), key in plan.missing_also.items():
                if m == metric:
                    cache.put_cell(
                        plan.checkpoint,
                        key,
                        None if np.isnan(also[metric][i, j]) else float(also[metric][i, j]),
                    )
    seed_classes = classes_of_cells(job, outputs, labels, known_classes)
    for i, plan in plans.items():
        for j, key in plan.missing_classes.items():
            cache.put_cell(plan.checkpoint, key, seed_classes["cells"][i, j])
        if plan.missing_confusion:
            cache.put_cell(plan.checkpoint, plan.missing_confusion[1], seed_classes["confusion"])
    calibrations: dict[int, dict | None] = {}
    for i, plan in plans.items():
        for j, key in plan.missing.items():
            cache.put_cell(plan.checkpoint, key, None if np.isnan(matrix[i, j]) else float(matrix[i, j]))
        if plan.missing_estimates and not plan.has_calibration:
            source = source_rows(i, data.slices, data.splits, data.usable)
            predicted = outputs[i]
            assert predicted is not None, (
                f"cutoff {i} has cells to compute: predict_needed filled its outputs"
            )
            plan.calibration = calibrate(task, predicted[source], labels[source])
            cache.put_cell(plan.checkpoint, plan.calibration_key, plan.calibration)
        calibrations[i] = plan.calibration
    estimated = estimated_matrix(
        outputs,
        labels,
        data.slices,
        data.splits,
        data.usable,
        task,
        known=known_estimates,
        calibrations=calibrations,
    )
    for i, plan in plans.items():
        for j, key in plan.missing_estimates.items():
            cache.put_cell(
                plan.checkpoint,
                key,
                {m: float(estimated[m][i, j]) for m in methods if not np.isnan(estimated[m][i, j])},
            )
    cache.sync()
    n_estimates = sum(len(plan.missing_estimates) for plan in plans.values())
    counts: SeedCounts = {
        "computed": sum(len(plan.missing) for plan in plans.values()),
        "reused": len(known),
        "estimates": {"computed": n_estimates, "reused": len(known_estimates)},
        "corrupt": cache.corrupt,
        "seconds": time.perf_counter() - started,
    }
    also_json = {m: to_json(v) for m, v in also.items()}
    by_class: SeedClasses = {
        "scores": [to_json(m) for m in seed_classes["matrices"]],
        "cell": list(known_classes.cell) if known_classes.cell else None,
        "confusion": seed_classes["confusion"],
    }
    return to_json(matrix), {m: to_json(estimated[m]) for m in methods}, counts, also_json, by_class


def classes_of_cells(
    job: EvalJob, outputs: dict[int, np.ndarray | None], labels: np.ndarray, known: KnownClasses
) -> dict:
    """The per-class results of every cell the drift matrix scores: {"cells": {(i, j): one score per class,
    None where it cannot score the class}, "matrices": [C, K, K] (NaN for None), "confusion": the counts of
    known.cell}, each from the cache where `known` holds it, else from `outputs` (filled on its rows)."""
    data, task = job.data, job.task
    classes = class_levels(data)
    k = len(data.usable)
    if classes is None:
        return {"cells": {}, "matrices": np.full((0, k, k), np.nan), "confusion": None}
    levels = classes[0]
    cells: dict[tuple[int, int], list] = {}
    matrices = np.full((len(levels), k, k), np.nan)
    confusion = known.confusion
    for i, predicted in outputs.items():
        for j, rows in scored_cells(i, data.usable, data.slices, data.splits):
            if (i, j) in known.scores:
                cells[i, j] = known.scores[i, j]
            else:
                assert predicted is not None, f"cell ({i}, {j}) is not cached: outputs[{i}] holds its rows"
                cells[i, j] = class_scores(task, labels[rows], predicted[rows], levels)
            matrices[:, i, j] = [np.nan if v is None else v for v in cells[i, j]]
            if (i, j) == known.cell and confusion is None:
                assert predicted is not None, (
                    f"cell ({i}, {j})'s counts are not cached: outputs[{i}] holds them"
                )
                confusion = confusion_counts(task, labels[rows], predicted[rows], levels)
    return {"cells": cells, "matrices": matrices, "confusion": confusion}


def shipped_checkpoint(path: Path, key: str | None, cache: ResultCache) -> str | bytes:
    """What a worker that shares no filesystem with the stage gets of a checkpoint: its cache key, or its
    bytes when the cache lacks it (checkpoints pulled by DVC into a workspace whose store never held them) or
    holds another format's entry, or one written for another key, there."""
    if key is not None and cache.checkpoint_digest(key) is not None:
        return key
    return path.read_bytes()


# on_evaluated(model, seed, [cutoff of each checkpoint evaluated], seconds): one call per evaluation task
OnEvaluated = Callable[[str, int, list[int], float], None]


def evaluate_roster(
    data: SliceData,
    models: list[str],
    models_dir: Path,
    threads: int = 1,
    cache=None,
    compute: ComputeParams | None = None,
    on_evaluated: OnEvaluated | None = None,
    rules: EvaluateParams | None = None,
) -> EvaluatedRoster:
    """Each model's evaluation, the counts and the damaged cache files (EvaluatedRoster): per-seed drift
    matrices with what a reader needs to interpret them (metric, direction, slice labels, which slices are
    usable), their label-free estimates and their per-class scores (`per_class`: the cells scored per class,
    one cell's confusion counts). One task per (model, seed) on the `compute` executor
    (drift/core/executor.py); counts: cells {computed, reused}, estimates alike, recomputed {corrupt} (cached
    cells that failed their checksum, listed in `corrupt`), and the executor and its workers. `on_evaluated`
    (the stage's timings) hears of each task as it returns: its model, seed, cutoffs and seconds; it changes
    no value. `rules` (params.yaml `evaluate:`): how each cell is scored."""

    deterministic(threads)
    compute = compute or ComputeParams()
    rules = rules or EvaluateParams()
    cache = cache or ResultCache(Path(tempfile.mkdtemp(prefix="drift-cells-")))
    models_dir = Path(models_dir).resolve()
    labels = data.manifest.labels()
    shipped = ships_inputs(compute, cache.root)  # workers that see only the store: checkpoints by cache key
    listing = models_dir / CHECKPOINT_KEYS
    keys = json.loads(listing.read_text()) if shipped and listing.exists() else {}
    jobs: list[EvalJob] = []
    for name in models:
        code = code_version(
            "evaluate", model_module(name), model_modules()
        )  # its own head's module, not the others'
        data.inputs(name)  # builds the feature files here, before any task reads them
        for seed, files in list_checkpoints(models_dir, name).items():
            checkpoints: dict[int, Path] | dict[int, str | bytes] = files
            if shipped:
                checkpoints = {
                    i: shipped_checkpoint(path, keys.get(str(path.relative_to(models_dir))), cache)
                    for i, path in files.items()
                }
            jobs.append(
                EvalJob(
                    data,
                    name,
                    seed,
                    checkpoints,
                    location(cache.root).resolve(),
                    threads,
                    code,
                    from_cache=shipped,
                    rules=rules,
                )
            )
    if jobs:
        cache.root.mkdir(parents=True, exist_ok=True)
        if shipped:
            check_reachable([cache.root], compute)
            data.ship()
        else:
            check_reachable([cache.root, models_dir, data.paths["slices"], data.paths["features"]], compute)
    counts: RosterCounts = {
        "computed": 0,
        "reused": 0,
        "estimates": {"computed": 0, "reused": 0},
        "recomputed": {"corrupt": 0},
    }
    corrupt: list[str] = []
    results: dict[str, Evaluation] = {
        name: {
            "dataset": data.name,
            "model": name,
            "family": get_model_info(name).family,
            "metric": data.task.metric,
            "higher_is_better": data.task.higher_is_better,
            "labels": labels,
            "usable": data.usable,
            "seeds": {},
            "estimated": {m: {} for m in METHODS[data.task.name]},
        }
        for name in models
    }
    for result in results.values() if data.task.also else ():
        result["also"] = {metric: {} for metric in data.task.also}  # {metric: {seed: matrix}}
    classes = class_levels(data)
    if classes is not None:  # {metric, classes, seeds: {seed: a matrix per class}}, and the confusion counts
        for result in results.values():
            result["per_class"] = {
                "metric": CLASS_METRICS[data.task.name],
                "classes": classes[1],
                "seeds": {},
            }
    with progress(f"evaluate {data.name}: (model, seed) matrices", total=len(jobs)) as bar:
        tasks = run_tasks(evaluate_seed_by_class, jobs, compute)
        for job, (matrix, estimated, done, also, by_class) in zip(jobs, tasks):
            result = results[job.name]
            result["seeds"][str(job.seed)] = matrix
            if "per_class" in result:
                result["per_class"]["seeds"][str(job.seed)] = by_class["scores"]
                if by_class["confusion"] is not None:  # the same cell for every seed: the last cutoff's
                    result["per_class"]["cell"] = by_class["cell"]
                    result["per_class"].setdefault("confusion", {})[str(job.seed)] = by_class["confusion"]
            for metric, rows in also.items():
                result["also"][metric][str(job.seed)] = rows
            for method, rows in estimated.items():
                result["estimated"][method][str(job.seed)] = rows
            for key in ("computed", "reused"):
                counts[key] += done[key]
                counts["estimates"][key] += done["estimates"][key]
            corrupt += done["corrupt"]
            counts["recomputed"]["corrupt"] += len(done["corrupt"])
            if on_evaluated is not None:
                on_evaluated(job.name, job.seed, sorted(job.checkpoints), done["seconds"])
            bar.advance()
    counts["executor"] = compute.executor
    counts["workers"] = workers(compute) if jobs else 0
    parsed = {
        name: EvalResult.parse(r, f"the evaluation of {name}", data.name) for name, r in results.items()
    }
    return EvaluatedRoster(parsed, counts, corrupt)

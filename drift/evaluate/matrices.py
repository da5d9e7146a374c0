"""The temporal drift matrix (paper Sections 4.1 and 4.2).

M[i][j] = perf(f_i, D_j): for j <= i on the held-out test split of slice j (those periods were trained on),
for j > i on all of slice j (unseen by construction). Rows and columns of slices too small to score
(`usable: false`) stay empty, and so does any cell the metric cannot score: null, never zero.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from drift.protocol.slicing import scored_cells


def drift_matrix(outputs: dict[int, np.ndarray], labels: np.ndarray, slices: np.ndarray, splits: np.ndarray,
                 usable: list[bool], task) -> np.ndarray:
    """K x K matrix (nan = empty) from each cutoff's raw outputs over all rows of the slice table.

    outputs[i] holds f_i's outputs for every row (row order of the slice table)."""
    k = len(usable)
    matrix = np.full((k, k), np.nan)
    for i, out in outputs.items():  # every trained cutoff has a row, even one whose slice has no test rows
        for j, rows in scored_cells(i, usable, slices, splits):
            value = task.score(labels[rows], out[rows])
            if value is not None:
                matrix[i, j] = value
    return matrix


def to_json(matrix: np.ndarray) -> list[list[float | None]]:
    return [[None if np.isnan(v) else round(float(v), 6) for v in row] for row in matrix]


def from_json(rows: list[list[float | None]]) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=float)


@dataclass
class EvalJob:
    """One task of the evaluation: every cell of one (model, seed), from its checkpoints {cutoff: path}.
    SliceData travels as its recipe (params, dataset, repository) and is rebuilt by the worker."""
    data: object
    name: str
    seed: int
    checkpoints: dict[int, Path]
    cache_root: Path
    threads: int
    code: str  # drift.store.cells.code_version("evaluate"), computed where the checkout is


def evaluate_seed(job: EvalJob) -> tuple[list, dict, dict]:
    """The drift matrix of one model and seed as JSON rows, the label-free estimates of the same cells
    {method: JSON rows} (drift/evaluate/estimate.py; none for regression), and the counts {computed, reused, estimates}.

    A cell whose key (drift/store/cells.py: the checkpoint's bytes, the cell's rows, the metric, the code) is in the
    cache is read from it; the others are computed and stored (atomically), estimates alike (their key adds the
    cutoff's source rows, and each cutoff's calibration is cached too). A checkpoint predicts each slice it still
    needs as a whole, in the same batches whatever else is missing (every checkpoint needing a slice runs over it
    together, each batch read once), so a cell has the same value whether it was computed with its row, its column
    or the whole matrix, in the stage's process or in a Ray worker."""
    from drift.evaluate.estimate import METHODS, calibrate, estimate_cell, source_rows
    from drift.models.checkpoints import (
        load_checkpoint,  # torch: the report reads from_json without it
    )
    from drift.store.cells import (
        CellCache,
        cell_key,
        file_digest,
        rows_digest,
    )
    from drift.train.loop import deterministic, predict_many

    data, name = job.data, job.name
    deterministic(job.threads)
    cache = CellCache(job.cache_root)
    counts = {"computed": 0, "reused": 0, "estimates": {"computed": 0, "reused": 0}}
    estimate_counts = counts["estimates"]
    labels = np.array(data.labels)
    inputs, task, hashes = data.inputs(name), data.task, data.row_hashes
    methods = METHODS[task.name]
    code = job.code
    k = len(data.usable)
    in_slice = [np.flatnonzero(data.slices == j) for j in range(k)]
    matrix = np.full((k, k), np.nan)
    estimated = {m: np.full((k, k), np.nan) for m in methods}
    plans = {}  # cutoff -> what is missing and which slices its checkpoint must predict
    for i, path in job.checkpoints.items():  # every trained cutoff has a row, even one whose slice has no test rows
        checkpoint = file_digest(path)
        source = source_rows(i, data.slices, data.splits, data.usable)
        source_digest = rows_digest(hashes, source)
        missing, missing_estimates = [], []
        for j, rows in scored_cells(i, data.usable, data.slices, data.splits):
            digest = rows_digest(hashes, rows)
            found, value = cache.cell(key := cell_key(checkpoint, digest, task.metric, code))
            if found:
                counts["reused"] += 1
                matrix[i, j] = np.nan if value is None else value
            else:
                missing.append((j, rows, key))
            if not methods:
                continue
            found, values = cache.cell(key := cell_key(checkpoint, digest + source_digest, "estimates", code))
            if found:
                estimate_counts["reused"] += 1
                for method, value in (values or {}).items():
                    estimated[method][i, j] = value
            else:
                missing_estimates.append((j, rows, key))
        if not missing and not missing_estimates:
            continue
        calibration_key = cell_key(checkpoint, source_digest, "calibration", code)
        has_calibration, calibration = cache.cell(calibration_key)
        needed = {j for j, _, _ in missing + missing_estimates}
        if missing_estimates and not has_calibration:
            needed |= {int(j) for j in np.unique(data.slices[source])}
        plans[i] = dict(path=path, source=source, missing=missing, missing_estimates=missing_estimates,
                        calibration_key=calibration_key, calibration=calibration, has_calibration=has_calibration,
                        needed=needed)
    # every checkpoint that needs slice j runs over it together: each batch is read once for all of them
    models = {i: load_checkpoint(name, inputs.spec(), data.n_outputs, task.name, plan["path"])
              for i, plan in plans.items()}
    out = {i: np.zeros((len(labels), data.n_outputs), np.float32) for i in plans}
    for j in sorted(set().union(*(plan["needed"] for plan in plans.values()))):
        group = [i for i, plan in plans.items() if j in plan["needed"]]
        for i, predicted in zip(group, predict_many([models[i] for i in group], inputs, in_slice[j])):
            out[i][in_slice[j]] = predicted
    for i, plan in plans.items():
        for j, rows, key in plan["missing"]:
            value = task.score(labels[rows], out[i][rows])
            cache.put_cell(key, None if value is None else float(value))
            counts["computed"] += 1
            matrix[i, j] = np.nan if value is None else value
        calibration = plan["calibration"]
        if plan["missing_estimates"] and not plan["has_calibration"]:
            source = plan["source"]
            calibration = calibrate(task, out[i][source], labels[source])
            cache.put_cell(plan["calibration_key"], calibration)
        for j, rows, key in plan["missing_estimates"]:
            values = estimate_cell(task, calibration, out[i][rows]) if calibration is not None else {}
            cache.put_cell(key, values)
            estimate_counts["computed"] += 1
            for method, value in values.items():
                estimated[method][i, j] = value
    return to_json(matrix), {m: to_json(estimated[m]) for m in methods}, counts


def evaluate_roster(data, models: list[str], models_dir, threads: int = 1, cache=None,
                    compute=None) -> tuple[dict, dict]:
    """({model: its evaluation}, counts): per-seed drift matrices with what a reader needs to interpret them
    (metric, direction, slice labels, which slices are usable), and their label-free estimates. One task per
    (model, seed) on the `compute` executor (drift/core/executor.py); counts: cells {computed, reused}, estimates
    alike, and the executor and its workers."""
    from drift.core.executor import check_reachable, run_tasks, workers
    from drift.core.params import ComputeParams
    from drift.evaluate.estimate import METHODS
    from drift.models import get_model_info
    from drift.models.checkpoints import list_checkpoints
    from drift.store.cells import CellCache, code_version
    from drift.train.loop import deterministic

    deterministic(threads)
    compute = ComputeParams.of(compute or {})
    cache = cache or CellCache(Path(tempfile.mkdtemp(prefix="drift-cells-")))
    models_dir = Path(models_dir).resolve()
    labels = [s["label"] for s in data.manifest["slices"]]
    jobs, code = [], code_version("evaluate")
    for name in models:
        data.inputs(name)  # builds the feature files here, before any task reads them
        for seed, checkpoints in list_checkpoints(models_dir, name).items():
            jobs.append(EvalJob(data, name, seed, checkpoints, Path(cache.root).resolve(), threads, code))
    if jobs:
        cache.root.mkdir(parents=True, exist_ok=True)
        check_reachable([cache.root, models_dir, data.paths["slices"], data.paths["features"]], compute)
    counts = {"computed": 0, "reused": 0, "estimates": {"computed": 0, "reused": 0}}
    results = {name: {"dataset": data.name, "model": name, "family": get_model_info(name).family,
                      "metric": data.task.metric, "higher_is_better": data.task.higher_is_better,
                      "labels": labels, "usable": data.usable, "seeds": {},
                      "estimated": {m: {} for m in METHODS[data.task.name]}} for name in models}
    for job, (matrix, estimated, done) in zip(jobs, run_tasks(evaluate_seed, jobs, compute)):
        result = results[job.name]
        result["seeds"][str(job.seed)] = matrix
        for method, rows in estimated.items():
            result["estimated"][method][str(job.seed)] = rows
        for key in ("computed", "reused"):
            counts[key] += done[key]
            counts["estimates"][key] += done["estimates"][key]
    counts.update(executor=compute.executor, workers=workers(compute) if jobs else 0)
    return results, counts

"""The temporal drift matrix (paper Sections 4.1 and 4.2).

M[i][j] = perf(f_i, D_j): for j <= i on the held-out test split of slice j (those periods were trained on),
for j > i on all of slice j (unseen by construction). Rows and columns of slices too small to score
(`usable: false`) stay empty, and so does any cell the metric cannot score: null, never zero.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np


def eval_rows(i: int, j: int, slices: np.ndarray, splits: np.ndarray) -> np.ndarray:
    """Rows that cell (i, j) is scored on."""
    in_slice = slices == j
    return np.flatnonzero(in_slice & (splits == "test")) if j <= i else np.flatnonzero(in_slice)


def drift_matrix(outputs: dict[int, np.ndarray], labels: np.ndarray, slices: np.ndarray, splits: np.ndarray,
                 usable: list[bool], task) -> np.ndarray:
    """K x K matrix (nan = empty) from each cutoff's raw outputs over all rows of the slice table.

    outputs[i] holds f_i's outputs for every row (row order of the slice table)."""
    k = len(usable)
    matrix = np.full((k, k), np.nan)
    for i, out in outputs.items():  # every trained cutoff has a row, even one whose slice has no test rows
        for j in range(k):
            if not usable[j]:
                continue
            rows = eval_rows(i, j, slices, splits)
            if len(rows):
                value = task.score(labels[rows], out[rows])
                if value is not None:
                    matrix[i, j] = value
    return matrix


def to_json(matrix: np.ndarray) -> list[list[float | None]]:
    return [[None if np.isnan(v) else round(float(v), 6) for v in row] for row in matrix]


def from_json(rows: list[list[float | None]]) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=float)


def evaluate_model(data, name: str, models_dir, cache=None, counts: dict | None = None) -> dict:
    """Every checkpoint of one model on every cell it is scored on -> {seed: matrix as JSON rows}.

    A cell whose key (drift/cells.py: the checkpoint's bytes, the cell's rows, the metric, the code) is in `cache`
    is read from it; the others are computed and stored. A checkpoint predicts each slice it still needs as a whole,
    in the same batches whatever else is missing, so a cell has the same value whether it was computed with its
    row, its column or the whole matrix. `counts` gains {computed, reused}."""
    from drift.cells import EVAL_CODE, CellCache, cell_key, code_version, file_digest, rows_digest
    from drift.checkpoints import list_checkpoints, load_checkpoint  # torch: the report reads from_json without it
    from drift.train import predict

    cache = cache or CellCache(Path(tempfile.mkdtemp(prefix="drift-cells-")))
    counts = counts if counts is not None else {}
    counts.setdefault("computed", 0)
    counts.setdefault("reused", 0)
    labels = np.array(data.labels)
    inputs = data.inputs(name)
    code = code_version(EVAL_CODE)
    k = len(data.usable)
    in_slice = [np.flatnonzero(data.slices == j) for j in range(k)]
    seeds = {}
    for seed, checkpoints in list_checkpoints(models_dir, name).items():
        matrix = np.full((k, k), np.nan)
        for i, path in checkpoints.items():  # every trained cutoff has a row, even one whose slice has no test rows
            checkpoint = file_digest(path)
            missing = []
            for j in range(k):
                if not data.usable[j]:
                    continue
                rows = eval_rows(i, j, data.slices, data.splits)
                if not len(rows):
                    continue
                key = cell_key(checkpoint, rows_digest(data.row_hashes, rows), data.task.metric, code)
                found, value = cache.cell(key)
                if found:
                    counts["reused"] += 1
                    matrix[i, j] = np.nan if value is None else value
                else:
                    missing.append((j, rows, key))
            if missing:
                model = load_checkpoint(name, inputs.spec(), data.n_outputs, data.task.name, path)
                for j, rows, key in missing:
                    out = np.zeros((len(labels), data.n_outputs), np.float32)
                    out[in_slice[j]] = predict(model, inputs, in_slice[j])
                    value = data.task.score(labels[rows], out[rows])
                    cache.put_cell(key, None if value is None else float(value))
                    counts["computed"] += 1
                    matrix[i, j] = np.nan if value is None else value
        seeds[str(seed)] = to_json(matrix)
    return seeds


def evaluate_roster(data, models: list[str], models_dir, threads: int = 1, cache=None) -> tuple[dict, dict]:
    """({model: its evaluation}, {computed, reused} cells): per-seed drift matrices with what a reader needs to
    interpret them (metric, direction, slice labels, which slices are usable)."""
    from drift.models import get_model_info
    from drift.train import deterministic

    deterministic(threads)
    labels = [s["label"] for s in data.manifest["slices"]]
    counts = {"computed": 0, "reused": 0}
    results = {name: {"dataset": data.name, "model": name, "family": get_model_info(name).family,
                      "metric": data.task.metric, "higher_is_better": data.task.higher_is_better,
                      "labels": labels, "usable": data.usable,
                      "seeds": evaluate_model(data, name, models_dir, cache, counts)}
               for name in models}
    return results, counts

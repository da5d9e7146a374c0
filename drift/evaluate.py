"""The temporal drift matrix (paper Sections 4.1 and 4.2).

M[i][j] = perf(f_i, D_j): for j <= i on the held-out test split of slice j (those periods were trained on),
for j > i on all of slice j (unseen by construction). Rows and columns of slices too small to score
(`usable: false`) stay empty, and so does any cell the metric cannot score: null, never zero.
"""
from __future__ import annotations

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


def evaluate_model(data, name: str, models_dir, predict, predict_many=None, chunk: int = 32) -> dict:
    """Every checkpoint of one model on every row it is scored on -> {seed: matrix as JSON rows}.

    With `predict_many` (drift.engine.predict_many) the checkpoints of a seed, up to `chunk` at a time, read each
    batch of rows once between them instead of once per checkpoint; the outputs are the same."""
    from drift.checkpoints import list_checkpoints, load_checkpoint

    labels = np.array(data.labels)
    rows = data.usable_rows()
    inputs = data.inputs(name)
    seeds = {}
    for seed, checkpoints in list_checkpoints(models_dir, name).items():
        outputs = {}
        items = list(checkpoints.items())
        step = chunk if predict_many is not None else 1
        for start in range(0, len(items), step):
            part = items[start:start + step]
            models = [load_checkpoint(name, inputs.spec(), data.n_outputs, data.task.name, path) for _, path in part]
            predicted = (predict_many(models, inputs, rows) if predict_many is not None
                         else [predict(models[0], inputs, rows)])
            for (k, _), out in zip(part, predicted):
                full = np.zeros((len(labels), data.n_outputs), np.float32)
                full[rows] = out
                outputs[k] = full
        seeds[str(seed)] = to_json(drift_matrix(outputs, labels, data.slices, data.splits, data.usable, data.task))
    return seeds

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


def model_outputs(data, name: str, models_dir):
    """(seed, {cutoff: raw outputs [rows of the slice table, n_outputs]}) for each seed of one model; rows of
    unusable slices stay zero (no cell reads them)."""
    from drift.checkpoints import list_checkpoints, load_checkpoint  # torch: the report reads from_json without it
    from drift.train import predict

    rows = data.usable_rows()
    inputs = data.inputs(name)
    for seed, checkpoints in list_checkpoints(models_dir, name).items():
        outputs = {}
        for k, path in checkpoints.items():
            model = load_checkpoint(name, inputs.spec(), data.n_outputs, data.task.name, path)
            full = np.zeros((len(data.labels), data.n_outputs), np.float32)
            full[rows] = predict(model, inputs, rows)
            outputs[k] = full
        yield seed, outputs


def evaluate_model(data, name: str, models_dir) -> dict:
    """Every checkpoint of one model on every row it is scored on -> {seed: matrix as JSON rows}."""
    labels = np.array(data.labels)
    return {str(seed): to_json(drift_matrix(outputs, labels, data.slices, data.splits, data.usable, data.task))
            for seed, outputs in model_outputs(data, name, models_dir)}


def evaluate_roster(data, models: list[str], models_dir, threads: int = 1) -> dict[str, dict]:
    """{model: its evaluation}: per-seed drift matrices with what a reader needs to interpret them (metric,
    direction, slice labels, which slices are usable)."""
    from drift.models import get_model_info
    from drift.train import deterministic

    deterministic(threads)
    labels = [s["label"] for s in data.manifest["slices"]]
    return {name: {"dataset": data.name, "model": name, "family": get_model_info(name).family,
                   "metric": data.task.metric, "higher_is_better": data.task.higher_is_better,
                   "labels": labels, "usable": data.usable, "seeds": evaluate_model(data, name, models_dir)}
            for name in models}

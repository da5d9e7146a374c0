"""The temporal drift matrix (paper Sections 4.1-4.2): M[i][j] = perf(f_i, D_j).

Cell (i, j) is scored on the held-out test split of slice j when f_i trained on it (j <= i), on all of slice j
when it is the future (j > i). Rows and columns of unusable slices stay empty, and so does any cell the metric
cannot score: null, never zero. One exception, `evaluate.empty_cell: zero` (the authors' rule): a cell with no
rows, (i, j <= i) of a slice kept for its size but without test rows (trainable, not usable: a one-portrait
year), reads the metric's score of an empty set (task.empty_score(): 0.0 for accuracy). `drift_matrix` is the
definition the evaluate stage runs; the cell cache and batched prediction (drift/evaluate/fill_matrices.py)
only decide which outputs it is given.
"""

from __future__ import annotations

import numpy as np


def eval_rows(i: int, j: int, slices: np.ndarray, splits: np.ndarray) -> np.ndarray:
    """Rows cell (i, j) is scored on: slice j's test split when j <= i, all of slice j when j > i."""
    in_slice = slices == j
    return np.flatnonzero(in_slice & (splits == "test")) if j <= i else np.flatnonzero(in_slice)


def scored_cells(i: int, usable: list[bool], slices: np.ndarray, splits: np.ndarray):
    """(j, rows) for every cell of row i the drift matrix scores: usable columns whose cell has rows."""
    for j, ok in enumerate(usable):
        if ok:
            rows = eval_rows(i, j, slices, splits)
            if len(rows):
                yield j, rows


def drift_matrix(
    outputs: dict[int, np.ndarray | None],
    labels: np.ndarray,
    slices: np.ndarray,
    splits: np.ndarray,
    usable: list[bool],
    task,
    known: dict[tuple[int, int], float | None] | None = None,
    trainable: list[bool] | None = None,
) -> np.ndarray:
    """K x K matrix (nan = empty): row i from f_i's outputs (`outputs[i]`, one row per slice-table row; every
    trained cutoff has a row, even one whose slice has no test rows). `known` holds cells scored before (the
    cell cache), taken as they are: outputs[i] need only be filled on the rows of the cells not in it.
    `trainable` (the manifest's flags) tells the columns with no test rows (trainable, not usable): under
    task.empty_cell "zero" their cells j <= i read task.empty_score(); the default rule needs no flags."""
    known = known or {}
    matrix = np.full((len(usable), len(usable)), np.nan)
    empty = task.empty_score()
    if empty is not None:
        assert trainable is not None, f"empty_cell {task.empty_cell!r} needs the slices' trainable flags"
        rowless = [j for j, ok in enumerate(usable) if trainable[j] and not ok]
        for i in outputs:
            for j in rowless:
                if j <= i:
                    assert not len(eval_rows(i, j, slices, splits)), f"slice {j}: not usable, so no test rows"
                    matrix[i, j] = empty
    for i, out in outputs.items():
        for j, rows in scored_cells(i, usable, slices, splits):
            if (i, j) in known:
                value = known[i, j]
            else:
                assert out is not None, (
                    f"cell ({i}, {j}) is not known: outputs[{i}] must hold f_{i}'s outputs"
                )
                value = task.score(labels[rows], out[rows])
            if value is not None:
                matrix[i, j] = value
    return matrix


def to_json(matrix: np.ndarray) -> list[list[float | None]]:
    return [[None if np.isnan(v) else round(float(v), 6) for v in row] for row in matrix]


def from_json(rows: list[list[float | None]]) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=float)

"""The drift-matrix protocol (paper Section 4.2) on a hand-built case where every cell's value is known."""

from __future__ import annotations

import numpy as np

from drift.protocol.matrix import drift_matrix, eval_rows
from drift.protocol.tasks import get_task


def test_cells_use_test_split_up_to_the_cutoff_and_all_rows_after():
    # 3 slices of 10 rows: rows 0-6 train, 7-9 test in each slice; all labels 1
    slices = np.repeat([0, 1, 2], 10)
    splits = np.array((["train"] * 7 + ["test"] * 3) * 3)
    labels = np.ones(30, dtype=int)
    # every model is right on test rows and wrong on train rows: a cell scored on the test split reads 1.0,
    # one scored on the whole slice reads 3/10, and a cell that leaked train rows would read something else
    right, wrong = [0.0, 5.0], [5.0, 0.0]
    outputs = np.array([right if s == "test" else wrong for s in splits], dtype=np.float32)
    matrix = drift_matrix(
        {0: outputs, 1: outputs, 2: outputs}, labels, slices, splits, [True] * 3, get_task("binary")
    )
    expected = np.array([[1.0, 0.3, 0.3], [1.0, 1.0, 0.3], [1.0, 1.0, 1.0]])
    np.testing.assert_allclose(matrix, expected)


def test_each_cutoff_is_scored_with_its_own_model():
    slices = np.repeat([0, 1], 4)
    splits = np.array(["train", "train", "test", "test"] * 2)
    labels = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    good = np.stack([1 - labels, labels], 1).astype(np.float32)  # argmax = label
    bad = good[:, ::-1].copy()  # argmax = the other class
    matrix = drift_matrix({0: good, 1: bad}, labels, slices, splits, [True, True], get_task("binary"))
    np.testing.assert_allclose(matrix, [[1.0, 1.0], [0.0, 0.0]])


def test_unusable_slices_and_unscorable_cells_stay_empty_not_zero():
    slices = np.repeat([0, 1, 2], 4)
    splits = np.array(["train", "train", "test", "test"] * 3)
    # macro AUC cannot score slice 2: every paper there carries every label
    labels = np.array([[0, 1], [1, 0], [0, 1], [1, 0]] * 2 + [[1, 1]] * 4)
    scores = labels.astype(np.float32)
    task = get_task("multilabel")
    # slice 1 is below min_samples: the train stage trains no f_1, so its row and its column stay empty
    matrix = drift_matrix({0: scores, 2: scores}, labels, slices, splits, [True, False, True], task)
    assert matrix[0, 0] == 1.0
    assert np.isnan(matrix[1]).all() and np.isnan(matrix[:, 1]).all()  # slice 1 below min_samples
    assert np.isnan(matrix[0, 2]) and np.isnan(matrix[2, 2])  # nothing to rank in slice 2
    assert not (matrix == 0).any()


def test_a_slice_with_no_test_rows_keeps_its_row_and_loses_its_column():
    """A one-portrait year: all its rows land in train, so f_1 is trained (its row is filled) but no cell can
    be scored on slice 1 itself (its column is empty), as the paper's white bands show."""
    slices = np.array([0, 0, 0, 1, 2, 2, 2])
    splits = np.array(["train", "test", "test", "train", "train", "test", "test"])
    labels = np.array([0, 1, 0, 1, 1, 0, 1])
    logits = np.stack([1 - labels, labels], axis=1).astype(np.float32)  # every prediction right
    matrix = drift_matrix(
        {0: logits, 1: logits, 2: logits}, labels, slices, splits, [True, False, True], get_task("binary")
    )
    assert matrix[1, 0] == 1.0 and matrix[1, 2] == 1.0  # f_1 scored on slices 0 (test rows) and 2 (all rows)
    assert np.isnan(matrix[:, 1]).all()  # slice 1 has no test rows to score anything on


def test_eval_rows():
    slices = np.array([0, 0, 1, 1, 1])
    splits = np.array(["train", "test", "train", "test", "test"])
    assert eval_rows(1, 0, slices, splits).tolist() == [1]
    assert eval_rows(1, 1, slices, splits).tolist() == [3, 4]
    assert eval_rows(0, 1, slices, splits).tolist() == [2, 3, 4]

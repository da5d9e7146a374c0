"""Label-free estimates of M (drift/evaluate/estimate.py) on hand-built outputs whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from drift.evaluate.estimate import (
    atc_estimate,
    atc_threshold,
    estimate_error,
    estimated_matrix,
    expected_auc,
    softmax_confidence,
    source_rows,
)
from drift.protocol.matrix import drift_matrix
from drift.protocol.metrics import binary_auc
from drift.protocol.tasks import get_task


def logits_for(confidence: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """Two logits whose softmax gives `confidence` to class `predicted`."""
    margin = np.log(confidence / (1 - confidence))
    z = np.zeros((len(confidence), 2))
    z[np.arange(len(confidence)), predicted] = margin
    return z


def test_confidence_of_two_logits():
    z = logits_for(np.array([0.5, 0.8, 0.99]), np.array([0, 1, 0]))
    assert softmax_confidence(z) == pytest.approx([0.5, 0.8, 0.99])


@pytest.mark.parametrize("accuracy", [0.0, 0.25, 0.6, 0.65, 1.0])
def test_atc_threshold_reproduces_the_source_accuracy(accuracy):
    source = np.array([0.55, 0.6, 0.6, 0.6, 0.7, 0.8, 0.9, 0.9, 0.95, 0.99])  # with ties
    assert atc_estimate(source, atc_threshold(source, accuracy)) == pytest.approx(accuracy)


def test_atc_by_hand():
    # source accuracy 0.6 on 10 rows: the 6 most confident count -> t = 0.7 (6th largest), none tied
    source = np.array([0.51, 0.52, 0.53, 0.54, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99])
    threshold = atc_threshold(source, 0.6)
    assert threshold == (0.7, 1.0)
    assert atc_estimate(np.array([0.6, 0.65, 0.75, 0.99]), threshold) == 0.5  # 2 of 4 reach 0.7
    assert atc_estimate(np.full(5, 0.9), threshold) == 1.0
    # a constant confidence (the prior baseline): every target gets the source accuracy
    assert atc_estimate(np.full(7, 0.55), atc_threshold(np.full(10, 0.55), 0.62)) == pytest.approx(0.62)


def shifted_slices(rng, right_if):
    """Slice 0 (the source) confident, slices 1 and 2 less and less so; `right_if(confidence, rng)` says
    which rows the model gets right."""
    confidence = np.concatenate(
        [rng.uniform(low, high, 4000) for low, high in ((0.7, 1.0), (0.6, 0.9), (0.5, 0.8))]
    )
    labels = rng.integers(0, 2, len(confidence))
    right = right_if(confidence, rng)
    slices = np.repeat([0, 1, 2], 4000)
    splits = np.where(rng.random(len(slices)) < 0.3, "test", "train")
    out = logits_for(confidence, np.where(right, labels, 1 - labels))
    task = get_task("binary")
    true = drift_matrix({0: out}, labels, slices, splits, [True] * 3, task)
    return true, estimated_matrix({0: out}, labels, slices, splits, [True] * 3, task)


def test_doc_is_right_for_a_calibrated_model():
    """Right with probability equal to the confidence: accuracy = mean confidence in every slice, so DoC
    (source accuracy + the change of mean confidence) follows the true fall (0.85 -> 0.75 -> 0.65). ATC counts
    rows above the source's 15% quantile (about 0.745): it overstates the fall here."""
    true, estimates = shifted_slices(np.random.default_rng(0), lambda c, rng: rng.random(len(c)) < c)
    assert true[0] == pytest.approx([0.85, 0.75, 0.65], abs=0.02)
    assert estimate_error(estimates["doc"], true) < 0.02
    assert estimate_error(estimates["atc"], true) > 0.2
    assert estimate_error(np.full((3, 3), true[0, 0]), true) > 0.1  # the source accuracy, as a guess


def test_atc_is_right_when_confidence_ranks_correctness():
    """Right exactly when the confidence exceeds 0.8: the source threshold lands at 0.8, so ATC reads every
    slice's accuracy (2/3, 1/3, 0) however the confidences move; DoC only sees the mean move."""
    true, estimates = shifted_slices(np.random.default_rng(1), lambda c, rng: c > 0.8)
    assert true[0] == pytest.approx([2 / 3, 1 / 3, 0], abs=0.04)  # sampling noise of 1,200 source rows
    assert np.abs(estimates["atc"][0] - true[0]).max() < 0.01
    assert estimate_error(estimates["doc"], true) > 0.05


def test_cells_follow_the_protocol_and_read_only_source_labels():
    """3 slices, the middle one unusable. Cutoff i calibrates on the test rows of the usable slices <= i; the
    labels of any other row never change an estimate."""
    rng = np.random.default_rng(1)
    slices = np.repeat([0, 1, 2], 10)
    splits = np.array((["train"] * 7 + ["test"] * 3) * 3)
    usable = [True, False, True]
    labels = rng.integers(0, 2, 30)
    outputs = {0: rng.normal(size=(30, 2)), 2: rng.normal(size=(30, 2))}
    task = get_task("binary")
    assert source_rows(2, slices, splits, usable).tolist() == [7, 8, 9, 27, 28, 29]
    estimates = estimated_matrix(outputs, labels, slices, splits, usable, task)
    for matrix in estimates.values():
        assert np.isnan(matrix[1]).all() and np.isnan(matrix[:, 1]).all()
        assert np.isfinite(matrix[[0, 0, 2, 2], [0, 2, 0, 2]]).all()
    flipped = labels.copy()
    unseen = np.setdiff1d(np.arange(30), source_rows(2, slices, splits, usable))
    flipped[unseen] = 1 - flipped[unseen]
    again = estimated_matrix(outputs, flipped, slices, splits, usable, task)
    for method in estimates:
        np.testing.assert_array_equal(estimates[method][2], again[method][2])
    assert (
        estimated_matrix(outputs, labels.astype(float), slices, splits, usable, get_task("regression")) == {}
    )


def loop_expected_auc(scores, p):
    num = den = 0.0
    for a in range(len(scores)):
        for b in range(len(scores)):
            if a != b:
                w = p[a] * (1 - p[b])
                den += w
                num += w * (1.0 if scores[a] > scores[b] else 0.5 if scores[a] == scores[b] else 0.0)
    return num / den


def test_expected_auc_matches_the_pair_sum_and_the_true_auc_on_hard_labels():
    rng = np.random.default_rng(2)
    scores = np.round(rng.normal(size=25), 1)  # ties
    p = rng.random(25)
    assert expected_auc(scores, p) == pytest.approx(loop_expected_auc(scores, p))
    y = (rng.random(25) < 0.4).astype(float)
    assert expected_auc(scores, y) == pytest.approx(binary_auc(y, scores))
    assert expected_auc(scores, np.ones(25)) is None


def test_multilabel_estimate_anchors_on_the_source_auc_and_follows_the_models_own_certainty():
    """Cell (0, 0) is scored on the source rows themselves: the estimate is the true macro AUC. Slice 1's
    logits sit near 0 (the model cannot tell its rows apart): the AUC the model expects there falls towards
    0.5, and so does the estimate. No cutoff 1 in the outputs: an empty row."""
    rng = np.random.default_rng(3)
    source_out = 3 * rng.normal(size=(6, 3))
    source_labels = (rng.random((6, 3)) < 0.5).astype(int)
    source_labels[0], source_labels[1] = 0, 1  # every class has both values
    out = np.concatenate([np.zeros((4, 3)), source_out, 0.01 * rng.normal(size=(10, 3))])
    labels = np.concatenate([np.zeros((4, 3)), source_labels, np.ones((10, 3))]).astype(int)
    slices = np.repeat([0, 1], 10)
    splits = np.array((["train"] * 4 + ["test"] * 6) * 2)
    task = get_task("multilabel")
    estimates = estimated_matrix({0: out}, labels, slices, splits, [True, True], task)
    true = task.score(source_labels, source_out)
    assert list(estimates) == ["doc"]
    assert estimates["doc"][0, 0] == pytest.approx(true)
    expected_source = np.mean(
        [expected_auc(source_out[:, c], 1 / (1 + np.exp(-source_out[:, c]))) for c in range(3)]
    )
    assert expected_source > 0.6
    assert estimates["doc"][0, 1] == pytest.approx(true - (expected_source - 0.5), abs=0.02)
    assert np.isnan(estimates["doc"][1]).all()


def test_estimate_error_is_the_mean_over_future_cells():
    true = np.array([[0.9, 0.8, 0.7], [0.9, 0.9, 0.8], [0.9, 0.9, 0.9]])
    est = true + np.array([[5, 0.1, -0.2], [5, 5, np.nan], [5, 5, 5]])
    assert estimate_error(est, true) == pytest.approx(0.15)
    assert estimate_error(np.full((2, 2), np.nan), true[:2, :2]) is None

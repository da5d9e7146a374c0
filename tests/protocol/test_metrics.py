"""drift.protocol.metrics against hand-computed values and scikit-learn (paper Appendix B)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from sklearn.metrics import accuracy_score, mean_squared_error, roc_auc_score

from drift.core.errors import DriftError
from drift.protocol.metrics import (
    METRICS,
    accuracy,
    balanced_mse,
    binary_auc,
    macro_auc,
    macro_f1,
)

FAST = settings(max_examples=60, deadline=None)


# --- accuracy (B.1) --------------------------------------------------------------------------------------------


def test_accuracy_by_hand():
    y = np.array([0, 1, 1, 0])
    logits = np.array([[2.0, 1.0], [0.0, 3.0], [1.0, 0.5], [-1.0, -2.0]])  # predicts 0, 1, 0, 0
    assert accuracy(y, logits) == 0.75
    assert isinstance(accuracy(y, logits), float)


def test_accuracy_empty_is_none():
    assert accuracy(np.array([], dtype=int), np.zeros((0, 2))) is None


def test_accuracy_rejects_a_single_output_column():
    # argmax over one column is always 0: a [n] or [n, 1] head is a wiring mistake, not a score
    with pytest.raises(ValueError):
        accuracy(np.array([0, 1]), np.array([0.3, -0.2]))


@pytest.mark.parametrize("seed", range(5))
def test_accuracy_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    n, c = 200, 1 + seed
    y = rng.integers(0, c + 1, n)
    logits = rng.normal(size=(n, c + 1))
    assert accuracy(y, logits) == pytest.approx(accuracy_score(y, logits.argmax(1)))


# --- balanced MSE (B.2) ----------------------------------------------------------------------------------------


def test_balanced_mse_by_hand():
    # rating 5: errors 0, 1 -> MSE 0.5 ; rating 1: error 2 -> MSE 4 ; ratings 2, 3, 4 absent (not counted)
    y = np.array([5, 5, 1])
    pred = np.array([5.0, 4.0, 3.0])
    assert balanced_mse(y, pred) == pytest.approx((0.5 + 4.0) / 2)
    # differs from the plain MSE (which would be (0 + 1 + 4) / 3)
    assert balanced_mse(y, pred) != pytest.approx(5 / 3)


def test_balanced_mse_accepts_column_predictions_and_empty():
    y = np.array([1.0, 2.0, 2.0])
    pred = np.array([[1.5], [2.0], [3.0]])
    assert balanced_mse(y, pred) == pytest.approx((0.25 + 0.5) / 2)
    assert balanced_mse(np.array([]), np.zeros((0, 1))) is None


@pytest.mark.parametrize("seed", range(5))
def test_balanced_mse_matches_sklearn_per_level(seed):
    rng = np.random.default_rng(seed)
    y = rng.choice([1, 2, 3, 4, 5], size=300, p=[0.05, 0.05, 0.1, 0.2, 0.6]).astype(float)
    pred = y + rng.normal(scale=1.0 + y, size=300)
    levels = np.unique(y)
    expected = np.mean([mean_squared_error(y[y == r], pred[y == r]) for r in levels])
    assert balanced_mse(y, pred) == pytest.approx(expected)


@FAST
@given(
    y=hnp.arrays(np.int64, st.integers(1, 40), elements=st.integers(1, 5)),
    data=st.data(),
)
def test_balanced_mse_averages_only_present_ratings(y, data):
    pred = data.draw(hnp.arrays(np.float64, len(y), elements=st.floats(-10, 10)))
    present = np.unique(y)
    expected = np.mean([np.mean((y[y == r] - pred[y == r]) ** 2) for r in present])
    assert balanced_mse(y, pred) == pytest.approx(expected, rel=1e-9, abs=1e-12)
    # predicting every example exactly is zero whatever ratings are present
    assert balanced_mse(y, y.astype(float)) == 0.0


# --- macro AUC (B.3) -------------------------------------------------------------------------------------------


def test_binary_auc_by_hand_with_ties():
    # positives score 0.8, 0.5; negatives 0.5, 0.1 -> pairs: (0.8>0.5) 1, (0.8>0.1) 1, (0.5=0.5) 1/2,
    # (0.5>0.1) 1
    y = np.array([1, 1, 0, 0])
    s = np.array([0.8, 0.5, 0.5, 0.1])
    assert binary_auc(y, s) == pytest.approx(3.5 / 4)
    assert binary_auc(np.array([1, 1]), np.array([0.1, 0.2])) is None


def test_macro_auc_skips_absent_and_always_present_classes():
    Y = np.array([[1, 0, 1], [0, 0, 1], [1, 0, 1], [0, 0, 1]])  # class 1 never, class 2 always present
    S = np.array([[0.9, 0.3, 0.1], [0.2, 0.7, 0.9], [0.4, 0.1, 0.5], [0.6, 0.2, 0.3]])
    # class 0: positives 0.9, 0.4; negatives 0.2, 0.6 -> 3 of 4 pairs ordered correctly
    assert macro_auc(Y, S) == pytest.approx(0.75)


def test_macro_auc_none_when_nothing_scorable():
    assert macro_auc(np.ones((3, 2)), np.zeros((3, 2))) is None
    assert macro_auc(np.zeros((0, 2)), np.zeros((0, 2))) is None


@pytest.mark.parametrize("seed", range(5))
def test_macro_auc_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    n, c = 150, 7
    Y = (rng.random((n, c)) < rng.uniform(0.05, 0.5, c)).astype(int)
    S = Y * 0.7 + rng.normal(size=(n, c))
    S = np.round(S, 1)  # many ties
    assert macro_auc(Y, S) == pytest.approx(roc_auc_score(Y, S, average="macro"))


@FAST
@given(data=st.data())
def test_macro_auc_property_matches_sklearn_on_scorable_classes(data):
    n = data.draw(st.integers(2, 30))
    c = data.draw(st.integers(1, 5))
    Y = data.draw(hnp.arrays(np.int64, (n, c), elements=st.integers(0, 1)))
    # few distinct score values -> ties are common
    S = data.draw(hnp.arrays(np.float64, (n, c), elements=st.sampled_from([-1.0, 0.0, 0.5, 2.0])))
    scorable = [k for k in range(c) if 0 < Y[:, k].sum() < n]
    got = macro_auc(Y, S)
    if not scorable:
        assert got is None
    else:
        expected = np.mean([roc_auc_score(Y[:, k], S[:, k]) for k in scorable])
        assert got == pytest.approx(expected)


@FAST
@given(data=st.data())
def test_macro_auc_invariant_to_monotone_transform(data):
    n = data.draw(st.integers(2, 30))
    Y = data.draw(hnp.arrays(np.int64, (n, 3), elements=st.integers(0, 1)))
    # integer scores (with ties) stay distinct under the sigmoid; tiny floats would collapse to 0.5
    S = data.draw(hnp.arrays(np.int64, (n, 3), elements=st.integers(-6, 6))).astype(float)
    a, b = macro_auc(Y, S), macro_auc(Y, 1 / (1 + np.exp(-S)))  # logits vs probabilities
    assert (a is None and b is None) or a == pytest.approx(b)


def test_non_finite_outputs_raise():
    with pytest.raises(DriftError):
        accuracy(np.array([0, 1]), np.array([[np.nan, 0.0], [0.0, 1.0]]))
    with pytest.raises(DriftError):
        balanced_mse(np.array([1.0]), np.array([np.inf]))
    with pytest.raises(DriftError):
        macro_auc(np.array([[0], [1]]), np.array([[0.0], [np.nan]]))


def test_registry():
    assert METRICS == {
        "accuracy": accuracy,
        "balanced_mse": balanced_mse,
        "macro_auc": macro_auc,
        "macro_f1": macro_f1,
    }

"""drift.protocol.tasks: outputs, losses and their class weights, scoring (paper Sections 4.3-4.4)."""

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from drift.core.errors import DriftError
from drift.protocol.metrics import accuracy, balanced_mse, macro_auc
from drift.protocol.tasks import TASKS, class_weights, get_task, rating_weights

FAST = settings(max_examples=40, deadline=None)


def test_registry_matches_design_table():
    assert [(t.name, t.metric, t.higher_is_better) for t in TASKS.values()] == [
        ("binary", "accuracy", True),
        ("multiclass", "accuracy", True),
        ("regression", "balanced_mse", False),
        ("multilabel", "macro_auc", True),
    ]
    assert get_task("binary").n_outputs(2) == 2
    assert get_task("regression").n_outputs(1) == 1
    assert get_task("multilabel").n_outputs(7) == 7


def test_unknown_task_names_close_match():
    with pytest.raises(DriftError, match="did you mean multilabel"):
        get_task("multilable")


def test_task_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_task("binary").metric = "macro_auc"


# --- binary ----------------------------------------------------------------------------------------------------


def test_binary_loss_is_cross_entropy():
    task = get_task("binary")
    y = task.target_tensor([0, 1, 1])
    assert y.dtype == torch.int64
    logits = torch.tensor([[2.0, -1.0], [0.5, 0.5], [-3.0, 1.0]])
    loss = task.loss(y)(logits, y)
    by_hand = -np.mean(
        [
            np.log(np.exp(2) / (np.exp(2) + np.exp(-1))),
            np.log(0.5),
            np.log(np.exp(1) / (np.exp(-3) + np.exp(1))),
        ]
    )
    assert loss.item() == pytest.approx(by_hand, rel=1e-6)


def test_binary_rejects_non_binary_labels():
    with pytest.raises(DriftError):
        get_task("binary").target_tensor([0, 2])


# --- regression: weighted MSE, w_r = n / n_r (eq. 4-5) ---------------------------------------------------------


def test_rating_weights_by_hand():
    # n = 6: rating 5 x4, rating 1 x1, rating 3 x1 -> w5 = 6/4, w1 = 6/1, w3 = 6/1
    levels, w = rating_weights(torch.tensor([5.0, 5.0, 5.0, 5.0, 1.0, 3.0]))
    assert levels.tolist() == [1.0, 3.0, 5.0]
    assert w.tolist() == pytest.approx([6.0, 6.0, 1.5])


def test_weighted_mse_by_hand():
    task = get_task("regression")
    train = task.target_tensor([5, 5, 5, 5, 1, 3])
    assert train.dtype == torch.float32
    loss = task.loss(train)
    # batch: ratings 5, 1 predicted 4, 2 -> (1.5 * 1 + 6 * 1) / 2
    out = torch.tensor([[4.0], [2.0]])
    assert loss(out, torch.tensor([5.0, 1.0])).item() == pytest.approx((1.5 + 6.0) / 2)
    # [B] outputs work the same as [B, 1]
    assert loss(out.reshape(-1), torch.tensor([5.0, 1.0])).item() == pytest.approx((1.5 + 6.0) / 2)
    # a rating unseen in training (2) weighs 0, not NaN
    val = loss(torch.tensor([0.0, 4.0]), torch.tensor([2.0, 5.0])).item()
    assert val == pytest.approx((0.0 + 1.5 * 1.0) / 2)


@FAST
@given(y=hnp.arrays(np.int64, st.integers(1, 30), elements=st.integers(1, 5)), data=st.data())
def test_weighted_mse_matches_formula(y, data):
    pred = data.draw(hnp.arrays(np.float64, len(y), elements=st.floats(-3, 8)))
    task = get_task("regression")
    t = task.target_tensor(y)
    got = task.loss(t)(torch.tensor(pred, dtype=torch.float32).reshape(-1, 1), t).item()
    counts = {r: np.sum(y == r) for r in np.unique(y)}
    w = np.array([len(y) / counts[r] for r in y])
    assert got == pytest.approx(np.mean(w * (y - pred) ** 2), rel=1e-4, abs=1e-4)


def test_weighted_mse_has_gradients():
    task = get_task("regression")
    t = task.target_tensor([1.0, 2.0, 2.0])
    out = torch.zeros(3, 1, requires_grad=True)
    task.loss(t)(out, t).backward()
    assert torch.isfinite(out.grad).all() and out.grad.abs().sum() > 0


# --- multilabel: BCE with logits, pos_weight w_c = negatives / positives (eq. 2-3) -----------------------------


def test_class_weights_by_hand():
    Y = torch.tensor([[1, 0, 0, 1], [0, 0, 1, 1], [0, 0, 0, 1], [1, 0, 0, 1]], dtype=torch.float32)
    # class 0: 2 neg / 2 pos = 1; class 1: no positives -> 1.0; class 2: 3/1; class 3: always positive -> 0/4
    assert class_weights(Y).tolist() == pytest.approx([1.0, 1.0, 3.0, 0.0])


def test_weighted_bce_matches_torch_with_pos_weight():
    task = get_task("multilabel")
    train = task.target_tensor([[1, 0, 0], [0, 0, 1], [0, 1, 1], [0, 0, 0], [0, 0, 0]])
    assert train.dtype == torch.float32 and train.shape == (5, 3)
    loss = task.loss(train)
    logits = torch.tensor([[0.3, -1.0, 2.0], [1.5, 0.2, -0.7]])
    targets = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    pw = torch.tensor([4.0, 4.0, 1.5])  # negatives/positives: 4/1, 4/1, 3/2
    expected = F.binary_cross_entropy_with_logits(logits, targets, pos_weight=pw)
    assert loss(logits, targets).item() == pytest.approx(expected.item(), rel=1e-6)
    # by hand for one element: pos_weight scales the positive term only
    x, w = 0.3, 4.0
    one = F.binary_cross_entropy_with_logits(
        torch.tensor([[x]]), torch.tensor([[1.0]]), pos_weight=torch.tensor([w])
    )
    assert one.item() == pytest.approx(-w * np.log(1 / (1 + np.exp(-x))), rel=1e-6)


def test_multilabel_targets_from_stored_lists():
    task = get_task("multilabel")
    t = task.target_tensor(np.array([[0, 1], [1, 1]], dtype=np.uint8))
    assert t.dtype == torch.float32 and t.tolist() == [[0.0, 1.0], [1.0, 1.0]]
    # a column of lists (object array, as read from a table) also works
    col = np.empty(2, dtype=object)
    col[0], col[1] = [0, 1], [1, 0]
    assert task.target_tensor(col).tolist() == [[0.0, 1.0], [1.0, 0.0]]
    with pytest.raises(DriftError):
        task.target_tensor([0, 1])  # not [n, C]


def test_empty_training_set_is_an_error():
    with pytest.raises(DriftError):
        get_task("multilabel").loss(torch.zeros(0, 3))


# --- score -----------------------------------------------------------------------------------------------------


def test_score_uses_the_task_metric():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 50)
    logits = rng.normal(size=(50, 2))
    assert get_task("binary").score(y, logits) == accuracy(y, logits)
    r = rng.integers(1, 6, 50).astype(float)
    p = rng.normal(3, 1, size=(50, 1))
    assert get_task("regression").score(r, p) == balanced_mse(r, p)
    Y = rng.integers(0, 2, (50, 4))
    S = rng.normal(size=(50, 4))
    assert get_task("multilabel").score(Y.tolist(), torch.tensor(S)) == pytest.approx(macro_auc(Y, S))

"""Closed-form reference baselines (drift/models/reference.py): the labels' prior and a standardised linear
model.

Expectations are independent of the code (which fits with scikit-learn): hand-counted priors, a known weighted
mean, planted signals, the optimum of the task's own training loss, and the same objectives solved here
directly: Newton's method for the logistic regressions, the normal equations for ridge.
"""

import numpy as np
import pytest
import torch

from drift.core.errors import DriftError
from drift.models import InputSpec
from drift.models.reference import LinearBaseline, PriorBaseline
from drift.protocol.metrics import accuracy, binary_auc, macro_auc
from drift.protocol.tasks import get_task

PIXELS = InputSpec("pixels", (3, 4, 4))  # 48 features
POOLED = InputSpec("pooled", (12,))


def _out(model, x) -> np.ndarray:
    with torch.no_grad():
        out = model(x)
    assert out.dtype == torch.float32 and out.shape == (len(x), model.n_outputs)
    assert torch.isfinite(out).all()
    return out.double().numpy()


def _standardise(X: np.ndarray) -> np.ndarray:
    """What the baseline's docstring promises: training mean / std, a constant feature only centred."""
    X = X.astype(np.float64)
    std = X.std(0)
    return (X - X.mean(0)) / np.where(std < 1e-6, 1.0, std)


def _newton_logistic(Z: np.ndarray, y: np.ndarray, s: np.ndarray, C: float) -> np.ndarray:
    """Decision values z = Z beta + b at the minimum of C sum_i s_i (log(1 + e^z_i) - y_i z_i) + |beta|^2 / 2
    (intercept unpenalised), by Newton's method in float64: the objective is strictly convex."""
    A = np.hstack([Z, np.ones((len(Z), 1))])
    P = np.eye(A.shape[1])
    P[-1, -1] = 0.0
    theta = np.zeros(A.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-A @ theta))
        grad = C * A.T @ (s * (p - y)) + P @ theta
        hess = C * (A * (s * p * (1 - p))[:, None]).T @ A + P
        theta -= np.linalg.solve(hess, grad)
    assert np.abs(grad).max() < 1e-8
    return A @ theta


def _separable_pixels(n: int, seed: int, flip: float = 0.0):
    """Images whose class shows in the brightness of one 2x2 patch of channel 0, one pixel constant."""
    g = torch.Generator().manual_seed(seed)
    y = (torch.rand(n, generator=g) < 0.35).long()  # class 1 is the minority
    x = torch.rand(n, 3, 4, 4, generator=g) * 0.5
    x[:, 0, :2, :2] += 0.4 * y[:, None, None].float()
    x[:, 2, 3, 3] = 0.25  # a constant pixel: the std floor keeps it finite
    if flip:
        y = torch.where(torch.rand(n, generator=g) < flip, 1 - y, y)
    return x, y


# ---- PriorBaseline ----------------------------------------------------------------------------------------------


def test_prior_binary_majority_tie_and_single_class():
    y = torch.tensor([0, 1, 1, 1, 0, 1])
    out = _out(PriorBaseline(PIXELS, 2).fit(torch.zeros(6, 3, 4, 4), y, "binary"), torch.rand(5, 3, 4, 4))
    assert np.allclose(np.exp(out), [[2 / 6, 4 / 6]] * 5, atol=1e-6)  # the class frequencies
    assert (out.argmax(1) == 1).all() and (out == out[0]).all()

    tie = PriorBaseline(PIXELS, 2).fit(None, torch.tensor([1, 0, 1, 0]), "binary")
    assert (_out(tie, torch.rand(3, 3, 4, 4)).argmax(1) == 0).all()  # a tie goes to class 0

    for cls in (0, 1):  # only one class present: predict it, and no -inf for the absent one
        only = PriorBaseline(POOLED, 2).fit(None, torch.full((7,), cls), "binary")
        assert (_out(only, torch.randn(2, 12)).argmax(1) == cls).all()


def test_prior_regression_is_the_mean_of_the_distinct_ratings():
    # levels {1, 2, 5} with very unequal counts: under w_r = n / n_r each level weighs the same -> (1 + 2 + 5)
    # / 3
    y = torch.tensor([1.0] * 30 + [2.0] * 3 + [5.0] * 9)
    prior = PriorBaseline(POOLED, 1).fit(None, y, "regression")
    out = _out(prior, torch.randn(4, 12))
    assert np.allclose(out, 8 / 3, atol=1e-6)
    # and it is the constant that minimises the task's own weighted training loss
    loss = get_task("regression").loss(y)
    best = loss(torch.full((len(y),), 8 / 3), y)
    for delta in (-0.05, 0.05):
        assert loss(torch.full((len(y),), 8 / 3 + delta), y) > best

    one = PriorBaseline(POOLED, 1).fit(None, torch.full((5,), 4.0), "regression")
    assert np.allclose(_out(one, torch.randn(2, 12)), 4.0)


def test_prior_multilabel_prevalences():
    Y = torch.tensor([[1, 1, 0, 1], [0, 0, 0, 1], [0, 1, 0, 1], [0, 0, 0, 1]], dtype=torch.float32)
    out = _out(PriorBaseline(POOLED, 4).fit(torch.zeros(4, 12), Y, "multilabel"), torch.randn(3, 12))
    p = 1 / (1 + np.exp(-out))
    assert np.allclose(p[:, :2], [0.25, 0.5], atol=1e-6)
    assert (p[:, 2] < 1e-4).all() and (p[:, 3] > 1 - 1e-4).all()  # clamped, finite logits


# ---- LinearBaseline -------------------------------------------------------------------------------------------


def test_linear_binary_beats_the_prior_on_separable_pixels():
    x, y = _separable_pixels(600, seed=0)
    xt, yt = _separable_pixels(400, seed=1)
    linear = LinearBaseline(PIXELS, 2).fit(x, y, "binary")
    prior = PriorBaseline(PIXELS, 2).fit(x, y, "binary")
    assert accuracy(yt.numpy(), _out(linear, xt)) > 0.95
    majority = max(yt.float().mean().item(), 1 - yt.float().mean().item())
    assert accuracy(yt.numpy(), _out(prior, xt)) == pytest.approx(majority)
    # two logits [-z/2, z/2]: softmax of the pair is sigmoid(z)
    out = _out(linear, xt)
    assert np.allclose(out[:, 0], -out[:, 1], atol=1e-6)


def test_linear_binary_is_the_regularised_logistic_optimum():
    x, y = _separable_pixels(300, seed=2, flip=0.2)  # noisy labels: a finite optimum
    C = 0.05
    model = LinearBaseline(PIXELS, 2, C=C).fit(x, y, "binary")
    out = _out(model, x)
    Z = _standardise(x.reshape(len(x), -1).numpy())
    best = _newton_logistic(Z, y.numpy().astype(float), np.ones(len(y)), C)
    assert np.abs((out[:, 1] - out[:, 0]) - best).max() < 5e-3


@pytest.mark.parametrize("n", [400, 8])  # n > D: primal normal equations; n < D: the dual (kernel) form
def test_linear_regression_solves_the_weighted_ridge_normal_equations(n):
    g = np.random.default_rng(n)
    X = (g.standard_normal((n, 12)) * g.uniform(0.1, 3, 12) + g.uniform(-2, 2, 12)).astype(np.float32)
    y = np.clip(np.round(2.5 + X[:, 0] + g.standard_normal(n)), 1, 5).astype(np.float32)
    C = 0.05
    model = LinearBaseline(POOLED, 1, C=C).fit(torch.from_numpy(X), torch.from_numpy(y), "regression")
    _, inverse, counts = np.unique(y, return_inverse=True, return_counts=True)
    w = n / counts[inverse]  # w_r = n / n_r, eq. 5
    s = w / w.mean()
    # minimise sum_i s_i (y_i - z_i.beta - b)^2 + |beta|^2 / C: (A^T S A + P) theta = A^T S y, A = [Z, 1], P =
    # I / C but 0 for the intercept
    A = np.hstack([_standardise(X), np.ones((n, 1))])
    P = np.diag([1 / C] * 12 + [0.0])
    theta = np.linalg.solve((A * s[:, None]).T @ A + P, (A * s[:, None]).T @ y)
    assert np.allclose(_out(model, torch.from_numpy(X))[:, 0], A @ theta, atol=1e-4)


def test_linear_regression_recovers_a_linear_function():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(500, 12, generator=g) * 2 + 1
    a = torch.linspace(-1, 1, 12)
    y = x @ a + 3.0
    model = LinearBaseline(POOLED, 1, C=1e3).fit(x, y, "regression")  # C large: barely regularised
    xt = torch.randn(200, 12, generator=g) * 2 + 1
    assert np.abs(_out(model, xt)[:, 0] - (xt @ a + 3.0).numpy()).max() < 0.05
    # one distinct rating: predict it everywhere
    flat = LinearBaseline(POOLED, 1).fit(x, torch.full((500,), 4.0), "regression")
    assert np.allclose(_out(flat, xt), 4.0, atol=1e-5)


def _planted_multilabel(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 12, generator=g)
    rare = (x[:, 0] + 0.3 * torch.randn(n, generator=g) > 1.9).float()  # ~3% positives
    common = (x[:, 1] - x[:, 2] + torch.randn(n, generator=g) > 0).float()
    never = torch.zeros(n)  # no positives: prior fallback
    return x, torch.stack([rare, common, never], 1)


def test_linear_multilabel_weighted_beats_chance_with_a_rare_label():
    x, Y = _planted_multilabel(1500, seed=4)
    xt, Yt = _planted_multilabel(1500, seed=5)
    assert 10 <= Y[:, 0].sum() <= 0.06 * len(Y)
    model = LinearBaseline(POOLED, 3).fit(x, Y, "multilabel")
    out = _out(model, xt)
    assert macro_auc(Yt.numpy(), out) > 0.85
    assert binary_auc(Yt[:, 0].numpy(), out[:, 0]) > 0.85
    prior = PriorBaseline(POOLED, 3).fit(x, Y, "multilabel")
    assert np.allclose(out[:, 2], _out(prior, xt)[:, 2])  # the label never seen positive
    assert (model.head.weight[2] == 0).all()


def test_linear_multilabel_is_the_pos_weighted_logistic_optimum():
    x, Y = _planted_multilabel(400, seed=6)
    C = 0.05
    out = _out(LinearBaseline(POOLED, 3, C=C).fit(x, Y, "multilabel"), x)
    Z = _standardise(x.numpy())
    for c in range(2):
        yc = Y[:, c].numpy()
        w = (len(yc) - yc.sum()) / yc.sum()  # neg / pos, eq. 3
        best = _newton_logistic(Z, yc.astype(float), np.where(yc == 1, w, 1.0), C)
        assert np.abs(out[:, c] - best).max() < 5e-3


# ---- state, determinism, edge cases -----------------------------------------------------------------------------


def _fits():
    x, y = _separable_pixels(200, seed=7, flip=0.1)
    xp, Y = _planted_multilabel(300, seed=8)
    ratings = torch.clamp(torch.round(xp[:, 0] + 3), 1, 5)
    return [
        (PIXELS, 2, x, y, "binary"),
        (POOLED, 1, xp, ratings, "regression"),
        (POOLED, 3, xp, Y, "multilabel"),
    ]


@pytest.mark.parametrize("cls", [PriorBaseline, LinearBaseline])
def test_state_dict_round_trip_and_determinism(cls):
    for spec, k, x, y, task in _fits():
        model = cls(spec, k).fit(x, y, task)
        again = cls(spec, k).fit(x, y, task)
        state = model.state_dict()
        assert state.keys() == again.state_dict().keys()
        assert all(torch.equal(state[key], again.state_dict()[key]) for key in state)  # bit-identical refit
        fresh = cls(spec, k)
        fresh.load_state_dict(state)
        assert torch.equal(fresh(x), model(x))  # no refit needed
        assert cls.closed_form is True


def test_linear_state_holds_everything_and_trains_nothing():
    model = LinearBaseline(PIXELS, 2)
    assert set(model.state_dict()) == {"mean", "std", "head.weight", "head.bias"}
    assert not any(p.requires_grad for p in model.parameters())
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    # draws nothing from the global RNG
    LinearBaseline(PIXELS, 2)
    assert torch.equal(torch.rand(3), expected)


def test_single_row_and_single_class():
    x = torch.rand(1, 3, 4, 4)
    threads = torch.get_num_threads()
    for cls in (PriorBaseline, LinearBaseline):
        for label in (0, 1):
            model = cls(PIXELS, 2).fit(x, torch.tensor([label]), "binary")
            assert (_out(model, torch.rand(5, 3, 4, 4)).argmax(1) == label).all()
        _out(cls(PIXELS, 1).fit(x, torch.tensor([3.0]), "regression"), torch.rand(2, 3, 4, 4))
        _out(cls(PIXELS, 2).fit(x, torch.tensor([[1.0, 0.0]]), "multilabel"), torch.rand(2, 3, 4, 4))
    # many rows, one class: logistic regression cannot be fitted, the prior's class is predicted
    xs, _ = _separable_pixels(50, seed=9)
    ones = LinearBaseline(PIXELS, 2).fit(xs, torch.ones(50, dtype=torch.long), "binary")
    assert (_out(ones, torch.rand(10, 3, 4, 4)).argmax(1) == 1).all()
    # two rows with different ratings (n < D): the dual ridge, finite
    two = LinearBaseline(PIXELS, 1).fit(torch.rand(2, 3, 4, 4), torch.tensor([1.0, 5.0]), "regression")
    _out(two, torch.rand(3, 3, 4, 4))
    # the one-thread sections restore it
    assert torch.get_num_threads() == threads


def test_errors_are_drift_errors():
    x = torch.rand(4, 12)
    with pytest.raises(DriftError, match="n_outputs"):
        LinearBaseline(POOLED, 1).fit(x, torch.tensor([0, 1, 0, 1]), "binary")
    with pytest.raises(DriftError, match="n_outputs"):
        PriorBaseline(POOLED, 2).fit(x, torch.zeros(4, 3), "multilabel")
    with pytest.raises(DriftError, match="unknown task"):
        PriorBaseline(POOLED, 2).fit(x, torch.tensor([0, 1, 0, 1]), "ranking")
    with pytest.raises(DriftError, match="empty"):
        PriorBaseline(POOLED, 1).fit(x[:0], torch.zeros(0), "regression")
    with pytest.raises(DriftError, match="rows"):
        LinearBaseline(POOLED, 2).fit(x, torch.tensor([0, 1]), "binary")
    with pytest.raises(DriftError, match="NaN"):
        LinearBaseline(POOLED, 2).fit(torch.full((4, 12), float("nan")), torch.tensor([0, 1, 0, 1]), "binary")
    with pytest.raises(DriftError, match="features"):
        LinearBaseline(POOLED, 2).fit(torch.rand(4, 5), torch.tensor([0, 1, 0, 1]), "binary")

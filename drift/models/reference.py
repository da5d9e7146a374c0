"""Closed-form reference baselines for every drift matrix: what the labels alone predict, and what a linear model
on the raw inputs predicts, fitted through the same protocol (same cutoffs, same training rows) as the heads.

- `PriorBaseline`   ignores its input: the training labels' prior, fixed per cutoff.
                    binary      2 logits log(class frequency); argmax = the majority class, and a tie goes to
                                class 0 (the two logits are equal and argmax takes the first).
                    regression  the mean rating under the loss's weights w_r = n / n_r (tasks.rating_weights), which
                                is the plain mean of the distinct ratings present:
                                sum_r n_r (n/n_r) r / sum_r n_r (n/n_r) = sum_r r / |R|.
                    multilabel  each label's prevalence as a logit.
                    Frequencies are clamped to [PRIOR_EPS, 1 - PRIOR_EPS], so no output is ever inf or NaN.
- `LinearBaseline`  standardises the flattened input (mean and std of the training rows; a std under STD_FLOOR
                    counts as 1, so a constant pixel maps to 0) and fits a linear model weighted like the loss:
                    binary      logistic regression, unweighted (plain cross-entropy), exported as the 2 logits
                                [-z/2, z/2]: their softmax is sigmoid(z), the same probabilities and argmax.
                    regression  ridge regression with sample weights w_r = n / n_r (eq. 5), closed form.
                    multilabel  one logistic regression per label, positives weighted by w_c = neg / pos (eq. 3).
                    A label with no positives or no negatives among the training rows (and binary with a single
                    class present, e.g. one row) keeps its prior logits and zero weights.

Both carry `closed_form = True`: call `fit(x, targets, task_name)` once with every training row of the cutoff (x as
the heads receive it: pixels [n, C, H, W] already / 255, pooled [n, D]; any float dtype, used as float32; targets
as `Task.target_tensor` returns them), never train them by gradient (LinearBaseline's parameters are frozen).
Every tensor forward needs is a buffer or a parameter, so a state_dict round trip predicts identically with no
refit. forward returns float32 [B, n_outputs] on the module's device.

Regularisation: one keyword, `C` (default C_DEFAULT = 1e-2), scikit-learn's convention for all three tasks: the
penalty |beta|^2 / (2C) on the standardised features is added to the loss summed over the training rows
(cross-entropy; the pos-weighted BCE; half the w_r-weighted squared error, w_r rescaled to mean 1); the intercept
is not penalised. A fixed C is a fixed prior: relative to the data its pull shrinks as the cumulative cutoffs grow.
Chosen by held-out score over C in {1e-4 ... 3e-2} on MiniLM pooled vectors of State-of-the-Union paragraphs
(n = 60 ... 5,000: party accuracy, a 5-level year rating's balanced MSE, a 5-label macro AUC with rare labels), on
hard synth-portraits pixels (n = 60 ... 26,000, accuracy) and on an easy planted pixel signal (n = 40 ... 2,000):
- C = 1e-3 scored best on mid-size hard pixels, but at small n (l2 = 1/(Cn) large) it shrinks the weights until
  the intercept decides and the model collapses to the prior's majority class (0.65 accuracy at n = 100 on the
  easy signal that C = 1e-2 gets 0.97 on, 0.71 at n = 300);
- C = 1e-2 stays within 0.02 of the best C on the text metrics (0.035 balanced MSE at n = 300) and within 0.045 on
  hard pixels (0.742 against 0.782 at n = 8,000), and never collapses: the smallest worst-case loss.
  scikit-learn's default C = 1 overfits these 384-3,072 dimensional inputs (0.698 there).

Solvers, chosen by measurement; every heavy product is a float32 torch matmul, the rest float64:
- logistic: L-BFGS (torch.optim.LBFGS, strong Wolfe line search, history 20) from zero weights and the prior's
  intercept, capped at max_iter (default 200) iterations; it stops when every gradient entry of the mean loss is
  under GTOL. Z = (X - mean) / std is never materialised: Z w = X (w / std) - mean . (w / std). All labels of a
  multilabel task are fitted jointly (their losses add up and do not interact), so one matrix product serves every
  label per iteration. Works for n < D as well (each iteration costs n D). Measured alternatives: a Boehning-bound
  preconditioner (Cholesky of Z^T Z / 4n + l2 I) cut the iterations 3x but its D^2 n Gram cost more than it saved
  (5.0 s against 2.8 s at 26,000 x 3,072); scipy's L-BFGS-B driver took 70 ms per step next to torch's threads
  (its OpenBLAS competing with them); scikit-learn needs a standardised float64 copy and took 3-4 s for the
  binary fit alone.
  L-BFGS runs with one torch thread: its products are thin (memory-bound) and its elementwise ops small, and on
  the shared cores two threads made each step up to 9x slower (5,000 x 768, 7 labels: 180 ms against 20 ms).
- ridge: exact, by Cholesky: the normal equations (Zc^T S Zc + I / C) beta = Zc^T S yc (Zc centred at the weighted
  mean) when D <= n, else their dual (Zc Zc^T-kernel, n x n) form: whichever matrix is smaller. The Gram/kernel
  is accumulated in float64 from float32 products of already centred blocks (no cancellation); it is the one
  compute-bound step and runs with the caller's torch threads.
- Dense LAPACK (Cholesky, triangular solves) runs with one torch thread: on these shared 2 cores MKL's
  two-thread triangular solve took 0.64 s for a 3,072 system against 0.002 s single-threaded.
Determinism: no random numbers anywhere (the Linear layer is built with skip_init, so building a baseline does not
draw from the global RNG either); the same inputs on the same machine and thread count give bit-identical
state_dicts (BLAS, MKL and torch reductions are deterministic for a fixed thread count).

Timings of fit() with the defaults, measured on the 2 shared cores (load average ~3 from other jobs; 2 torch
threads; PriorBaseline < 1 ms everywhere); the L-BFGS iterations in brackets:
    input                        binary            regression   multilabel (7 labels)
    pixels 26,000 x 3,072        2.3-3.4 s (34)    5.4 s        20 s (200 = max_iter; 6 of the 7 labels noise)
    pooled  5,000 x   768        0.14 s (47)       0.25 s       0.52 s (78)
Pixels: 0.4 s of each is the mean/std pass; ridge is dominated by its 3,072^2 Gram (~4 s). A real multilabel
task (arXiv) comes as pooled vectors. Agreement with scikit-learn's LogisticRegression / Ridge on the same
objective: logits within ~5e-4 (L-BFGS stops at GTOL), ridge within ~1e-6 (tests/test_reference.py).
"""
from __future__ import annotations

import contextlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from drift.core.errors import DriftError

PRIOR_EPS = 1e-6     # class frequencies / prevalences are clamped to [PRIOR_EPS, 1 - PRIOR_EPS]
STD_FLOOR = 1e-6     # a feature whose training std is below this is only centred (its std taken as 1)
C_DEFAULT = 1e-2     # inverse L2 strength against the summed loss (scikit-learn's C); see the module docstring
MAX_ITER_DEFAULT = 200
GTOL = 1e-5          # L-BFGS stops when every gradient entry of the mean loss is below this ...
FTOL = 1e-9          # ... or the loss (or the step) changes by less than this (float32 products: ~1e-8 noise)
HISTORY = 20         # L-BFGS memory
BLOCK = 4096         # rows per block when accumulating Gram matrices
TASK_NAMES = ("binary", "regression", "multilabel")
f64 = torch.float64


def _check(task_name: str, targets, n_outputs: int, n_rows: int | None) -> torch.Tensor:
    """Targets -> float64 CPU tensor ([n], or [n, C] for multilabel), after checking task, head width and rows."""
    if task_name not in TASK_NAMES:
        raise DriftError(f"unknown task {task_name!r}: expected one of {', '.join(TASK_NAMES)}")
    y = torch.as_tensor(targets).detach().to("cpu", f64)
    if len(y) == 0:
        raise DriftError(f"{task_name} reference baseline: the training set is empty, nothing to fit")
    if n_rows is not None and len(y) != n_rows:
        raise DriftError(f"reference baseline: {n_rows} input rows but {len(y)} targets")
    if not torch.isfinite(y).all():
        raise DriftError(f"{task_name} reference baseline: the targets contain NaN or inf")
    if task_name == "multilabel":
        if y.dim() != 2:
            raise DriftError(f"multilabel targets must be [n, C], got shape {tuple(y.shape)}")
        want = y.shape[1]
    else:
        y = y.reshape(-1)
        want = 2 if task_name == "binary" else 1
    if want != n_outputs:
        raise DriftError(f"{task_name} reference baseline built with n_outputs={n_outputs}, "
                         f"but the targets need {want}")
    if task_name != "regression" and not ((y == 0) | (y == 1)).all():
        raise DriftError(f"{task_name} targets must be 0 or 1")
    return y


def _logit(p: torch.Tensor) -> torch.Tensor:
    p = p.clamp(PRIOR_EPS, 1 - PRIOR_EPS)
    return torch.log(p) - torch.log1p(-p)


def prior_row(y: torch.Tensor, task_name: str) -> torch.Tensor:
    """The prior's output row (float64 [n_outputs]) from checked targets (see _check)."""
    if task_name == "binary":
        freq = torch.stack([(y == 0).sum(), (y == 1).sum()]).to(f64) / len(y)
        return torch.log(freq.clamp(PRIOR_EPS, 1.0))
    if task_name == "regression":
        # sum_i w_i y_i / sum_i w_i with w_i = n / n_{y_i}: every distinct rating counts once
        return torch.unique(y).mean().reshape(1)
    return _logit(y.mean(0))


class PriorBaseline(nn.Module):
    """The training labels' prior, the same row for every input (module docstring)."""

    closed_form = True

    def __init__(self, spec, n_outputs: int):
        super().__init__()
        self.n_outputs = int(n_outputs)
        self.register_buffer("logits", torch.zeros(self.n_outputs))

    @torch.no_grad()
    def fit(self, x: torch.Tensor | None, targets: torch.Tensor, task_name: str) -> "PriorBaseline":
        y = _check(task_name, targets, self.n_outputs, None if x is None else len(x))
        self.logits.copy_(prior_row(y, task_name))
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits.unsqueeze(0).expand(len(x), -1).clone()


@contextlib.contextmanager
def _one_thread():
    """Dense LAPACK with one torch thread (see the module docstring: MKL's threaded triangular solves stall)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def _spd_solve(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """A^-1 B for a symmetric positive definite float64 A, by Cholesky."""
    with _one_thread():
        L = torch.linalg.cholesky((A + A.mT) / 2)
        return torch.linalg.solve_triangular(L.mT, torch.linalg.solve_triangular(L, B, upper=False), upper=True)


class _Standardised:
    """Z = (X - mean) / std without materialising Z: the products with X in float32, the corrections in float64."""

    def __init__(self, X: torch.Tensor, mean: torch.Tensor, std: torch.Tensor):
        self.X, self.mean, self.inv_std = X, mean, 1.0 / std
        self.n, self.d = X.shape

    def matmul(self, W: torch.Tensor) -> torch.Tensor:
        """Z @ W: W float64 [D, k] -> float64 [n, k]."""
        U = W * self.inv_std[:, None]
        return (self.X @ U.float()).to(f64) - self.mean @ U

    def rmatmul(self, R: torch.Tensor) -> torch.Tensor:
        """Z^T @ R: R float64 [n, k] -> float64 [D, k]. (R^T X)^T: twice as fast as X^T R for k > 1 (MKL)."""
        G = (R.float().mT @ self.X).mT.to(f64) - torch.outer(self.mean, R.sum(0))
        return G * self.inv_std[:, None]

    def blocks(self, shift: torch.Tensor, scale: torch.Tensor):
        """Row blocks of (Z - shift) * scale[:, None] in float32 (shift [D] and scale [n] float64)."""
        mean = (self.mean + shift / self.inv_std).float()
        inv_std = self.inv_std.float()
        for i in range(0, self.n, BLOCK):
            yield (self.X[i:i + BLOCK] - mean) * inv_std * scale[i:i + BLOCK, None].float()


def _ridge(Z: _Standardised, y: torch.Tensor, s: torch.Tensor, l2: float) -> tuple[torch.Tensor, float]:
    """Weighted ridge: minimise 1/(2n) sum_i s_i (y_i - z_i.beta - b)^2 + l2/2 |beta|^2. Returns (beta [D], b)."""
    n, d = Z.n, Z.d
    # centre at the weighted means, so the free intercept drops out: b = ybar - zbar . beta
    zbar = Z.rmatmul((s / s.sum())[:, None])[:, 0]
    ybar = float(s @ y / s.sum())
    yc = y - ybar
    if bool((yc == 0).all()):  # a single distinct rating: nothing to regress
        return torch.zeros(d, dtype=f64), ybar
    r = s.sqrt()
    if d <= n:  # primal: (Zc^T S Zc + n l2 I) beta = Zc^T S yc, a D x D system
        A = torch.zeros(d, d, dtype=f64)
        for B in Z.blocks(zbar, r):
            A += (B.mT @ B).to(f64)
        A.diagonal().add_(n * l2)
        beta = _spd_solve(A, Z.rmatmul((s * yc)[:, None]))[:, 0]   # Zc^T S yc = Z^T S yc: sum s yc = 0
    else:  # dual: beta = Bc^T c with Bc = S^(1/2) Zc and (Bc Bc^T + n l2 I) c = S^(1/2) yc, an n x n system
        B = torch.cat(list(Z.blocks(zbar, r)))
        K = (B @ B.mT).to(f64)
        K.diagonal().add_(n * l2)
        c = _spd_solve(K, (r * yc)[:, None])
        beta = (B.mT.to(f64) @ c)[:, 0]
    return beta, ybar - float(zbar @ beta)


def _logistic(Z: _Standardised, Y: torch.Tensor, S: torch.Tensor, l2: float,
              max_iter: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted logistic regressions, one per column of Y [n, k] (0/1) with sample weights S [n, k]: minimise
    sum_c [ 1/n sum_i S_ic (softplus(z_ic) - y_ic z_ic) + l2/2 |beta_c|^2 ]. Returns (W [D, k], b [k])."""
    n, d, k = Z.n, Z.d, Y.shape[1]
    b0 = torch.log((S * Y).sum(0)) - torch.log((S * (1 - Y)).sum(0))  # the weighted prior's log-odds

    def objective(theta: torch.Tensor) -> tuple[float, torch.Tensor]:
        W, b = theta[:d * k].reshape(d, k), theta[d * k:]
        logits = Z.matmul(W) + b
        loss = (S * (F.softplus(logits) - Y * logits)).sum() / n + l2 / 2 * (W * W).sum()
        R = S * (torch.sigmoid(logits) - Y) / n
        grad = torch.cat([(Z.rmatmul(R) + l2 * W).reshape(-1), R.sum(0)])
        return float(loss), grad

    theta = torch.cat([torch.zeros(d * k, dtype=f64), b0])
    opt = torch.optim.LBFGS([theta], lr=1, max_iter=max_iter, max_eval=2 * max_iter, tolerance_grad=GTOL,
                            tolerance_change=FTOL, history_size=HISTORY, line_search_fn="strong_wolfe")

    def closure():
        loss, theta.grad = objective(theta)
        return loss

    with _one_thread():  # thin products and small elementwise ops: one thread is as fast, and never stalls
        opt.step(closure)
    return theta[:d * k].reshape(d, k), theta[d * k:]


class LinearBaseline(nn.Module):
    """A linear model on the standardised, flattened input, fitted in closed form (module docstring)."""

    closed_form = True

    def __init__(self, spec, n_outputs: int, C: float = C_DEFAULT, max_iter: int = MAX_ITER_DEFAULT):
        super().__init__()
        if not C > 0 or not max_iter >= 1:
            raise DriftError(f"LinearBaseline needs C > 0 and max_iter >= 1, got C={C}, max_iter={max_iter}")
        self.n_outputs, self.C, self.max_iter = int(n_outputs), float(C), int(max_iter)
        self.n_features = int(np.prod(spec.shape))
        self.register_buffer("mean", torch.zeros(self.n_features))
        self.register_buffer("std", torch.ones(self.n_features))
        # skip_init: building a baseline draws nothing from the global RNG (the seeded heads' init stays put)
        self.head = nn.utils.skip_init(nn.Linear, self.n_features, self.n_outputs)
        with torch.no_grad():
            self.head.weight.zero_()
            self.head.bias.zero_()
        self.head.requires_grad_(False)

    @torch.no_grad()
    def fit(self, x: torch.Tensor, targets: torch.Tensor, task_name: str) -> "LinearBaseline":
        x = torch.as_tensor(x).detach()
        if x.dim() < 1 or (len(x) and x[0].numel() != self.n_features):
            raise DriftError(f"LinearBaseline expects {self.n_features} features per row, got shape {tuple(x.shape)}")
        X = x.reshape(len(x), self.n_features).to("cpu", torch.float32).contiguous()
        y = _check(task_name, targets, self.n_outputs, len(X))
        var, mean = torch.var_mean(X, 0, correction=0)
        if not (torch.isfinite(var).all() and torch.isfinite(mean).all()):  # any NaN / inf shows in its column
            raise DriftError("LinearBaseline: the inputs contain NaN or inf")
        std = var.to(f64).sqrt()
        std = torch.where(std < STD_FLOOR, torch.ones_like(std), std)
        mean = mean.to(f64)
        Z = _Standardised(X, mean, std)
        l2 = 1.0 / (self.C * len(X))  # |beta|^2 / (2C) on the summed loss = l2/2 |beta|^2 on the mean loss
        W, b = torch.zeros(self.n_features, self.n_outputs, dtype=f64), prior_row(y, task_name)

        if task_name == "regression":
            _, inverse, counts = torch.unique(y, return_inverse=True, return_counts=True)
            s = len(y) / counts[inverse].to(f64)                     # w_r = n / n_r (tasks.rating_weights)
            beta, b0 = _ridge(Z, y, s / s.mean(), l2)
            W[:, 0], b[0] = beta, b0
        elif task_name == "binary":
            if 0 < y.sum() < len(y):
                w, z0 = _logistic(Z, y[:, None], torch.ones(len(y), 1, dtype=f64), l2, self.max_iter)
                W, b = torch.cat([-w / 2, w / 2], 1), torch.cat([-z0 / 2, z0 / 2])
        else:
            pos = y.sum(0)
            fit = (pos > 0) & (pos < len(y))
            if bool(fit.any()):
                Yf = y[:, fit]
                w_c = (len(y) - pos[fit]) / pos[fit]                 # neg / pos (tasks.class_weights)
                S = torch.where(Yf == 1, w_c[None, :], torch.ones_like(Yf))
                W[:, fit], b[fit] = _logistic(Z, Yf, S, l2, self.max_iter)

        self.mean.copy_(mean)
        self.std.copy_(std)
        self.head.weight.copy_(W.mT)
        self.head.bias.copy_(b)
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(len(x), self.n_features).to(self.mean.device, torch.float32)
        return self.head((x - self.mean) / self.std)

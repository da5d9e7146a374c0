"""Closed-form reference baselines for every drift matrix, fitted through the same protocol as the heads (same
cutoffs, same training rows): `PriorBaseline`, the training labels' prior, and `LinearBaseline`,
scikit-learn's LogisticRegression / Ridge on the standardised flattened input, weighted like the loss: binary
unweighted (2 logits [-z/2, z/2]), multiclass multinomial, unweighted (its prior: the majority class), ratings
w_r = n / n_r, each label's positives neg / pos; a label (or class) with a single class present keeps its
prior logits. `TfidfBaseline` fits the same linear models on the rows' TF-IDF. Their C is a number (C_DEFAULT,
TFIDF_C: the fixed option) or CV: chosen per fit by stratified cross-validation on its own training rows
(`_cv_logistic`, `_cv_ridge`), then fitted at that C exactly as a fixed C is; the C each fit used is
`chosen_C`, kept in the state dict's metadata. All carry `closed_form = True`: `fit(x, targets, task_name)`
once with every training row of the cutoff (x as the heads receive it: pixels [n, C, H, W] already / 255 or
pooled [n, D]; targets as `Task.target_tensor` returns them), never by gradient. Their state is torch buffers
and frozen parameters, so a state_dict round trip predicts with no refit; forward returns float32 [B,
n_outputs]. No random numbers (CV's folds are shuffled by the fixed CV_SEED): a refit is bit-identical on the
same machine and thread count.
"""

from __future__ import annotations

import numbers
import warnings
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn as nn
from threadpoolctl import threadpool_limits

from drift.core.errors import DriftError

if TYPE_CHECKING:
    import scipy.sparse

PRIOR_EPS = 1e-6  # class frequencies / prevalences are clamped to [PRIOR_EPS, 1 - PRIOR_EPS]
STD_FLOOR = 1e-6  # a feature whose training std is below this is only centred (its std taken as 1)
C_DEFAULT = 1e-2  # inverse L2 strength against the summed loss (scikit-learn's C); docs/decisions.md
CV = "cv"  # a C chosen per fit by cross-validation on its training rows (train.reference_C)
C_GRID = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)  # the Cs CV compares (ridge: alpha = 1 / C); docs/decisions.md
CV_FOLDS = 5  # stratified folds; fewer when the rarest class (or rating) has fewer training rows
CV_SEED = 0  # shuffles the rows into folds: the same folds on every run
MAX_ITER_DEFAULT = 200
TOL = 1e-5  # L-BFGS stops when every gradient entry of the mean loss is below this
TASK_NAMES = ("binary", "multiclass", "regression", "multilabel")
f64 = torch.float64


def _check(task_name: str, targets, n_outputs: int, n_rows: int | None) -> torch.Tensor:
    """Targets -> float64 CPU tensor ([n], or [n, C] for multilabel), after checking task, head width and
    rows."""
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
        want = {"binary": 2, "multiclass": n_outputs}.get(task_name, 1)
    if want != n_outputs:
        raise DriftError(
            f"{task_name} reference baseline built with n_outputs={n_outputs}, but the targets need {want}"
        )
    if task_name == "multiclass":
        if not ((y >= 0) & (y < n_outputs) & (y == y.round())).all():
            raise DriftError(f"multiclass targets must be class ids 0..{n_outputs - 1}")
    elif task_name != "regression" and not ((y == 0) | (y == 1)).all():
        raise DriftError(f"{task_name} targets must be 0 or 1")
    return y


def _logit(p: torch.Tensor) -> torch.Tensor:
    p = p.clamp(PRIOR_EPS, 1 - PRIOR_EPS)
    return torch.log(p) - torch.log1p(-p)


def prior_row(y: torch.Tensor, task_name: str, n_outputs: int = 2) -> torch.Tensor:
    """The prior's output row (float64 [n_outputs]) from checked targets (see _check). binary: log class
    frequencies (a tie goes to class 0: argmax takes the first); regression: the w_r = n / n_r weighted mean,
    which is the plain mean of the distinct ratings; multilabel: each label's prevalence as a logit.
    Frequencies are clamped to [PRIOR_EPS, 1 - PRIOR_EPS], so no output is inf."""
    if task_name in ("binary", "multiclass"):  # multiclass: the majority class wins every argmax
        n_classes = 2 if task_name == "binary" else n_outputs
        freq = torch.bincount(y.to(torch.int64), minlength=n_classes).to(f64) / len(y)
        return torch.log(freq.clamp(PRIOR_EPS, 1.0))
    if task_name == "regression":
        # sum_i w_i y_i / sum_i w_i with w_i = n / n_{y_i}: every distinct rating counts once
        return torch.unique(y).mean().reshape(1)
    return _logit(y.mean(0))


class PriorBaseline(nn.Module):
    """The training labels' prior, the same row for every input (prior_row)."""

    closed_form = True
    logits: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, spec, n_outputs: int):
        super().__init__()
        self.n_outputs = int(n_outputs)
        self.register_buffer("logits", torch.zeros(self.n_outputs))

    @torch.no_grad()
    def fit(self, x: torch.Tensor | None, targets: torch.Tensor, task_name: str) -> PriorBaseline:
        y = _check(task_name, targets, self.n_outputs, None if x is None else len(x))
        self.logits.copy_(prior_row(y, task_name, self.n_outputs))
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits.unsqueeze(0).expand(len(x), -1).clone()


def _logistic(
    Z: np.ndarray, y: np.ndarray, s: np.ndarray | None, C: float, max_iter: int
) -> tuple[np.ndarray, float]:
    """L2 logistic regression on 0/1 labels y with sample weights s (None: unweighted): minimise
    C sum_i s_i (softplus(z_i) - y_i z_i) + |beta|^2 / 2, the intercept unpenalised. Returns (beta [D], b)."""
    from sklearn.exceptions import ConvergenceWarning  # lazy: scikit-learn (with scipy, pandas) only to fit
    from sklearn.linear_model import LogisticRegression

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter caps the fit on purpose
        fit = LogisticRegression(C=C, tol=TOL, max_iter=max_iter).fit(Z, y, sample_weight=s)
    return fit.coef_[0].astype(np.float64), float(fit.intercept_[0])


def _folds(strata: np.ndarray) -> list | None:
    """CV's folds over rows labelled `strata` (classes, a label's 0 / 1, or ratings): scikit-learn's
    StratifiedKFold shuffled by CV_SEED, min(CV_FOLDS, rows of the rarest stratum) of them. None when there
    are fewer than two strata or the rarest has a single row (a fold's training rows would miss it): the
    caller keeps its fixed C."""
    from sklearn.model_selection import StratifiedKFold

    _, codes, counts = np.unique(strata, return_inverse=True, return_counts=True)
    k = min(CV_FOLDS, int(counts.min()))
    if len(counts) < 2 or k < 2:
        return None
    return list(
        StratifiedKFold(k, shuffle=True, random_state=CV_SEED).split(np.zeros((len(codes), 1)), codes)
    )


def _best(Cs, scores) -> float:
    """The C of the highest mean held-out score; a tie goes to the smaller C (Cs ascending: argmax takes the
    first)."""
    return float(np.asarray(Cs)[int(np.argmax(np.asarray(scores)))])


def _cv_logistic(Z, y: np.ndarray, s: np.ndarray | None, max_iter: int, scoring: str) -> float | None:
    """The C of C_GRID whose logistic regression (as _logistic fits it: tol, max_iter, sample weights s) on
    each fold's training rows scores best on its held-out rows by `scoring` (a scikit-learn scorer: the
    matrices' metric), averaged over the folds (_folds); scikit-learn's LogisticRegressionCV, each fold's path
    warm-started from C to C. None: no folds (_folds)."""
    from sklearn.exceptions import ConvergenceWarning  # lazy: as in _logistic
    from sklearn.linear_model import LogisticRegressionCV

    folds = _folds(y)
    if folds is None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter caps the fit on purpose
        fit = LogisticRegressionCV(
            Cs=list(C_GRID),
            l1_ratios=(0.0,),
            cv=folds,
            scoring=scoring,
            tol=TOL,
            max_iter=max_iter,
            refit=False,  # the caller fits at the chosen C, exactly as a fixed C
            use_legacy_attributes=False,
        ).fit(Z, y, sample_weight=s)
    return _best(fit.Cs_, np.asarray(fit.scores_).reshape(len(folds), -1).mean(0))


def _cv_ridge(Z, y: np.ndarray, s: np.ndarray, ridge) -> float | None:
    """The C of C_GRID whose `ridge` (a scikit-learn Ridge, its alpha set to 1 / C, sample weights s) on each
    fold's training rows gives the lowest held-out squared error weighted by s (w_r = n / n_r: with folds
    stratified by rating, the fold's balanced MSE), averaged over the folds (_folds); scikit-learn's
    GridSearchCV (RidgeCV takes no solver, and its leave-one-out needs a dense Gram). None: no folds."""
    from sklearn.exceptions import ConvergenceWarning  # lazy: as in _logistic
    from sklearn.model_selection import GridSearchCV

    folds = _folds(y)
    if folds is None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search = GridSearchCV(
            ridge,
            {"alpha": [1 / C for C in C_GRID]},
            scoring="neg_mean_squared_error",
            cv=folds,
            refit=False,
            error_score="raise",
        ).fit(Z, y, sample_weight=s)
    return _best(C_GRID, search.cv_results_["mean_test_score"])


def _use(C: float | str, fixed: float, choose) -> float:
    """The C a fit uses: C itself, or under CV the choice of `choose()`, else (no folds) the reference's
    `fixed`."""
    if C != CV:
        return float(C)
    chosen = choose()
    return fixed if chosen is None else chosen


def _fit_classes(
    Z,
    y: np.ndarray,
    task_name: str,
    W: np.ndarray,
    b: np.ndarray,
    C: float | str,
    max_iter: int,
    fixed: float,
):
    """The logistic fits both linear references share, into W [D, n_outputs] and b (prior logits on entry):
    binary plain cross-entropy as 2 logits [-z/2, z/2]; multiclass multinomial, unweighted, an absent class
    keeping its prior logit; multilabel one logistic per label, positives weighted neg / pos, a label never
    (or always) seen keeping its prior. Z: dense or sparse [n, D]; y: checked targets (see _check) as numpy.
    C: a number, or CV: each fit's own C, scored as the matrices score (accuracy; a label's AUC, macro AUC
    being their mean), `fixed` where it has no folds. Returns the C used: a number, one per label
    (multilabel), None where nothing was fitted."""
    if task_name == "binary":
        if 0 < y.sum() < len(y):
            C = _use(C, fixed, partial(_cv_logistic, Z, y, None, max_iter, "accuracy"))
            beta, z0 = _logistic(Z, y, None, C, max_iter)
            W[:, 0], W[:, 1], b[:] = -beta / 2, beta / 2, (-z0 / 2, z0 / 2)
            return C
        return None
    if task_name == "multiclass":
        present = np.unique(y).astype(np.int64)
        if len(present) >= 2:
            from sklearn.exceptions import ConvergenceWarning  # lazy: as in _logistic
            from sklearn.linear_model import LogisticRegression

            C = _use(C, fixed, partial(_cv_logistic, Z, y.astype(np.int64), None, max_iter, "accuracy"))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter caps the fit on purpose
                fit = LogisticRegression(C=C, tol=TOL, max_iter=max_iter).fit(Z, y.astype(np.int64))
            coef, intercept = fit.coef_.astype(np.float64), fit.intercept_.astype(np.float64)
            if len(present) == 2:  # scikit-learn's one row: [-z/2, z/2]
                coef, intercept = (
                    np.vstack([-coef / 2, coef / 2]),
                    np.array([-intercept[0], intercept[0]]) / 2,
                )
            W[:, present], b[present] = coef.T, intercept
            return C
        return None
    pos = y.sum(0)
    used: list[float | None] = [None] * y.shape[1]
    for c in np.flatnonzero((pos > 0) & (pos < len(y))):
        w_c = (len(y) - pos[c]) / pos[c]  # neg / pos (tasks.class_weights)
        s = np.where(y[:, c] == 1, w_c, 1.0)
        # each label's AUC (macro AUC is their mean; the class weights change no AUC)
        label_C = _use(C, fixed, partial(_cv_logistic, Z, y[:, c], s, max_iter, "roc_auc"))
        W[:, c], b[c] = _logistic(Z, y[:, c], s, label_C, max_iter)
        used[c] = label_C
    return used


def _record_C(module, state_dict, prefix, local_metadata) -> None:
    """A state_dict post hook: the C setting and the C each fit used go into the state dict's metadata."""
    local_metadata["C"], local_metadata["chosen_C"] = module.C, module.chosen_C


class _Regularised(nn.Module):
    """What the two linear references share: C, a number or CV (use_C), and `chosen_C`, the C the last fit
    used (_fit_classes' return), which a state dict's metadata carries (`state._metadata[prefix]`: "C",
    "chosen_C") into the checkpoint, and a load restores. Neither is a tensor: the state dict's keys are the
    model's own."""

    C: float | str
    chosen_C: float | list[float | None] | None

    def use_C(self, C: float | str):
        """Fit with C (> 0), or with a C chosen per fit by cross-validation (CV)."""
        if C != CV and (isinstance(C, bool) or not isinstance(C, numbers.Real) or not C > 0):
            raise DriftError(f"{type(self).__name__} needs C > 0 or {CV!r}, got C={C!r}")
        self.C, self.chosen_C = (CV if C == CV else float(C)), None
        return self

    def _start_C(self, C: float | str) -> None:
        self.use_C(C)
        self.register_state_dict_post_hook(_record_C)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, *args, **kwargs):
        self.C = local_metadata.get("C", self.C)
        self.chosen_C = local_metadata.get("chosen_C")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, *args, **kwargs)


class LinearBaseline(_Regularised):
    """A linear model on the standardised, flattened input (training mean and std; a std under STD_FLOOR
    counts as 1, so a constant pixel maps to 0), fitted by scikit-learn: the penalty |beta|^2 / (2C) is added
    to the loss summed over the training rows, the intercept unpenalised. C: a number, or CV (C_DEFAULT where
    a fit has no folds)."""

    closed_form = True
    mean: torch.Tensor  # buffers (register_buffer)
    std: torch.Tensor

    def __init__(self, spec, n_outputs: int, C: float | str = C_DEFAULT, max_iter: int = MAX_ITER_DEFAULT):
        super().__init__()
        if not max_iter >= 1:
            raise DriftError(f"LinearBaseline needs max_iter >= 1, got max_iter={max_iter}")
        self._start_C(C)
        self.n_outputs, self.max_iter = int(n_outputs), int(max_iter)
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
    def fit(self, x: torch.Tensor, targets: torch.Tensor, task_name: str) -> LinearBaseline:
        x = torch.as_tensor(x).detach()
        if x.dim() < 1 or (len(x) and x[0].numel() != self.n_features):
            raise DriftError(
                f"LinearBaseline expects {self.n_features} features per row, got shape {tuple(x.shape)}"
            )
        X = x.reshape(len(x), self.n_features).to("cpu", torch.float32).contiguous()
        y = _check(task_name, targets, self.n_outputs, len(X))
        var, mean = torch.var_mean(X, 0, correction=0)
        if not (
            torch.isfinite(var).all() and torch.isfinite(mean).all()
        ):  # any NaN / inf shows in its column
            raise DriftError("LinearBaseline: the inputs contain NaN or inf")
        # numpy's sqrt is IEEE-rounded on every CPU; torch's goes through MKL's vector math, whose last bit
        # follows the CPU (docs/decisions.md)
        std = torch.from_numpy(np.sqrt(var.to(f64).numpy()))
        std = torch.where(std < STD_FLOOR, torch.ones_like(std), std)
        mean = mean.to(f64)
        # the logistic fits run in float32 (half the memory traffic of each L-BFGS pass), ridge's Cholesky in
        # float64
        Z = (
            (X.to(f64) - mean) / std if task_name == "regression" else (X - mean.float()) / std.float()
        ).numpy()
        W, b = np.zeros((self.n_features, self.n_outputs)), prior_row(y, task_name, self.n_outputs).numpy()
        y_np = y.numpy()

        # one BLAS thread: L-BFGS's products are thin and memory-bound, and on shared cores more threads stall
        with threadpool_limits(1):
            if task_name == "regression":
                _, inverse, counts = np.unique(y_np, return_inverse=True, return_counts=True)
                s = len(y_np) / counts[inverse]  # w_r = n / n_r (tasks.rating_weights)
                # sum_i s_i (y_i - z_i.beta - b)^2 + |beta|^2 / C: half of it is the loss summed plus |beta|^2
                # / (2C)
                from sklearn.linear_model import Ridge  # lazy: as in _logistic

                s = s / s.mean()
                C = _use(self.C, C_DEFAULT, partial(_cv_ridge, Z, y_np, s, Ridge(solver="cholesky")))
                fit = Ridge(alpha=1 / C, solver="cholesky").fit(Z, y_np, sample_weight=s)
                W[:, 0], b[0] = fit.coef_, fit.intercept_
                chosen = C
            else:
                chosen = _fit_classes(Z, y_np, task_name, W, b, self.C, self.max_iter, C_DEFAULT)

        self.mean.copy_(mean)
        self.std.copy_(std)
        self.head.weight.copy_(torch.from_numpy(W.T))
        self.head.bias.copy_(torch.from_numpy(b))
        self.chosen_C = chosen
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(len(x), self.n_features).to(self.mean.device, torch.float32)
        return self.head((x - self.mean) / self.std)


# ---------------------------------------------------------------- the lexical reference: TF-IDF on the raw text

HASH_BITS = 20  # each analyzer hashes its terms into 2^20 columns (scikit-learn's HashingVectorizer)
TFIDF_MAX_FEATURES = (
    100_000  # terms kept per cutoff: the most frequent of its training rows; docs/decisions.md
)
TFIDF_C = 1.0  # scikit-learn's default C (alpha = 1 / C for ridge): TF-IDF rows have unit norm
TFIDF_MAX_ITER = 100  # L-BFGS passes at most: each is one sweep of the sparse rows (docs/decisions.md)
TEXT_BATCH = 4096  # rows analysed at a time (memory follows it, not the dataset)


def text_counts(texts) -> scipy.sparse.csr_matrix:
    """The rows' term counts, CSR int32 [n, 2 * 2^HASH_BITS]: word 1-2-grams, then character 3-5-grams within
    words, lowercased, each hashed by scikit-learn's HashingVectorizer (no sign flip). A row without text
    (None) has no terms. Computed once per dataset: every cutoff's TF-IDF is a column selection and a
    weighting of it."""
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import HashingVectorizer

    common = {"n_features": 2**HASH_BITS, "alternate_sign": False, "norm": None, "dtype": np.float32}
    word = HashingVectorizer(analyzer="word", ngram_range=(1, 2), **common)
    char = HashingVectorizer(analyzer="char_wb", ngram_range=(3, 5), **common)
    texts = [t if isinstance(t, str) else "" for t in texts]
    blocks = [
        sp.hstack(
            [word.transform(texts[i : i + TEXT_BATCH]), char.transform(texts[i : i + TEXT_BATCH])],
            format="csr",
        )
        for i in range(0, len(texts), TEXT_BATCH)
    ]
    out = (
        sp.vstack(blocks, format="csr")
        if blocks
        else sp.csr_matrix((0, 2 ** (HASH_BITS + 1)), dtype=np.float32)
    )
    return out


class TfidfBaseline(_Regularised):
    """A lexical reference on the rows' raw text: TF-IDF over hashed word 1-2-grams and character 3-5-grams
    (text_counts), its vocabulary the TFIDF_MAX_FEATURES terms in most training rows of the cutoff (in at
    least 2; ties to the lower column), idf smoothed and tf sublinear as scikit-learn's TfidfTransformer, rows
    of unit norm; then a linear model fitted in closed form like LinearBaseline's: logistic regression
    (binary: 2 logits [-z/2, z/2]; multiclass multinomial; multilabel one vs rest, each label weighted neg /
    pos) or ridge with w_r = n / n_r (ratings), C a number (TFIDF_C by default) or CV (TFIDF_C where a fit has
    no folds). Input kind "text": fit(counts, targets, task_name) and forward(counts) take text_counts rows
    (CSR). Its vocabulary, idf and weights are buffers sized by the fit (a state_dict loads into a fresh model
    whatever their size)."""

    closed_form = True

    def __init__(
        self,
        spec,
        n_outputs: int,
        max_features: int = TFIDF_MAX_FEATURES,
        C: float | str = TFIDF_C,
        max_iter: int = TFIDF_MAX_ITER,
    ):
        super().__init__()
        if min(max_features, max_iter) < 1:
            raise DriftError(
                f"TfidfBaseline needs max_features >= 1 and max_iter >= 1, got max_features={max_features}, "
                f"max_iter={max_iter}"
            )
        self._start_C(C)
        self.n_outputs, self.max_iter, self.max_features = int(n_outputs), int(max_iter), int(max_features)
        self.register_buffer("columns", torch.zeros(0, dtype=torch.int64))  # the vocabulary: hashed columns
        self.register_buffer("idf", torch.zeros(0, dtype=torch.float32))
        self.register_buffer("weight", torch.zeros(self.n_outputs, 0, dtype=torch.float32))
        self.register_buffer("bias", torch.zeros(self.n_outputs, dtype=torch.float64))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, *args, **kwargs):
        for name in ("columns", "idf", "weight"):
            if prefix + name in state_dict:  # sized by the fit: take the saved shape before the copy
                saved = state_dict[prefix + name]
                setattr(self, name, torch.zeros(saved.shape, dtype=saved.dtype))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, *args, **kwargs)

    def _tfidf(self, counts):
        """[n, V] CSR float32: sublinear tf times idf over the vocabulary's columns, each row of unit norm."""
        from sklearn.preprocessing import normalize

        X = counts[:, self.columns.numpy()].astype(np.float32)
        X.data = np.log(X.data) + 1  # sublinear tf: 1 + ln(count)
        X = X.multiply(self.idf.numpy()[None, :]).tocsr()
        return normalize(X, norm="l2", copy=False)

    @torch.no_grad()
    def fit(self, counts, targets: torch.Tensor, task_name: str) -> TfidfBaseline:
        y = _check(task_name, targets, self.n_outputs, counts.shape[0])
        b = prior_row(y, task_name, self.n_outputs).numpy()
        n = counts.shape[0]
        df = np.asarray((counts > 0).sum(0)).ravel()
        candidates = np.flatnonzero(df >= 2)
        keep = candidates[np.argsort(-df[candidates], kind="stable")[: self.max_features]]
        self.columns = torch.from_numpy(np.sort(keep).astype(np.int64))
        self.idf = torch.from_numpy((np.log((1 + n) / (1 + df[self.columns.numpy()])) + 1).astype(np.float32))
        W = np.zeros((len(keep), self.n_outputs))
        y_np = y.numpy()
        chosen = None
        if len(keep):
            Z = self._tfidf(counts)
            from sklearn.exceptions import ConvergenceWarning  # lazy: as in _logistic
            from sklearn.linear_model import Ridge

            with threadpool_limits(1), warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter caps the fit on purpose
                if task_name == "regression":
                    _, inverse, n_r = np.unique(y_np, return_inverse=True, return_counts=True)
                    s = len(y_np) / n_r[inverse]  # w_r = n / n_r (tasks.rating_weights)
                    s = s / s.mean()
                    C = _use(self.C, TFIDF_C, partial(_cv_ridge, Z, y_np, s, Ridge(solver="lsqr", tol=1e-4)))
                    fit = Ridge(alpha=1 / C, solver="lsqr", tol=1e-4).fit(Z, y_np, sample_weight=s)
                    W[:, 0], b[0] = fit.coef_, fit.intercept_
                    chosen = C
                else:
                    chosen = _fit_classes(Z, y_np, task_name, W, b, self.C, self.max_iter, TFIDF_C)
        self.weight = torch.from_numpy(np.ascontiguousarray(W.T, dtype=np.float32))
        self.bias = torch.from_numpy(b.astype(np.float64))
        self.chosen_C = chosen
        return self

    def forward(self, counts) -> torch.Tensor:
        if not len(self.columns):  # no vocabulary: the prior for every row
            return torch.from_numpy(np.tile(self.bias.numpy(), (counts.shape[0], 1)).astype(np.float32))
        out = self._tfidf(counts) @ self.weight.numpy().T.astype(np.float64) + self.bias.numpy()
        return torch.from_numpy(np.asarray(out, dtype=np.float32))

"""Closed-form reference baselines for every drift matrix, fitted through the same protocol as the heads (same
cutoffs, same training rows): `PriorBaseline`, the training labels' prior, and `LinearBaseline`, scikit-learn's
LogisticRegression / Ridge (C = 1e-2) on the standardised flattened input, weighted like the loss: binary unweighted
(2 logits [-z/2, z/2]), multiclass multinomial, unweighted (its prior: the majority class), ratings w_r = n / n_r,
each label's positives neg / pos; a label (or class) with a single class present keeps its prior logits. Both
carry `closed_form = True`: `fit(x, targets, task_name)` once with every training row of the cutoff (x as the
heads receive it: pixels [n, C, H, W] already / 255 or pooled [n, D]; targets as `Task.target_tensor` returns
them), never by gradient. Their state is torch buffers and frozen parameters, so a
state_dict round trip predicts with no refit; forward returns float32 [B, n_outputs]. No random numbers: a refit is
bit-identical on the same machine and thread count.
"""
from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.nn as nn
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, Ridge
from threadpoolctl import threadpool_limits

from drift.core.errors import DriftError

PRIOR_EPS = 1e-6     # class frequencies / prevalences are clamped to [PRIOR_EPS, 1 - PRIOR_EPS]
STD_FLOOR = 1e-6     # a feature whose training std is below this is only centred (its std taken as 1)
C_DEFAULT = 1e-2     # inverse L2 strength against the summed loss (scikit-learn's C); docs/decisions.md
MAX_ITER_DEFAULT = 200
TOL = 1e-5           # L-BFGS stops when every gradient entry of the mean loss is below this
TASK_NAMES = ("binary", "multiclass", "regression", "multilabel")
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
        want = {"binary": 2, "multiclass": n_outputs}.get(task_name, 1)
    if want != n_outputs:
        raise DriftError(f"{task_name} reference baseline built with n_outputs={n_outputs}, "
                         f"but the targets need {want}")
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
    frequencies (a tie goes to class 0: argmax takes the first); regression: the w_r = n / n_r weighted mean, which is
    the plain mean of the distinct ratings; multilabel: each label's prevalence as a logit. Frequencies are clamped
    to [PRIOR_EPS, 1 - PRIOR_EPS], so no output is inf."""
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

    def __init__(self, spec, n_outputs: int):
        super().__init__()
        self.n_outputs = int(n_outputs)
        self.register_buffer("logits", torch.zeros(self.n_outputs))

    @torch.no_grad()
    def fit(self, x: torch.Tensor | None, targets: torch.Tensor, task_name: str) -> "PriorBaseline":
        y = _check(task_name, targets, self.n_outputs, None if x is None else len(x))
        self.logits.copy_(prior_row(y, task_name, self.n_outputs))
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits.unsqueeze(0).expand(len(x), -1).clone()


def _logistic(Z: np.ndarray, y: np.ndarray, s: np.ndarray | None, C: float,
              max_iter: int) -> tuple[np.ndarray, float]:
    """L2 logistic regression on 0/1 labels y with sample weights s (None: unweighted): minimise
    C sum_i s_i (softplus(z_i) - y_i z_i) + |beta|^2 / 2, the intercept unpenalised. Returns (beta [D], b)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)   # max_iter caps the fit on purpose
        fit = LogisticRegression(C=C, tol=TOL, max_iter=max_iter).fit(Z, y, sample_weight=s)
    return fit.coef_[0].astype(np.float64), float(fit.intercept_[0])


class LinearBaseline(nn.Module):
    """A linear model on the standardised, flattened input (training mean and std; a std under STD_FLOOR counts
    as 1, so a constant pixel maps to 0), fitted by scikit-learn: the penalty |beta|^2 / (2C) is added to the loss
    summed over the training rows, the intercept unpenalised."""

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
        # the logistic fits run in float32 (half the memory traffic of each L-BFGS pass), ridge's Cholesky in float64
        Z = ((X.to(f64) - mean) / std if task_name == "regression" else (X - mean.float()) / std.float()).numpy()
        W, b = np.zeros((self.n_features, self.n_outputs)), prior_row(y, task_name, self.n_outputs).numpy()
        y = y.numpy()

        # one BLAS thread: L-BFGS's products are thin and memory-bound, and on shared cores more threads stall
        with threadpool_limits(1):
            if task_name == "regression":
                _, inverse, counts = np.unique(y, return_inverse=True, return_counts=True)
                s = len(y) / counts[inverse]                                  # w_r = n / n_r (tasks.rating_weights)
                # sum_i s_i (y_i - z_i.beta - b)^2 + |beta|^2 / C: half of it is the loss summed plus |beta|^2 / (2C)
                fit = Ridge(alpha=1 / self.C, solver="cholesky").fit(Z, y, sample_weight=s / s.mean())
                W[:, 0], b[0] = fit.coef_, fit.intercept_
            elif task_name == "binary":
                if 0 < y.sum() < len(y):                                      # plain cross-entropy, unweighted
                    beta, z0 = _logistic(Z, y, None, self.C, self.max_iter)
                    W[:, 0], W[:, 1], b[:] = -beta / 2, beta / 2, (-z0 / 2, z0 / 2)
            elif task_name == "multiclass":
                present = np.unique(y).astype(np.int64)
                if len(present) >= 2:                                         # multinomial, unweighted; an absent
                    with warnings.catch_warnings():                           # class keeps its prior logit
                        warnings.simplefilter("ignore", ConvergenceWarning)
                        fit = LogisticRegression(C=self.C, tol=TOL, max_iter=self.max_iter).fit(Z, y.astype(np.int64))
                    coef, intercept = fit.coef_.astype(np.float64), fit.intercept_.astype(np.float64)
                    if len(present) == 2:                                     # scikit-learn's one row: [-z/2, z/2]
                        coef, intercept = np.vstack([-coef / 2, coef / 2]), np.array([-intercept[0], intercept[0]]) / 2
                    W[:, present], b[present] = coef.T, intercept
            else:
                pos = y.sum(0)
                for c in np.flatnonzero((pos > 0) & (pos < len(y))):         # a label never (or always) seen: its prior
                    w_c = (len(y) - pos[c]) / pos[c]                          # neg / pos (tasks.class_weights)
                    W[:, c], b[c] = _logistic(Z, y[:, c], np.where(y[:, c] == 1, w_c, 1.0), self.C, self.max_iter)

        self.mean.copy_(mean)
        self.std.copy_(std)
        self.head.weight.copy_(torch.from_numpy(W.T))
        self.head.bias.copy_(torch.from_numpy(b))
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(len(x), self.n_features).to(self.mean.device, torch.float32)
        return self.head((x - self.mean) / self.std)


# ---------------------------------------------------------------- the lexical reference: TF-IDF on the raw text

TFIDF_WORD_FEATURES = 40_000   # word 1-2-grams kept (the most frequent in the cutoff's training rows)
TFIDF_CHAR_FEATURES = 60_000   # character 2-5-grams within words kept; docs/decisions.md has the cost
TFIDF_C = 1.0                  # scikit-learn's default C (alpha = 1 / C for ridge): TF-IDF rows have unit norm
TFIDF_MAX_ITER = 300
_VOCAB_SEP = "\n"              # terms never hold a newline: both analyzers split on whitespace first


def _vectorizers(word: int, char: int, vocabularies=(None, None)):
    """The word and character TfidfVectorizers (sublinear tf, l2 rows; a term must occur in 2 training rows)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    common = {"sublinear_tf": True, "dtype": np.float32, "lowercase": True}
    word_vocab, char_vocab = vocabularies
    return (TfidfVectorizer(analyzer="word", ngram_range=(1, 2), max_features=word, vocabulary=word_vocab,
                            min_df=1 if word_vocab else 2, **common),
            TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), max_features=char, vocabulary=char_vocab,
                            min_df=1 if char_vocab else 2, **common))


def _encode_terms(terms) -> torch.Tensor:
    """A vocabulary as one uint8 buffer: its terms in order, UTF-8, newline-separated."""
    data = _VOCAB_SEP.join(terms).encode("utf-8")
    return torch.tensor(np.frombuffer(data, np.uint8).copy()) if data else torch.zeros(0, dtype=torch.uint8)


def _decode_terms(buffer: torch.Tensor) -> list[str]:
    return bytes(buffer.numpy()).decode("utf-8").split(_VOCAB_SEP) if buffer.numel() else []


class TfidfBaseline(nn.Module):
    """A lexical reference on the rows' raw text: scikit-learn's TF-IDF of word 1-2-grams and character 2-5-grams
    within words (each vocabulary the most frequent terms of the cutoff's training rows, at most
    TFIDF_WORD_FEATURES + TFIDF_CHAR_FEATURES; idf from those rows), then a linear model fitted in closed form like
    LinearBaseline's: logistic regression (binary: 2 logits [-z/2, z/2]; multiclass multinomial; multilabel one
    vs rest, each label weighted neg / pos) or ridge with w_r = n / n_r (ratings), C = TFIDF_C. Its input kind is
    "text": fit(texts, targets, task_name) and forward(texts) take a sequence of strings. The vocabularies, idf
    and weights are buffers sized by the fit (a state_dict loads into a fresh model whatever their size)."""

    closed_form = True

    def __init__(self, spec, n_outputs: int, word_features: int = TFIDF_WORD_FEATURES,
                 char_features: int = TFIDF_CHAR_FEATURES, C: float = TFIDF_C, max_iter: int = TFIDF_MAX_ITER):
        super().__init__()
        if not C > 0 or min(word_features, char_features, max_iter) < 1:
            raise DriftError(f"TfidfBaseline needs C > 0 and positive feature counts and max_iter, got C={C}, "
                             f"word_features={word_features}, char_features={char_features}, max_iter={max_iter}")
        self.n_outputs, self.C, self.max_iter = int(n_outputs), float(C), int(max_iter)
        self.word_features, self.char_features = int(word_features), int(char_features)
        for name in ("word_vocab", "char_vocab"):
            self.register_buffer(name, torch.zeros(0, dtype=torch.uint8))
        for name in ("word_idf", "char_idf"):
            self.register_buffer(name, torch.zeros(0, dtype=torch.float32))
        self.register_buffer("weight", torch.zeros(self.n_outputs, 0, dtype=torch.float32))
        self.register_buffer("bias", torch.zeros(self.n_outputs, dtype=torch.float64))
        self._transform = None

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in ("word_vocab", "char_vocab", "word_idf", "char_idf", "weight"):
            if prefix + name in state_dict:   # sized by the fit: take the saved shape before the copy
                saved = state_dict[prefix + name]
                setattr(self, name, torch.zeros(saved.shape, dtype=saved.dtype))
        self._transform = None
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def _features(self, texts):
        """[n, V] scipy CSR float32: the two TF-IDF blocks side by side, from the buffers."""
        import scipy.sparse as sp
        if self._transform is None:
            vocabs = (_decode_terms(self.word_vocab), _decode_terms(self.char_vocab))
            vectorizers = _vectorizers(self.word_features, self.char_features,
                                       tuple({t: i for i, t in enumerate(v)} or None for v in vocabs))
            for vectorizer, vocab, idf in zip(vectorizers, vocabs, (self.word_idf, self.char_idf)):
                if vocab:
                    vectorizer.idf_ = idf.numpy().astype(np.float64)
            self._transform = [(v, bool(vocab)) for v, vocab in zip(vectorizers, vocabs)]
        blocks = [v.transform(texts) for v, has in self._transform if has]
        return sp.hstack(blocks, format="csr", dtype=np.float32) if blocks else sp.csr_matrix((len(texts), 0), dtype=np.float32)

    @torch.no_grad()
    def fit(self, texts, targets: torch.Tensor, task_name: str) -> "TfidfBaseline":
        import scipy.sparse as sp
        texts = [t if isinstance(t, str) else "" for t in texts]
        y = _check(task_name, targets, self.n_outputs, len(texts))
        b = prior_row(y, task_name, self.n_outputs).numpy()
        word, char = _vectorizers(self.word_features, self.char_features)
        blocks, vocabs, idfs = [], [], []
        for vectorizer in (word, char):
            try:
                blocks.append(vectorizer.fit_transform(texts))
                vocabs.append(vectorizer.get_feature_names_out().tolist())
                idfs.append(torch.from_numpy(vectorizer.idf_.astype(np.float32)))
            except ValueError:        # no term in 2 training rows (a tiny or empty text set): no block
                vocabs.append([])
                idfs.append(torch.zeros(0, dtype=torch.float32))
        Z = sp.hstack(blocks, format="csr", dtype=np.float32) if blocks else None
        W = np.zeros((0 if Z is None else Z.shape[1], self.n_outputs))
        y = y.numpy()
        if Z is not None and Z.shape[1]:
            with threadpool_limits(1), warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)      # max_iter caps the fit on purpose
                if task_name == "regression":
                    _, inverse, counts = np.unique(y, return_inverse=True, return_counts=True)
                    s = len(y) / counts[inverse]                             # w_r = n / n_r (tasks.rating_weights)
                    fit = Ridge(alpha=1 / self.C, solver="sparse_cg", tol=1e-6).fit(Z, y, sample_weight=s / s.mean())
                    W[:, 0], b[0] = fit.coef_, fit.intercept_
                elif task_name == "binary":
                    if 0 < y.sum() < len(y):
                        beta, z0 = _logistic(Z, y, None, self.C, self.max_iter)
                        W[:, 0], W[:, 1], b[:] = -beta / 2, beta / 2, (-z0 / 2, z0 / 2)
                elif task_name == "multiclass":
                    present = np.unique(y).astype(np.int64)
                    if len(present) >= 2:                                    # an absent class keeps its prior logit
                        fit = LogisticRegression(C=self.C, tol=TOL, max_iter=self.max_iter).fit(Z, y.astype(np.int64))
                        coef, intercept = fit.coef_.astype(np.float64), fit.intercept_.astype(np.float64)
                        if len(present) == 2:                                # scikit-learn's one row: [-z/2, z/2]
                            coef = np.vstack([-coef / 2, coef / 2])
                            intercept = np.array([-intercept[0], intercept[0]]) / 2
                        W[:, present], b[present] = coef.T, intercept
                else:
                    pos = y.sum(0)
                    for c in np.flatnonzero((pos > 0) & (pos < len(y))):    # a label never (or always) seen: its prior
                        w_c = (len(y) - pos[c]) / pos[c]                      # neg / pos (tasks.class_weights)
                        W[:, c], b[c] = _logistic(Z, y[:, c], np.where(y[:, c] == 1, w_c, 1.0), self.C, self.max_iter)
        self.word_vocab, self.char_vocab = _encode_terms(vocabs[0]), _encode_terms(vocabs[1])
        self.word_idf, self.char_idf = idfs
        self.weight = torch.from_numpy(np.ascontiguousarray(W.T, dtype=np.float32))
        self.bias = torch.from_numpy(b.astype(np.float64))
        self._transform = None
        return self

    def forward(self, texts) -> torch.Tensor:
        texts = [t if isinstance(t, str) else "" for t in texts]
        Z = self._features(texts)
        out = Z @ self.weight.numpy().T.astype(np.float64) + self.bias.numpy()
        return torch.from_numpy(np.asarray(out, dtype=np.float32))

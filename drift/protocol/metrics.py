"""Per-cell performance metrics of the drift matrix (paper Section 4.4 and Appendix B).

Each metric takes numpy arrays (true labels, raw model outputs) and returns a python float, or None when the
cell cannot be scored (no examples; for macro AUC no class with both positives and negatives): such a cell
stays empty in the drift matrix, never zero. accuracy (Yearbook, B.1; higher is better): the share of argmax
predictions equal to the label. balanced_mse (Amazon Reviews, B.2; lower is better): the MSE within each
rating present, averaged equally over them. macro_auc (arXiv, B.3; higher is better): ROC AUC per class,
averaged over the classes the slice can score. macro_f1 (multiclass, reported beside accuracy; higher is
better): F1 per class present in the labels or the predictions, averaged equally. NaN or inf outputs (a
diverged model) raise a DriftError. `empty_score` is what a cell with no rows reads under each rule of
`evaluate.empty_cell`."""

import numpy as np

from drift.core.errors import DriftError


def _finite(x: np.ndarray, what: str) -> np.ndarray:
    if not np.all(np.isfinite(x)):
        raise DriftError(f"{what} contain NaN or inf (did training diverge? try a lower learning rate)")
    return x


def accuracy(y, logits) -> float | None:
    """Fraction of examples whose argmax logit equals the label (B.1). y: int [n]; logits: [n, C]."""
    y = np.asarray(y).reshape(-1)
    logits = np.asarray(logits, dtype=np.float64)
    if len(y) == 0:
        return None
    logits = _finite(logits.reshape(len(y), -1), "model outputs")
    if logits.shape[1] < 2:
        raise ValueError(f"accuracy needs one logit per class (at least 2 columns), got shape {logits.shape}")
    return float(np.mean(logits.argmax(axis=1) == y))


def balanced_mse(y, pred) -> float | None:
    """Balanced MSE (B.2): MSE_r within each rating r present in y, then the plain mean over those ratings.

    MSE_bal = 1/|R| sum_{r in R} MSE_r, with R = {r : |S_r| > 0}, so a rating absent from the slice does not
    count. y: ratings [n]; pred: [n] or [n, 1].
    """
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    pred = np.asarray(pred, dtype=np.float64).reshape(-1)
    if len(y) == 0:
        return None
    if len(pred) != len(y):
        raise ValueError(f"balanced_mse: {len(y)} labels but {len(pred)} predictions")
    pred = _finite(pred, "model outputs")
    levels, inverse = np.unique(y, return_inverse=True)
    sq = (y - pred) ** 2
    per_level = np.bincount(inverse, weights=sq) / np.bincount(inverse)
    return float(per_level.mean())


def _ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of x, ties given the average of the ranks they span (like scipy.stats.rankdata)."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    last = np.cumsum(counts)  # rank of the last member of each group of equal values
    average = last - (counts - 1) / 2.0  # mean of ranks last-count+1 .. last
    return average[inverse.reshape(-1)]


def binary_auc(y, scores) -> float | None:
    """ROC AUC of one class by the rank-sum (Mann-Whitney) formula: P(score of a positive > score of a
    negative), ties counting one half. None if y holds only positives or only negatives."""
    y = np.asarray(y).reshape(-1) != 0
    n_pos = int(y.sum())
    n_neg = len(y) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    r = _ranks(_finite(np.asarray(scores, dtype=np.float64).reshape(-1), "model outputs"))
    return float((r[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def macro_auc(Y, scores) -> float | None:
    """Macro ROC AUC (B.3): AUC_c per class, uniform mean over the classes that have both positives and
    negatives in Y; a class absent from the slice (or present in every example) is skipped. None if no class
    can be scored. Y: 0/1 [n, C]; scores: [n, C] (logits or probabilities: AUC only uses their order)."""
    Y = np.asarray(Y)
    scores = np.asarray(scores, dtype=np.float64)
    if Y.ndim == 1:
        Y = Y.reshape(-1, 1)
    if len(Y) == 0:
        return None
    scores = _finite(scores.reshape(Y.shape), "model outputs")
    aucs = [binary_auc(Y[:, c], scores[:, c]) for c in range(Y.shape[1])]
    scored = [a for a in aucs if a is not None]
    if not scored:
        return None
    return float(np.mean(scored))


def macro_f1(y, logits) -> float | None:
    """Macro F1 of the argmax predictions: 2 tp / (2 tp + fp + fn) per class that occurs in y or in the
    predictions, the plain mean over them (scikit-learn's f1_score(average="macro") on those labels)."""
    y = np.asarray(y).reshape(-1).astype(np.int64)
    if len(y) == 0:
        return None
    logits = _finite(np.asarray(logits, dtype=np.float64).reshape(len(y), -1), "model outputs")
    pred = logits.argmax(axis=1)
    classes = np.union1d(y, pred)
    tp = np.array([np.sum((pred == c) & (y == c)) for c in classes], dtype=np.float64)
    fp = np.array([np.sum((pred == c) & (y != c)) for c in classes], dtype=np.float64)
    fn = np.array([np.sum((pred != c) & (y == c)) for c in classes], dtype=np.float64)
    return float(np.mean(2 * tp / (2 * tp + fp + fn)))


METRICS = {"accuracy": accuracy, "balanced_mse": balanced_mse, "macro_auc": macro_auc, "macro_f1": macro_f1}


EMPTY_CELLS = ("empty", "zero")  # evaluate.empty_cell


def empty_score(metric: str, empty_cell: str) -> float | None:
    """What a cell with no rows scores: None (empty) under "empty"; under "zero", 0.0 for accuracy and
    macro-F1, as the authors' code scores an empty set, and still None for balanced MSE and macro AUC, whose
    empty score is NaN in their code too (left out of their logs): a 0.0 there would read as a perfect MSE or
    an AUC below chance."""
    if empty_cell not in EMPTY_CELLS:
        raise DriftError(f"evaluate.empty_cell is {empty_cell!r}: write one of {', '.join(EMPTY_CELLS)}")
    if metric not in METRICS:
        raise DriftError(f"unknown metric {metric!r}: write one of {', '.join(METRICS)}")
    if empty_cell == "zero" and metric in ("accuracy", "macro_f1"):
        return 0.0
    return None

"""Label-free estimates of the drift matrix: what M[i][j] would read, from f_i's outputs on slice j and the
labels of the training periods only.

Cutoff i calibrates on its source, the held-out test rows of the usable slices <= i (`calibrate`, once per
checkpoint and source); a cell is estimated on the rows M scores it on (drift.protocol.matrix.scored_cells),
without their labels (`estimate_cell`); the evaluate stage caches both (drift/store/cells.py). binary and
multiclass (accuracy), on the largest softmax probability: atc, Average Thresholded Confidence (Garg et al.
2022), and doc, Difference of Confidences (Guillory et al. 2021), clipped to [0, 1]. multilabel (macro AUC):
doc on the AUC the model expects of itself, anchored on the source's true macro AUC. regression (balanced
MSE): not estimated; `estimated_matrix` returns no method for it, and the report says so."""

from __future__ import annotations

import numpy as np

from drift.protocol.matrix import scored_cells

METHODS = {"binary": ("atc", "doc"), "multiclass": ("atc", "doc"), "multilabel": ("doc",), "regression": ()}


def softmax_confidence(logits: np.ndarray) -> np.ndarray:
    """The larger softmax probability of each row of [n, C] logits."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return 1.0 / e.sum(axis=1)  # exp(max - max) / sum


def atc_threshold(confidence: np.ndarray, accuracy: float) -> tuple[float, float]:
    """(t, w): share(confidence > t) + w * share(confidence == t) equals `accuracy` exactly on these rows."""
    s = np.sort(np.asarray(confidence, dtype=np.float64))[::-1]
    k = accuracy * len(s)  # how many rows should count as above the threshold
    t = s[max(int(np.ceil(k)) - 1, 0)]
    above, tied = np.sum(s > t), np.sum(s == t)
    return float(t), float(np.clip((k - above) / tied, 0.0, 1.0))


def atc_estimate(confidence: np.ndarray, threshold: tuple[float, float]) -> float:
    t, w = threshold
    return float((np.sum(confidence > t) + w * np.sum(confidence == t)) / len(confidence))


def expected_auc(scores: np.ndarray, probability: np.ndarray) -> float | None:
    """The AUC of one class if row a were positive with probability p_a (independently): the expected number
    of correctly ordered positive-negative pairs over the expected number of pairs, ties counting one half.
    O(n log n) by cumulative sums over the rows sorted by score."""
    scores, p = np.asarray(scores, dtype=np.float64), np.asarray(probability, dtype=np.float64)
    q = 1.0 - p
    levels, group = np.unique(scores, return_inverse=True)
    negatives_in = np.bincount(group, weights=q, minlength=len(levels))  # expected negatives per score level
    below = np.concatenate([[0.0], np.cumsum(negatives_in)[:-1]])  # ... strictly below each level
    ordered = np.sum(
        p * (below[group] + 0.5 * (negatives_in[group] - q))
    )  # a row is never paired with itself
    pairs = np.sum(p * (q.sum() - q))
    return float(ordered / pairs) if pairs > 0 else None


def expected_macro_auc(logits: np.ndarray, classes: np.ndarray) -> float | None:
    z = np.asarray(logits, dtype=np.float64)
    p = 1.0 / (1.0 + np.exp(-z))
    values = [expected_auc(z[:, c], p[:, c]) for c in classes]
    defined = [v for v in values if v is not None]
    return float(np.mean(defined)) if defined else None


def source_rows(i: int, slices: np.ndarray, splits: np.ndarray, usable: list[bool]) -> np.ndarray:
    """The held-out test rows of the usable slices <= i: what cutoff i calibrates on."""
    usable_slice = np.asarray(usable, dtype=bool)[slices]
    return np.flatnonzero((slices <= i) & (splits == "test") & usable_slice)


def calibrate(task, source_outputs: np.ndarray, source_labels: np.ndarray) -> dict | None:
    """What cutoff i's estimates need from its source rows (outputs and labels), as plain numbers; None when
    the task has no method or the source cannot be scored."""
    if not METHODS[task.name] or not len(source_outputs):
        return None
    true_source = task.score(source_labels, source_outputs)
    if true_source is None:
        return None
    if task.name in ("binary", "multiclass"):
        confidence = softmax_confidence(source_outputs)
        threshold = atc_threshold(confidence, true_source)
        return {
            "true": float(true_source),
            "threshold": [float(t) for t in threshold],
            "mean_confidence": float(confidence.mean()),
        }
    y = np.asarray(source_labels).reshape(len(source_labels), -1)
    classes = np.flatnonzero((y.min(0) == 0) & (y.max(0) == 1))  # the classes the source AUC scored
    expected = expected_macro_auc(source_outputs, classes)
    return {
        "true": float(true_source),
        "classes": classes.tolist(),
        "expected": None if expected is None else float(expected),
    }


def estimate_cell(task, calibration: dict, outputs: np.ndarray) -> dict[str, float]:
    """{method: estimate} of one cell from the model's outputs on its rows (no labels)."""
    if task.name in ("binary", "multiclass"):
        confidence = softmax_confidence(outputs)
        return {
            "atc": float(atc_estimate(confidence, tuple(calibration["threshold"]))),
            "doc": float(
                np.clip(calibration["true"] + confidence.mean() - calibration["mean_confidence"], 0, 1)
            ),
        }
    expected = expected_macro_auc(outputs, np.asarray(calibration["classes"], dtype=int))
    if calibration["expected"] is None or expected is None:
        return {}
    return {"doc": float(np.clip(calibration["true"] + expected - calibration["expected"], 0, 1))}


def estimated_matrix(
    outputs: dict[int, np.ndarray | None],
    labels: np.ndarray,
    slices: np.ndarray,
    splits: np.ndarray,
    usable: list[bool],
    task,
    known: dict | None = None,
    calibrations: dict | None = None,
) -> dict[str, np.ndarray]:
    """{method: K x K estimate of M (nan = empty)} over the cells drift_matrix scores, reading labels only on
    each cutoff's source rows. `known` {(i, j): {method: value}} and `calibrations` {i: calibration} hold what
    was computed before (the cell cache), taken as they are. A cutoff whose source cannot be scored keeps an
    empty row. Regression: {}."""
    methods = METHODS[task.name]
    known, calibrations = known or {}, calibrations or {}
    estimates = {m: np.full((len(usable), len(usable)), np.nan) for m in methods}
    labels = np.asarray(labels)
    for i, out in outputs.items() if methods else ():
        cells = list(scored_cells(i, usable, slices, splits))
        if any((i, j) not in known for j, _ in cells):
            if i in calibrations:
                calibration = calibrations[i]
            else:
                source = source_rows(i, slices, splits, usable)
                assert out is not None, f"row {i} is not calibrated: outputs[{i}] must hold f_{i}'s outputs"
                calibration = calibrate(task, out[source], labels[source])
        for j, rows in cells:
            if (i, j) in known:
                values = known[i, j]
            elif calibration is None:
                values = {}
            else:
                assert out is not None, (
                    f"cell ({i}, {j}) is not known: outputs[{i}] must hold f_{i}'s outputs"
                )
                values = estimate_cell(task, calibration, out[rows])
            for method, value in values.items():
                estimates[method][i, j] = value
    return estimates


def estimate_error(estimated: np.ndarray, true: np.ndarray) -> float | None:
    """Mean absolute error of an estimate over the future cells (j > i) that both fill; None if none."""
    estimated, true = np.asarray(estimated, dtype=float), np.asarray(true, dtype=float)
    i, j = np.triu_indices(len(true), 1)
    difference = np.abs(estimated[i, j] - true[i, j])
    difference = difference[np.isfinite(difference)]
    return float(difference.mean()) if len(difference) else None

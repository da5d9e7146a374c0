"""Drift without labels: how far the inputs of slice j sit from what f_i was trained on.

Cell (i, j) of the shift matrix compares f_i's training rows (train split of slices <= i) with the rows cell
(i, j) of M is scored on, on the pooled vectors of the dataset's text encoder (an image dataset: a vision
encoder's pooled vectors when embed.encoders has one, else its pixels standardised per feature). The statistic
is the unbiased MMD² (Gretton et al. 2012, eq. 3), RBF kernel with one median-heuristic bandwidth per dataset,
on seeded subsamples of at most n rows a side; p-values from `permutations` relabellings, Benjamini-Hochberg
over the cells; O((2n)² (D + permutations)) per cell. decay_correlation ranks the shift and a label-free
estimate of M (drift.evaluate.estimate) against M's true drop."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from scipy.stats import spearmanr

from drift.analysis.novelty import novelty
from drift.core.encoder_registry import ENCODERS
from drift.core.errors import DriftError
from drift.core.paths import dataset_paths
from drift.core.stage import write_json
from drift.data.records import table_images
from drift.evaluate.eval_result import EvalResult
from drift.protocol.matrix import eval_rows, from_json
from drift.protocol.summary import mean_over_seeds
from drift.report.plots import heatmap, long_format
from drift.store.embeddings import open_store
from drift.store.features import DiskArray, is_current
from drift.store.slices import read_slice_table, trainable_cutoffs

if TYPE_CHECKING:  # the annotation only: SliceData brings torch
    from drift.models.slice_data import SliceData

MEDIAN_SAMPLE = 1000  # rows whose pairwise distances set the bandwidth


def squared_distances(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """|x_a - y_b|² for every pair, [len(x), len(y)], clipped at 0 (rounding)."""
    d = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2.0 * (x @ y.T)
    return np.maximum(d, 0.0)


def median_bandwidth(features: np.ndarray, rng: np.random.Generator, sample: int = MEDIAN_SAMPLE) -> float:
    """h = the median squared distance between distinct rows of a seeded sample (median heuristic)."""
    rows = rng.choice(len(features), min(sample, len(features)), replace=False)
    x = features[np.sort(rows)].astype(np.float64)
    d = squared_distances(x, x)[np.triu_indices(len(x), 1)]
    h = float(np.median(d)) if len(d) else 0.0
    return h if h > 0 else 1.0  # every row identical: any h gives MMD² = 0


def mmd2_unbiased(
    x: np.ndarray, y: np.ndarray, h: float, permutations: int = 0, rng: np.random.Generator | None = None
) -> tuple[float, float]:
    """(unbiased MMD², permutation p-value; nan without permutations) of samples x [m, D] and y [n, D].

    Sums of kernel blocks from one pooled kernel matrix Kp with a zero diagonal: for a side indicator a (1 on
    the rows labelled x), s_xx = aᵀKa, s_x. = aᵀ(K 1), so s_xy = s_x. - s_xx and s_yy = total - s_xx - 2 s_xy.
    The observed labelling and every permutation are columns of one indicator matrix: one product K @ A."""
    m, n = len(x), len(y)
    if m < 2 or n < 2:
        return float("nan"), float("nan")
    z = np.concatenate([x, y]).astype(np.float64)
    kernel = np.exp(-squared_distances(z, z) / h)
    np.fill_diagonal(kernel, 0.0)
    side = np.zeros((1 + permutations, m + n))
    side[:, :m] = 1.0
    if permutations:
        rng = rng or np.random.default_rng(0)
        side[1:] = rng.permuted(side[1:], axis=1)
    s_xx = np.einsum("pn,np->p", side, kernel @ side.T)
    s_x = side @ kernel.sum(1)
    s_xy = s_x - s_xx
    s_yy = kernel.sum() - s_xx - 2.0 * s_xy
    stats = s_xx / (m * (m - 1)) + s_yy / (n * (n - 1)) - 2.0 * s_xy / (m * n)
    if not permutations:
        return float(stats[0]), float("nan")
    # a permutation counts when it reaches the observed value (with a little slack for rounding)
    p = (1 + np.sum(stats[1:] >= stats[0] - 1e-12 * abs(stats[0]))) / (1 + permutations)
    return float(stats[0]), float(p)


def benjamini_hochberg(p: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """(q-values, significant) for the finite p-values of an array of any shape; nan stays nan and is not
    counted among the tests. q_(k) = min over l >= k of p_(l) m / l; significant = q <= alpha (the step-up
    set)."""
    p = np.asarray(p, dtype=float)
    q = np.full(p.shape, np.nan)
    finite = np.isfinite(p)
    values = p[finite]
    m = len(values)
    if m:
        order = np.argsort(values, kind="stable")
        scaled = values[order] * m / np.arange(1, m + 1)
        adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
        out = np.empty(m)
        out[order] = np.minimum(adjusted, 1.0)
        q[finite] = out
    return q, finite & (np.nan_to_num(q, nan=np.inf) <= alpha)


def _sample(rows: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    return rows if len(rows) <= n else np.sort(rng.choice(rows, n, replace=False))


def shift_matrix(
    features: np.ndarray,
    slices: np.ndarray,
    splits: np.ndarray,
    cutoffs: list[int],
    usable: list[bool],
    n: int = 200,
    permutations: int = 200,
    alpha: float = 0.05,
    seed: int = 0,
) -> dict:
    """K x K arrays (nan = empty, as in M): mmd2, p, q, significant; plus the bandwidth h.

    Rows: the trained cutoffs (train split of slices <= i); columns: usable slices, on the rows M scores them
    on. The subsample of f_i's training set is the same along its row; each side is drawn from its own seed.
    """
    if n < 2:
        raise DriftError(f"report.shift.n must be at least 2 (rows per side), got {n}")
    features = np.asarray(features)
    k = len(usable)
    h = median_bandwidth(features, np.random.default_rng([seed, 0]))
    mmd2, p = np.full((k, k), np.nan), np.full((k, k), np.nan)
    for i in cutoffs:
        train = _sample(
            np.flatnonzero((slices <= i) & (splits == "train")), n, np.random.default_rng([seed, 1, i])
        )
        for j in range(k):
            if not usable[j]:
                continue
            target = _sample(
                eval_rows(i, j, slices, splits), n, np.random.default_rng([seed, 2, j, int(j <= i)])
            )
            mmd2[i, j], p[i, j] = mmd2_unbiased(
                features[train], features[target], h, permutations, np.random.default_rng([seed, 3, i, j])
            )
    q, significant = benjamini_hochberg(p, alpha)
    return {"mmd2": mmd2, "p": p, "q": q, "significant": significant, "h": h}


def shift_rows(result: dict, labels: list[str]) -> list[dict]:
    """The long format of the drift matrices (value = MMD²) with each cell's p, q and significance."""
    rows = long_format(result["mmd2"], labels)
    k = len(labels)
    for row, (i, j) in zip(rows, [(i, j) for i in range(k) for j in range(k)]):
        finite = np.isfinite(result["p"][i, j])
        row.update(
            p=round(float(result["p"][i, j]), 6) if finite else None,
            q=round(float(result["q"][i, j]), 6) if finite else None,
            significant=bool(result["significant"][i, j]),
        )
    return rows


# ---------------------------------------------------------------- a dataset's features


def standardised_pixels(images: np.ndarray) -> np.ndarray:
    """uint8 [n, C, H, W] -> float32 [n, C*H*W], each feature at mean 0 and standard deviation 1 over the rows
    (a constant feature stays 0)."""
    x = images.reshape(len(images), -1).astype(np.float32)
    std = x.std(0)
    return (x - x.mean(0)) / np.where(std > 0, std, 1.0)


def shift_features(data: SliceData) -> tuple[np.ndarray, str]:
    """(features of every row of the slice table, what they are) for a drift.models.slice_data.SliceData: the
    text encoder's pooled vectors; for an image dataset a vision encoder's (the first of embed.encoders that
    was embedded), else its standardised pixels."""
    if data.modality == "image":
        vision = [e for e in data.settings.encoders if e in data.encoders and ENCODERS[e].modality == "image"]
        if not vision:
            images = table_images(read_slice_table(data.slice_path, columns=["image"]))
            return standardised_pixels(images), "pixels (standardised)"
        encoder = vision[0]
    else:
        encoder = data.settings.text_encoder
        if encoder not in data.encoders:
            raise DriftError(
                f"the shift matrix reads the pooled vectors of {encoder}, which embed@{data.name} did "
                f"not compute: run `dvc repro embed@{data.name}`"
            )
    # the feature files when they are current (verified, in row order; what `dvc pull` brings), else the store
    manifest, path = data.encoders[encoder], Path(data.paths["features"]) / encoder
    if is_current(path, data.keys_sha256, manifest):
        pooled = DiskArray(path / "pooled.npy")
        return pooled.read_rows(np.arange(len(pooled))), f"{encoder} pooled"
    store = open_store(manifest, data.settings.store)
    return store.read_pooled(data.table.column("key")), f"{encoder} pooled"


def write_shift(
    data: SliceData,
    root: Path = Path("."),
    n: int = 200,
    permutations: int = 200,
    alpha: float = 0.05,
    seed: int = 0,
    novelty_quantile: float = 0.95,
    max_rows: int = 500,
    max_index_rows: int = 100_000,
    top: int = 5,
    evals: dict[str, EvalResult] | None = None,
) -> dict:
    """The label-free part of a dataset's report, for a drift.models.slice_data.SliceData:

      plots/<ds>/shift/matrix.json   the shift matrix in long format (value = MMD²) with each cell's p, q and
                                     significant (DVC's heatmap template reads it like M)
      plots/<ds>/shift/heatmap.png   the same, significant cells dotted
      plots/<ds>/shift/novelty.json  the share of novel rows per cell in long format (drift.analysis.novelty)
      plots/<ds>/shift/novelty.png   the same
      tables/<ds>-shift.json         the summary (features, bandwidth, parameters, counts), each
                                     model's decay correlations, and per period the most novel rows against the
                                     last cutoff before it: id, distance, the text's first 300 characters

    evals: {model: its eval JSON}; each model's decay_correlation (shift, novelty, and the estimates when the
    JSON has an "estimated" entry {method: {seed: rows}}). Returns what tables/<ds>-shift.json holds, plus the
    arrays under "result" (drift.analysis.shift.shift_matrix) and "novelty" (drift.analysis.novelty.novelty).
    """
    start = time.perf_counter()
    features, source = shift_features(data)
    cutoffs = trainable_cutoffs(data.manifest.slices)
    result = shift_matrix(
        features,
        data.slices,
        data.splits,
        cutoffs,
        data.usable,
        n=n,
        permutations=permutations,
        alpha=alpha,
        seed=seed,
    )
    seconds = time.perf_counter() - start

    ids = read_slice_table(data.slice_path, columns=["id"]).column("id").to_pylist()
    found = novelty(
        features,
        data.slices,
        data.splits,
        cutoffs,
        data.usable,
        ids=ids,
        quantile=novelty_quantile,
        max_rows=max_rows,
        max_index_rows=max_index_rows,
        top=top,
        seed=seed,
    )
    labels = data.manifest.labels()
    paths = dataset_paths(data.name, root)
    folder = paths["shift"]
    write_json(folder / "matrix.json", shift_rows(result, labels))
    tested = int(np.isfinite(result["p"]).sum())
    significant = int(result["significant"].sum())
    heatmap(
        result["mmd2"],
        labels,
        folder / "heatmap.png",
        f"{data.name}: representation shift, MMD² ({source}); • q ≤ {alpha} ({significant}/{tested})",
        "MMD²",
        higher_is_better=False,
        marks=result["significant"],
    )
    write_json(folder / "novelty.json", long_format(found["share"], labels))
    heatmap(
        found["share"],
        labels,
        folder / "novelty.png",
        f"{data.name}: share of rows farther than the {novelty_quantile:.0%} quantile from f_i's training rows",
        "novel share",
        higher_is_better=False,
    )
    texts = (
        read_slice_table(data.slice_path, columns=["text"]).column("text").to_pylist()
        if data.modality == "text"
        else None
    )
    examples = [
        {
            "period": labels[e["period"]],
            "against_cutoff": labels[e["cutoff"]],
            "threshold": round(found["threshold"][e["cutoff"]], 4),
            "rows": [
                {"id": i, "distance": d, "novel": v, **({"text": texts[r][:300]} if texts else {})}
                for r, i, d, v in zip(e["rows"], e["ids"], e["distances"], e["novel"])
            ],
        }
        for e in found["examples"]
    ]
    correlation = {}
    for model, evaluation in (evals or {}).items():
        estimated: dict[str, np.ndarray] = {
            m: mean_over_seeds([from_json(rows) for rows in seeds.values()])
            for m, seeds in evaluation.estimated.items()
            if seeds
        }
        correlation[model] = model_decay_correlation(evaluation, result["mmd2"], estimated, found["share"])
    summary = {
        "dataset": data.name,
        "features": source,
        "dim": int(features.shape[1]),
        "bandwidth_h": round(result["h"], 6),
        "n": n,
        "permutations": permutations,
        "alpha": alpha,
        "seed": seed,
        "cells": tested,
        "significant": significant,
        "novelty_quantile": novelty_quantile,
        "novelty_reference_rows": found["reference_rows"],
        "correlation": correlation,
        "examples": examples,
    }
    # the times go to stderr, not into the committed summary: two runs of one commit write the same bytes
    print(
        f"shift {data.name}: {tested} cells in {seconds:.1f} s, novel rows in {found['seconds_search']:.1f} s",
        file=sys.stderr,
    )
    write_json(paths["shift_summary"], summary)
    return {**summary, "result": result, "novelty": found}


# ---------------------------------------------------------------- does the shift predict the decay?


def drops(matrix: np.ndarray, higher_is_better: bool = True) -> np.ndarray:
    """drop[i][j] = M[i][i] - M[i][j] (positive = a loss, whatever the metric's direction)."""
    matrix = np.asarray(matrix, dtype=float)
    diagonal = np.diag(matrix)[:, None]
    return diagonal - matrix if higher_is_better else matrix - diagonal


def future_cells(k: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(k, 1)


def _spearman(a: np.ndarray, b: np.ndarray) -> dict:
    i, j = future_cells(len(a))
    x, y = a[i, j], b[i, j]
    keep = np.isfinite(x) & np.isfinite(y)
    if keep.sum() < 3 or np.ptp(x[keep]) == 0 or np.ptp(y[keep]) == 0:
        return {"rho": None, "p": None, "cells": int(keep.sum())}
    rho, p = spearmanr(x[keep], y[keep])
    return {"rho": round(float(rho), 4), "p": float(p), "cells": int(keep.sum())}


def decay_correlation(
    true: np.ndarray,
    higher_is_better: bool,
    shift: np.ndarray | None = None,
    estimated: dict[str, np.ndarray] | None = None,
    novelty: np.ndarray | None = None,
) -> dict:
    """Spearman rank correlation over the future cells (j > i) between the true drop M[i][i] - M[i][j] and the
    shift (MMD²), the share of novel rows (drift.analysis.novelty), and each estimate's own drop est[i][i] -
    est[i][j] (estimated: method -> K x K, as drift.evaluate.estimate.estimated_matrix returns). Empty cells
    are skipped; fewer than 3 cells, or a constant side, give rho None. Positive rho: the label-free signal
    grows where the model loses more."""
    true_drop = drops(true, higher_is_better)
    out = {}
    if shift is not None:
        out["shift"] = _spearman(np.asarray(shift, dtype=float), true_drop)
    if novelty is not None:
        out["novelty"] = _spearman(np.asarray(novelty, dtype=float), true_drop)
    for method, matrix in (estimated or {}).items():
        out[f"estimate_{method}"] = _spearman(drops(matrix, higher_is_better), true_drop)
    return out


def model_decay_correlation(
    evaluation: EvalResult,
    shift: np.ndarray | None = None,
    estimated: dict[str, np.ndarray] | None = None,
    novelty: np.ndarray | None = None,
) -> dict:
    """decay_correlation for one model's eval JSON (data/eval/<ds>/<model>.json): M averaged over seeds."""
    return decay_correlation(evaluation.matrix, evaluation.higher_is_better, shift, estimated, novelty)

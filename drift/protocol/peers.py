"""The peers' summaries of a drift matrix M (row i trained through period i, column j the period scored), from
the same cells as ours (drift.protocol.summary): which cells each reads is in docs/explanations/protocol.md
("Other protocols").

Over the periods that hold a filled cell (empty ones dropped, so "the next period" is the next scored one):
Wild-Time (Yao et al. 2022) Eval-Fix trains through a split period s and scores the later periods, M[s, j > s]:
average and worst; Eval-Stream lets each period predict the next, M[i, i+1]: average and worst. CLEAR (Lin et al.
2021) in-domain is the diagonal mean, next-domain the super-diagonal mean, backward transfer the mean below the
diagonal (j < i), forward transfer the mean above it (j > i). Worst is the lowest score, or the highest where
lower is better; None where a region has no filled cell.
"""

from __future__ import annotations

import numpy as np

from drift.core.errors import DriftError, close_matches
from drift.protocol.summary import as_matrix, id_future_decay

PROTOCOLS = ("ours", "wild-time", "clear")
DEFAULT_PROTOCOL = "ours"


def check_protocol(name: str) -> str:
    if name not in PROTOCOLS:
        raise DriftError(f"unknown protocol {name!r} for --protocol: {close_matches(str(name), PROTOCOLS)}")
    return name


def scored_periods(M) -> np.ndarray:
    """M cut to the periods (rows and columns alike) that hold a filled cell in their row or their column."""
    M = as_matrix(M)
    filled = np.isfinite(M)
    keep = np.flatnonzero(filled.any(0) | filled.any(1))
    return M[np.ix_(keep, keep)]


def _mean_worst(values: np.ndarray, higher_is_better: bool) -> tuple[float | None, float | None]:
    values = values[np.isfinite(values)]
    if not len(values):
        return None, None
    return float(values.mean()), float(values.min() if higher_is_better else values.max())


def default_split(K: int) -> int:
    """Eval-Fix's split period when none is given: the middle one, (K - 1) // 2, so about half the periods
    are trained on and the rest scored."""
    return max((K - 1) // 2, 0)


def wild_time(M, higher_is_better: bool, split: int | None = None, labels: list | None = None) -> dict:
    """Eval-Fix (trained through period `split` of the scored periods, default_split when None) and
    Eval-Stream; with the slice `labels` of M's rows, eval_fix_split_label names the split period by its
    label."""
    filled = np.isfinite(as_matrix(M))
    kept = np.flatnonzero(filled.any(0) | filled.any(1))
    M = scored_periods(M)
    K = M.shape[0]
    s = default_split(K) if split is None else split
    if not 0 <= s < max(K, 1):
        raise DriftError(f"Eval-Fix split period {s} is outside the {K} scored periods (0..{K - 1})")
    fix_mean, fix_worst = _mean_worst(M[s, s + 1 :] if K else np.array([]), higher_is_better)
    stream_mean, stream_worst = _mean_worst(np.diagonal(M, 1), higher_is_better)
    out: dict[str, float | int | str | None] = {
        "eval_fix_split": s if K else None,
        "eval_fix_average": fix_mean,
        "eval_fix_worst": fix_worst,
        "eval_stream_average": stream_mean,
        "eval_stream_worst": stream_worst,
    }
    if labels is not None:
        out["eval_fix_split_label"] = str(labels[kept[s]]) if K else None
    return out


def clear(M) -> dict:
    """CLEAR's in-domain, next-domain, backward and forward transfer."""
    M = scored_periods(M)
    K = M.shape[0]

    def mean(values):
        values = values[np.isfinite(values)]
        return float(values.mean()) if len(values) else None

    return {
        "in_domain": mean(np.diagonal(M)),
        "next_domain": mean(np.diagonal(M, 1)),
        "backward_transfer": mean(M[np.tril_indices(K, -1)]),
        "forward_transfer": mean(M[np.triu_indices(K, 1)]),
    }


def protocol_summary(M, higher_is_better: bool, protocol: str = DEFAULT_PROTOCOL) -> dict:
    """The summary `protocol` reports of M: ours (ID / Future / Decay), wild-time or clear."""
    check_protocol(protocol)
    if protocol == "wild-time":
        return wild_time(M, higher_is_better)
    if protocol == "clear":
        return clear(M)
    return id_future_decay(M, higher_is_better)

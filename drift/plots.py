"""Heatmaps in the paper's orientation and the DVC plot data.

Train slice on rows, evaluation slice on columns, time growing up and to the right from a lower-left origin,
the diagonal dashed, empty cells white. Sequential scale for M (reversed when lower is better, so the good
end has the same colour everywhere); a zero-centred diverging scale for deviations.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

METRIC_LABELS = {"accuracy": "Accuracy", "balanced_mse": "Balanced MSE (lower is better)", "macro_auc": "Macro AUC"}


def long_format(matrix: np.ndarray, labels: list[str]) -> list[dict]:
    """Rows {"train", "eval", "value"} for the DVC heatmap template; empty cells are null."""
    return [{"train": labels[i], "eval": labels[j], "value": None if np.isnan(v) else round(float(v), 6)}
            for i, row in enumerate(matrix) for j, v in enumerate(row)]


def _tick_positions(k: int, most: int = 12) -> np.ndarray:
    step = max(1, int(np.ceil(k / most)))
    return np.arange(0, k, step)


def heatmap(matrix: np.ndarray, labels: list[str], path: Path, title: str, metric: str,
            higher_is_better: bool = True, diverging: bool = False) -> None:
    k = len(labels)
    fig, ax = plt.subplots(figsize=(5.2 + 0.05 * k, 4.4 + 0.05 * k), dpi=120)
    masked = np.ma.masked_invalid(matrix)
    if diverging:
        bound = float(np.nanmax(np.abs(matrix))) if np.isfinite(matrix).any() else 1.0
        cmap, vmin, vmax = plt.get_cmap("RdBu" if higher_is_better else "RdBu_r").copy(), -bound, bound
    else:
        cmap, vmin, vmax = plt.get_cmap("viridis" if higher_is_better else "viridis_r").copy(), None, None
    cmap.set_bad("white")
    image = ax.imshow(masked, origin="lower", cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    ax.plot([-0.5, k - 0.5], [-0.5, k - 0.5], "k--", linewidth=1)
    ticks = _tick_positions(k)
    ax.set_xticks(ticks, [labels[t] for t in ticks], rotation=45, ha="right", fontsize=8)
    ax.set_yticks(ticks, [labels[t] for t in ticks], fontsize=8)
    ax.set_xlabel("Evaluated on")
    ax.set_ylabel("Trained up to")
    ax.set_title(title, fontsize=10)
    bar = fig.colorbar(image, ax=ax)
    bar.set_label(("Δ " if diverging else "") + METRIC_LABELS.get(metric, metric))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)

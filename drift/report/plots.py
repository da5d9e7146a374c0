"""Pictures of drift matrices in the paper's style, and the data DVC's plot templates read.

Heatmaps: train slice on rows, evaluation slice on columns, time growing up and to the right from a lower-left
origin, the diagonal dashed, empty cells white. Sequential scale for M (reversed when lower is better, so the
good end has the same colour everywhere); a zero-centred diverging scale for deviations (blue: better than the
cohort, red: worse, whatever the metric's direction). Also forgetting curves (Figure 4 / 11), family bars
(Table 10 as a picture) and saliency grids (Figure 3).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.ticker
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

METRIC_LABELS = {
    "accuracy": "Accuracy",
    "balanced_mse": "Balanced MSE (lower is better)",
    "macro_auc": "Macro AUC",
}


# `dvc plots show` pastes the plots' data into a <script> of its HTML page as JSON that it parses and writes
# again (a \u003c escape does not survive), so a label "</script><script>..." would end the script and run its
# own: the characters HTML reads as markup become look-alikes in every string the plots data holds. Ordinary
# labels (years, class and model names) are unchanged.
PLOT_SAFE = str.maketrans({"<": "\u2039", ">": "\u203a", "&": "\uff06"})  # ‹ › ＆


def subplots(*args, figsize=None, dpi=None, **kwargs) -> tuple[Figure, Any]:
    """pyplot.subplots without pyplot: a figure on its own Agg canvas, so drawing one neither switches the
    process's matplotlib backend (a notebook's stays) nor leaves a figure for pyplot to close."""
    fig = Figure(figsize=figsize, dpi=dpi)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(*args, **kwargs)


def plot_text(value):
    """A string of the plots data with `<`, `>` and `&` as their look-alikes ‹ › ＆; any other value as it is."""
    return value.translate(PLOT_SAFE) if isinstance(value, str) else value


def long_format(matrix: np.ndarray, labels: list[str], **extra) -> list[dict]:
    """Rows {"train", "eval", "value", **extra} for the DVC heatmap templates; empty cells are null; the
    labels are plot_text."""
    shown = [plot_text(label) for label in labels]
    return [
        {"train": shown[i], "eval": shown[j], "value": None if np.isnan(v) else round(float(v), 6), **extra}
        for i, row in enumerate(matrix)
        for j, v in enumerate(row)
    ]


def curve_rows(curves: dict) -> list[dict]:
    """Rows {"gap", "value", "model"} for the DVC line template, from model -> (gaps, values)."""
    return [
        {"gap": int(g), "value": round(float(v), 6), "model": plot_text(model)}
        for model, (gaps, values) in curves.items()
        for g, v in zip(gaps, values)
    ]


def _tick_positions(k: int, most: int = 12) -> np.ndarray:
    step = max(1, int(np.ceil(k / most)))
    return np.arange(0, k, step)


def color_limits(matrix: np.ndarray, diverging: bool) -> tuple[float | None, float | None]:
    """Colour range: symmetric around 0 for deviations (so 0 is the neutral colour), the data's own otherwise."""
    if not diverging:
        return None, None
    finite = np.abs(matrix[np.isfinite(matrix)])
    bound = float(finite.max()) if len(finite) and finite.max() > 0 else 1.0
    return -bound, bound


def heatmap(
    matrix: np.ndarray,
    labels: list[str],
    path: Path,
    title: str,
    metric: str,
    higher_is_better: bool = True,
    diverging: bool = False,
    marks: np.ndarray | None = None,
) -> None:
    """marks: a K x K boolean array; a small dot in each True cell (e.g. a significant test)."""
    k = len(labels)
    fig, ax = subplots(figsize=(5.2 + 0.05 * k, 4.4 + 0.05 * k), dpi=120)
    _draw_heatmap(fig, ax, matrix, labels, title, metric, higher_is_better, diverging, marks)
    fig.tight_layout()
    _save(fig, path)


def heatmap_row(
    panels: list[tuple[np.ndarray, list[str], str, bool]],
    path: Path,
    metric: str,
    higher_is_better: bool = True,
) -> None:
    """Heatmaps side by side in one figure, each drawn as `heatmap` draws one, with its own colour bar;
    panels: (matrix, labels, title, diverging) each. Fixed margins, not tight_layout: at most 12 ticks a side
    keep the labels within them, and one figure so laid out costs about half of as many separate heatmaps."""
    fig, axes = subplots(1, len(panels), figsize=(5.6 * len(panels), 4.8), dpi=120, squeeze=False)
    for ax, (matrix, labels, title, diverging) in zip(axes[0], panels):
        _draw_heatmap(fig, ax, matrix, labels, title, metric, higher_is_better, diverging, None)
    fig.subplots_adjust(left=0.06, right=0.97, bottom=0.2, top=0.93, wspace=0.35)
    _save(fig, path)


def _draw_heatmap(
    fig,
    ax,
    matrix: np.ndarray,
    labels: list[str],
    title: str,
    metric: str,
    higher_is_better: bool,
    diverging: bool,
    marks: np.ndarray | None,
) -> None:
    """One heatmap and its colour bar on `ax` of `fig` (heatmap's docstring: the style)."""
    k = len(labels)
    masked = np.ma.masked_invalid(matrix)
    vmin, vmax = color_limits(matrix, diverging)
    name = ("RdBu" if diverging else "viridis") + ("" if higher_is_better else "_r")
    cmap = matplotlib.colormaps[name].with_extremes(
        bad="white"
    )  # empty cells: white bands, never a score's colour
    image = ax.imshow(
        masked, origin="lower", cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest"
    )
    ax.plot([-0.5, k - 0.5], [-0.5, k - 0.5], "k--", linewidth=1)
    if marks is not None:
        rows, columns = np.nonzero(marks)
        ax.scatter(columns, rows, s=max(2.0, 120.0 / k), c="white", edgecolors="black", linewidths=0.4)
    ticks = _tick_positions(k)
    # a label is text, never mathtext: "$x^$" would stop the figure
    ax.set_xticks(ticks, [labels[t] for t in ticks], rotation=45, ha="right", fontsize=8, parse_math=False)
    ax.set_yticks(ticks, [labels[t] for t in ticks], fontsize=8, parse_math=False)
    ax.set_xlabel("Evaluated on")
    ax.set_ylabel("Trained up to")
    ax.set_title(title, fontsize=10)
    bar = fig.colorbar(image, ax=ax)
    bar.set_label(("Δ " if diverging else "") + METRIC_LABELS.get(metric, metric))


def _save(fig, path: Path) -> None:
    """The figure as laid out (tight_layout or fixed margins) to a PNG at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # tight_layout leaves a placeholder layout engine, for which savefig draws the whole figure once more
    # before the draw it saves; without an engine it draws once, to the same pixels
    fig.set_layout_engine(None)
    fig.savefig(path)


def forgetting_plot(
    curves: dict, family_curves: dict, path: Path, title: str, metric: str, references=()
) -> None:
    """Forgetting curves (Figure 11): each model (left) and averaged within each family (right).
    curves / family_curves: name -> (gaps, values); references: the reference models among curves, drawn as
    grey dashed or dotted lines without markers (they are in no family)."""
    fig, axes = subplots(1, 2, figsize=(10, 4), dpi=120, sharey=True)
    for ax, group, heading in ((axes[0], curves, "per model"), (axes[1], family_curves, "per family")):
        for name, (gaps, values) in group.items():
            if group is curves and name in references:  # one dash pattern per reference, in grey
                dash = ("--", ":", "-.")[list(references).index(name) % 3]
                ax.plot(gaps, values, linestyle=dash, linewidth=1.4, color="0.4", label=f"{name} (reference)")
                continue
            ax.plot(gaps, values, marker="o", markersize=3, linewidth=1.5, label=name)
        ax.set_xlabel("Slices since the training cutoff (gap j − i)")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_title(heading, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2 if len(group) > 8 else 1)
    axes[0].set_ylabel(METRIC_LABELS.get(metric, metric))
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    _save(fig, path)


def family_bars(rows: list[dict], path: Path, title: str, metric: str) -> None:
    """Family averages (Table 10) as bars: ID and Future side by side, Decay written above; rows from
    summary.family_table, in their rank order."""
    names = [r["family"] for r in rows]
    x = np.arange(len(rows))
    nan_if_none = lambda v: np.nan if v is None else v  # noqa: E731
    fig, ax = subplots(figsize=(max(4.5, 1.3 * len(rows) + 2), 4), dpi=120)
    for offset, key, color in ((-0.2, "id", "#4c72b0"), (0.2, "future", "#dd8452")):
        ax.bar(
            x + offset,
            [nan_if_none(r[key]) for r in rows],
            width=0.4,
            color=color,
            label="ID" if key == "id" else "Future",
        )
    for i, r in enumerate(rows):
        top = max(nan_if_none(r["id"]), nan_if_none(r["future"]))
        if r["decay"] is not None and np.isfinite(top):
            ax.annotate(
                f"decay {r['decay']:.3f}",
                (i, top),
                xytext=(0, 4),
                textcoords="offset points",
                ha="center",
                fontsize=8,
            )
    ax.set_xticks(x, [f"{n}\n({r['n_models']})" for n, r in zip(names, rows)], fontsize=8)
    ax.set_ylabel(METRIC_LABELS.get(metric, metric))
    ax.set_title(title, fontsize=10)
    ax.margins(y=0.25)
    ax.legend(fontsize=8, ncol=2, loc="upper right")
    fig.tight_layout()
    _save(fig, path)


def saliency_grid(
    maps: dict, models: list[str], columns: list[dict], path: Path, title: str, portraits: dict | None = None
) -> None:
    """Figure 3: rows = models, columns = training cutoffs, each panel a mean saliency map scaled to its own
    [0, 1] (low to high). maps: (model, column index) -> [H, W]; columns: {"title"} per column;
    portraits: column index -> mean input image [C, H, W] in [0, 1], drawn as a first row for orientation."""
    top = 1 if portraits else 0
    n_rows, n_cols = len(models) + top, len(columns)
    fig, axes = subplots(
        n_rows, n_cols, figsize=(1.9 * n_cols + 0.8, 1.9 * n_rows + 0.6), dpi=120, squeeze=False
    )
    for c, column in enumerate(columns):
        axes[0, c].set_title(column["title"], fontsize=8, parse_math=False)  # a slice label: never mathtext
        if portraits:
            image = np.asarray(portraits[c])
            axes[0, c].imshow(image.transpose(1, 2, 0) if image.shape[0] in (3, 4) else image[0], cmap="gray")
        for r, model in enumerate(models):
            ax = axes[r + top, c]
            m = maps.get((model, c))
            if m is not None:
                span = float(m.max() - m.min())
                ax.imshow(
                    (m - m.min()) / span if span > 0 else np.zeros_like(m), cmap="inferno", vmin=0, vmax=1
                )
    for r in range(n_rows):
        axes[r, 0].set_ylabel("mean input" if top and r == 0 else models[r - top], fontsize=8)
        for ax in axes[r]:
            ax.set_xticks([])
            ax.set_yticks([])
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    _save(fig, path)


def pareto_plot(result: dict, path: Path) -> None:
    """Retraining policies drawn by pareto_figure, saved to `path`."""
    _save(pareto_figure(result), path)


def compact_number(value: float, _pos=None) -> str:
    """A tick label that stays short at any scale: 0, 750, 12k, 1.5M, 2G."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def policy_label(policy: dict) -> str:
    """A policy's name on the figure: a threshold to 2 significant digits ("drop 0.077", not "drop 0.076667")."""
    if policy["policy"] in ("shift", "drop") and policy.get("param") is not None:
        return f"{policy['policy']} {policy['param']:.2g}"
    return policy["name"]


LABEL_OFFSETS = [
    (3, 3, "left"),
    (3, -9, "left"),
    (-3, 3, "right"),
    (-3, -9, "right"),
    (3, 10, "left"),
    (-3, 10, "right"),
    (3, -16, "left"),
    (-3, -16, "right"),
    (3, 17, "left"),
    (-3, 17, "right"),
]


def place_labels(ax, renderer, points: list[tuple[float, float]], labels: list[str], bold: list[bool]) -> int:
    """Each point's label at the first offset (LABEL_OFFSETS, points) where it overlaps no label placed
    before, no other point's marker and stays inside the axes; a label with no such place is left off. Returns
    how many."""
    frame = ax.get_window_extent(renderer)
    markers = [ax.transData.transform(xy) for xy in points]
    placed: list = []
    left_off = 0
    for i in sorted(
        range(len(points)), key=lambda i: (not bold[i], points[i])
    ):  # the best policy's label first
        for dx, dy, ha in LABEL_OFFSETS:
            text = ax.annotate(
                labels[i],
                points[i],
                xytext=(dx, dy),
                textcoords="offset points",
                fontsize=6,
                ha=ha,
                fontweight="bold" if bold[i] else "normal",
            )
            box = text.get_window_extent(renderer)
            clear = (
                frame.x0 <= box.x0
                and box.x1 <= frame.x1
                and frame.y0 <= box.y0
                and box.y1 <= frame.y1
                and not any(box.overlaps(other) for other in placed)
                and not any(
                    j != i and box.x0 - 3 <= mx <= box.x1 + 3 and box.y0 - 3 <= my <= box.y1 + 3
                    for j, (mx, my) in enumerate(markers)
                )
            )
            if clear:
                placed.append(box)
                break
            text.remove()
        else:
            left_off += 1
    return left_off


def pareto_figure(result: dict):
    """Retraining policies (drift/analysis/policy.py): one panel per model, mean score (filled) and worst
    period (hollow, joined by a thin line) against the retraining cost; the Pareto front of the mean as a step
    line, each policy's name beside its mean where it overlaps nothing (place_labels; the panel's x label
    counts those left off), the best policy's in bold; at most 5 x ticks, short (compact_number). result:
    policy.dataset_policies."""
    models = list(result["models"])
    higher = result["higher_is_better"]
    cols = min(3, max(1, len(models)))
    rows = int(np.ceil(len(models) / cols)) or 1
    fig, axes = subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows + 0.4), dpi=120, squeeze=False)
    drawn = []
    for ax, model in zip(axes.flat, models):
        policies = [p for p in result["models"][model]["policies"] if p["mean"] is not None]
        for p in policies:
            color = "#dd8452" if p["pareto"] else "#4c72b0"
            ax.plot([p["cost"], p["cost"]], [p["mean"], p["worst"]], color=color, linewidth=0.6, alpha=0.6)
            ax.plot(p["cost"], p["mean"], "o", color=color, markersize=5)
            ax.plot(p["cost"], p["worst"], "o", mfc="none", color=color, markersize=4)
        front = sorted((p["cost"], p["mean"]) for p in policies if p["pareto"])
        if front:
            ax.step(*zip(*front), where="post", color="#dd8452", linewidth=1, alpha=0.8)
        ax.set_title(model + (" (reference)" if result["models"][model].get("reference") else ""), fontsize=9)
        ax.set_ylabel(METRIC_LABELS.get(result["metric"], result["metric"]), fontsize=8)
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(nbins=5))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(compact_number))
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.margins(x=0.08, y=0.12)  # room for the labels of the outermost points
        ax.set_xlabel(f"retraining cost ({result['cost_unit']})", fontsize=8)
        drawn.append((ax, policies))
    for ax in list(axes.flat)[len(models) :]:
        ax.axis("off")
    better = "higher" if higher else "lower"
    fig.suptitle(
        f"{result['dataset']}: retraining policies replayed from the drift matrix (dot: mean, ring: worst "
        f"period; orange: Pareto front; {better} is better)",
        fontsize=9,
    )
    fig.tight_layout()
    # the Agg canvas has it; the base class does not say
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    for ax, policies in drawn:  # placed once the layout is final: the boxes are measured where they are drawn
        ax.set_xlim(ax.get_xlim())
        ax.set_ylim(ax.get_ylim())
        left_off = place_labels(
            ax,
            renderer,
            [(p["cost"], p["mean"]) for p in policies],
            [policy_label(p) for p in policies],
            [bool(p["best"]) for p in policies],
        )
        if left_off:
            ax.set_xlabel(
                f"retraining cost ({result['cost_unit']}); {left_off} label(s) left off: the table has "
                f"every policy",
                fontsize=7,
            )
    return fig


def _class_colours(ax, n: int) -> None:
    """Distinct colours for up to 20 classes (the default cycle repeats after 10)."""
    if n > 10:
        ax.set_prop_cycle(color=[matplotlib.colormaps["tab20"](i) for i in range(20)])


def _class_legend(ax, n: int) -> None:
    """The classes' legend right of the axes, its names as text (never mathtext)."""
    legend = ax.legend(
        loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, ncol=1 + n // 25, frameon=False
    )
    for text in legend.get_texts():
        text.set_parse_math(False)


def label_share_plot(
    slices: list[str],
    classes: list[str],
    values: np.ndarray,
    path: Path,
    title: str,
    what: str,
    stacked: bool = True,
    mean: np.ndarray | None = None,
) -> None:
    """The label prior over time: values [slice, class] as stacked bars (shares that sum to 1 per slice) or as
    one line per class (positive rates, a mean); `mean` (a rating per slice) as a dashed black line on its own
    axis. Slices in time order left to right."""
    x = np.arange(len(slices))
    fig, ax = subplots(figsize=(9.5, 3.8), dpi=120)
    _class_colours(ax, len(classes))
    bottom = np.zeros(len(slices))
    for c, name in enumerate(classes):
        if stacked:
            share = np.nan_to_num(values[:, c])
            ax.bar(x, share, width=0.85, bottom=bottom, label=name)
            bottom += share
        else:
            ax.plot(x, values[:, c], marker="o", markersize=3, linewidth=1.4, label=name)
    ticks = _tick_positions(len(slices))
    ax.set_xticks(ticks, [slices[t] for t in ticks], rotation=45, ha="right", fontsize=8, parse_math=False)
    ax.set_xlim(-0.5, len(slices) - 0.5)
    ax.set_xlabel("Slice")
    ax.set_ylabel(what)
    ax.set_title(title, fontsize=10, parse_math=False)
    ax.grid(alpha=0.3)
    _class_legend(ax, len(classes))
    if mean is not None:
        twin = ax.twinx()
        twin.plot(x, mean, "k--", linewidth=1.4)
        twin.set_ylabel("mean rating (dashed)")
    fig.tight_layout()
    _save(fig, path)


def class_score_plot(
    cutoffs: list[str],
    classes: list[str],
    diagonal: np.ndarray,
    future: np.ndarray,
    path: Path,
    title: str,
    what: str,
) -> None:
    """Each class's score per training cutoff, one line per class: on the diagonal cell (left: in
    distribution) and the mean over the later slices (right); diagonal, future: [cutoff, class], NaN where a
    class has none."""
    x = np.arange(len(cutoffs))
    fig, axes = subplots(1, 2, figsize=(11, 3.9), dpi=120, sharey=True)
    for ax, values, heading in (
        (axes[0], diagonal, "in distribution (diagonal cell)"),
        (axes[1], future, "future (mean over the later slices)"),
    ):
        _class_colours(ax, len(classes))
        for c, name in enumerate(classes):
            ax.plot(x, values[:, c], marker="o", markersize=3, linewidth=1.4, label=name)
        ticks = _tick_positions(len(cutoffs))
        ax.set_xticks(
            ticks, [cutoffs[t] for t in ticks], rotation=45, ha="right", fontsize=8, parse_math=False
        )
        ax.set_xlabel("Trained up to")
        ax.set_title(heading, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(what)
    _class_legend(axes[1], len(classes))
    fig.suptitle(title, fontsize=10, parse_math=False)
    fig.tight_layout()
    _save(fig, path)

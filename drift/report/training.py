"""Training curves: how far each model's training got, from the mean training loss of each epoch its
checkpoints keep (drift.models.checkpoints.epoch_losses).

The report stage writes them as long-format rows for `dvc plots` (plots/losses/<ds>.json: model, cutoff (the
slice label), seed, epoch (from 1), loss) and draws one figure per model (plots/<ds>/<model>/losses.png: loss
against epoch, one line per training cutoff, the mean over seeds). The HTML report shows the figures under
"Training", with a line for each model whose loss was still falling at its last epoch
(drift.protocol.summary.still_falling) or whose ID is below baseline-linear's. `drift summary` reads the rows
back (read_curves). References, fitted in closed form, have no curve.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from drift.core.paths import dataset_paths
from drift.core.stage import write_json
from drift.protocol.summary import (
    BELOW_LINEAR_NOTE,
    REFERENCES,
    STILL_FALLING,
    below_linear_message,
    last_epoch_drop,
    still_falling,
    still_falling_message,
)

FIGURE = "losses.png"  # each model's figure in plots/<ds>/<model>/


def curve_rows(models_dir: Path, models: list[str], labels: dict[int, str]) -> list[dict]:
    """Rows {model, cutoff, seed, epoch, loss} of every checkpoint of `models` under `models_dir` that keeps a
    curve, in model, seed, cutoff and epoch order; `labels`: cutoff index -> slice label (plot_text)."""
    from drift.models.checkpoints import loss_curves  # lazy: torch, only where checkpoints are read
    from drift.report.plots import plot_text

    return [
        {
            "model": plot_text(model),
            "cutoff": plot_text(labels.get(k, str(k))),
            "seed": seed,
            "epoch": epoch,
            "loss": round(loss, 6),
        }
        for model in models
        for seed, cutoffs in loss_curves(models_dir, model).items()
        for k, curve in cutoffs.items()
        for epoch, loss in enumerate(curve, start=1)
    ]


def curves_by_model(rows: list[dict]) -> dict[str, dict[tuple[str, int], list[float]]]:
    """{model: {(cutoff, seed): its losses in epoch order}} from curve_rows' rows."""
    out: dict[str, dict[tuple[str, int], list[float]]] = {}
    for r in sorted(rows, key=lambda r: r["epoch"]):
        out.setdefault(r["model"], {}).setdefault((r["cutoff"], r["seed"]), []).append(r["loss"])
    return out


def read_curves(root: Path, dataset: str) -> dict[str, list[list[float]]]:
    """{model: its curves, one per cutoff and seed} from plots/losses/<ds>.json; empty without the file (a
    report written before it existed)."""
    path = dataset_paths(dataset, root)["losses"]
    if not path.exists():
        return {}
    return {m: list(c.values()) for m, c in curves_by_model(json.loads(path.read_text())).items()}


def losses_plot(curves: dict[str, list[float]], path: Path, title: str) -> None:
    """Loss against epoch, one line per training cutoff (`curves`: cutoff label -> its mean loss per epoch
    over the seeds, in time order), later cutoffs darker."""
    import matplotlib  # lazy: matplotlib, only when a report is written
    import matplotlib.ticker

    from drift.report.plots import _save, subplots

    fig, ax = subplots(figsize=(5.2, 3.6), dpi=120)
    colours = matplotlib.colormaps["viridis"](np.linspace(0.9, 0.0, max(len(curves), 1)))
    for colour, (label, losses) in zip(colours, curves.items()):
        ax.plot(
            range(1, len(losses) + 1),
            losses,
            marker="o",
            markersize=3,
            linewidth=1.4,
            color=colour,
            label=label,
        )
    ax.set_xlabel("Epoch")
    ax.set_ylabel("Mean training loss")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_title(title, fontsize=10, parse_math=False)
    ax.grid(alpha=0.3)
    legend = ax.legend(
        title="trained up to",
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=7,
        frameon=False,
        ncol=1 + len(curves) // 20,
    )
    for text in legend.get_texts():
        text.set_parse_math(False)
    fig.tight_layout()
    _save(fig, path)


def write_training_curves(name: str, models: list[str], root: Path = Path(".")) -> list[dict]:
    """plots/losses/<ds>.json (every curve of the models' checkpoints under data/models/<ds>; an empty list
    when none keeps one) and each model's figure; returns the rows. Cutoffs are named by the slice manifest's
    labels."""
    from drift.store.slices import SliceManifest  # lazy: the slice table's readers

    p = dataset_paths(name, root)
    labels: dict[int, str] = {}
    if p["slice_manifest"].exists():
        labels = {s.index: s.label for s in SliceManifest.from_file(p["slice_manifest"], name).slices}
    rows = curve_rows(p["models"], models, labels)
    write_json(p["losses"], rows)
    for model, curves in curves_by_model(rows).items():
        by_cutoff: dict[str, list[list[float]]] = {}
        for (cutoff, _), losses in curves.items():
            by_cutoff.setdefault(cutoff, []).append(losses)
        means = {
            c: np.mean(ls, axis=0).tolist() for c, ls in by_cutoff.items() if len({len(x) for x in ls}) == 1
        }
        seeds = len({seed for _, seed in curves})
        drop = last_epoch_drop(list(curves.values()))
        status = "still falling" if still_falling(list(curves.values())) else "not falling"
        last = "" if drop is None else f"\nlast epoch's drop {drop:.1%} of the first epoch's loss: {status}"
        losses_plot(
            means,
            p["plots"] / model / FIGURE,
            f"{name} · {model}: training loss, {seeds} seed{'s' if seeds > 1 else ''}{last}",
        )
    return rows


def training_html(name: str, root: Path, tables: dict, fig: Callable[..., str]) -> str:
    """The HTML report's "Training" section: a line for each model whose loss was still falling at its last
    epoch or whose ID is below baseline-linear's, then each ranked model's figure (`fig`: the page's figure
    function); a note when the report has no curves."""
    curves = read_curves(root, name)
    plots = dataset_paths(name, root)["plots"]
    ranked = [r for r in tables["ranking"] if not r.get("reference")]
    linear = next((r for r in tables["ranking"] if r["model"] == REFERENCES["linear"]), None)
    lines = [
        still_falling_message(name, r["model"], curves[r["model"]])
        for r in ranked
        if still_falling(curves.get(r["model"], []))
    ]
    lines += [
        below_linear_message(
            name, r["model"], r["id"], linear["id"], tables["metric"], tables["higher_is_better"]
        )
        for r in ranked
        if linear is not None and r.get("margin_linear") is not None and r["margin_linear"] < 0
    ]
    out = (
        '<p class="note">The mean training loss of each epoch (the loss each step minimised, averaged over the '
        "epoch's rows), one line per training cutoff, averaged over seeds. A loss still falling at the last epoch "
        f"(a last drop above {STILL_FALLING:.0%} of the first epoch's loss, averaged over cutoffs and seeds) says "
        f"more epochs may learn more. {html.escape(BELOW_LINEAR_NOTE)}.</p>"
    )
    out += "".join(f'<p class="warn">{html.escape(line)}</p>' for line in lines)
    if not curves:
        return out + (
            '<p class="note">No training curves in this report (plots/losses/'
            f"{html.escape(name)}.json): its checkpoints were trained before they kept one; re-run "
            f"<code>dvc repro report@{html.escape(name)}</code>.</p>"
        )
    figures = "".join(
        fig(plots / r["model"] / FIGURE, f"{r['model']}: mean training loss per epoch") for r in ranked
    )
    return out + f'<div class="grid">{figures}</div>'

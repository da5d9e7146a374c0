"""The labels in sight: the classes, labels or ratings of a dataset by name, and what happens to each over
time.

From the slice table (its slice and label columns) and the slice manifest's label names: each class's share of
every slice (binary, multiclass; regression: each rating's share, or the mean rating of a target with more
than MAX_RATINGS values), or each label's positive rate (multi-label): plots/<ds>/labels.png and labels.json.
From each model's eval file `per_class` (drift/evaluate/fill_matrices.py: recall per class, AUC per label, MSE
per rating, scored beside every cell): per cutoff, each class's score on the diagonal cell and the mean over
its later cells, seeds averaged cell by cell (plots/<ds>/<model>/classes.png and classes.json), and the
confusion counts of one cell summed over the seeds (confusion.json). The JSON rows carry DVC's heatmap fields,
since plots/<ds> is one such plot: `train` (the slice, the cutoff, or the true class), `eval` (the class, or
the predicted one) and `value`; their strings are plot_text, so the page and `drift show` take the names from
the slice manifest where it is there (`manifest_names`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from drift.core.paths import dataset_paths
from drift.core.stage import write_json
from drift.evaluate.eval_result import MAX_RATINGS, ClassScores, EvalResult
from drift.protocol.matrix import from_json
from drift.protocol.summary import mean_over_seeds
from drift.report.plots import class_score_plot, label_share_plot, plot_text
from drift.store.slices import SliceManifest, read_slice_table

# what the per-class score is, in words, and whether higher is better
CLASS_METRIC_WORDS = {"recall": ("recall", True), "auc": ("AUC", True), "mse": ("MSE", False)}
MULTILABEL_COUNTS = ["tn", "fp", "fn", "tp"]  # the columns of a multi-label confusion row


def _value(v) -> float | None:
    return None if v is None or not np.isfinite(v) else round(float(v), 6)


def label_shares(task: str, manifest: SliceManifest, slice_ids, labels) -> list[dict]:
    """Rows {train: slice, eval: class, value, rows, what} over every slice with rows, classes in the
    manifest's order; `what` the value is: binary and multiclass the "share" of each class, multilabel each
    label's "positive rate", regression each rating's "share" (ratings in order, named by value), or for a
    target of more than MAX_RATINGS values one row per slice, its "mean rating". `rows`: the slice's rows,
    train and test."""
    slice_ids = np.asarray(slice_ids)
    y = np.asarray(labels, dtype=np.float64)
    if task == "multilabel":
        what, names = "positive rate", list(manifest.label_names)
        y = y.reshape(len(slice_ids), -1)
        per_class = [y[:, c] for c in range(y.shape[1])]
        names = names if len(names) == y.shape[1] else [str(c) for c in range(y.shape[1])]
    elif task == "regression":
        levels = np.unique(y)
        if len(levels) > MAX_RATINGS:
            what, names, per_class = "mean rating", ["mean rating"], [y]
        else:
            what, names = "share", [f"{v:g}" for v in levels]
            per_class = [(y == v).astype(np.float64) for v in levels]
    else:
        what, names = "share", list(manifest.label_names)
        per_class = [(y == c).astype(np.float64) for c in range(len(names))]
    rows = []
    for s in manifest.slices:
        in_slice = slice_ids == s.index
        n = int(in_slice.sum())
        if not n:
            continue
        for name, values in zip(names, per_class):
            rows.append(
                {
                    "train": plot_text(s.label),
                    "eval": plot_text(name),
                    "value": _value(values[in_slice].mean()),
                    "rows": n,
                    "what": what,
                }
            )
    return rows


def _grid(rows: list[dict], key: str = "value") -> tuple[list[str], list[str], np.ndarray]:
    """(train labels, eval labels, [train, eval] array of `key`, NaN for null) of long-format rows."""
    first = list(dict.fromkeys(r["train"] for r in rows))
    second = list(dict.fromkeys(r["eval"] for r in rows))
    grid = np.full((len(first), len(second)), np.nan)
    for r in rows:
        if r.get(key) is not None:
            grid[first.index(r["train"]), second.index(r["eval"])] = r[key]
    return first, second, grid


def write_label_shares(name: str, root: Path = Path(".")) -> list[dict] | None:
    """plots/<name>/labels.json and labels.png from the slice table and its manifest; None (nothing written)
    when the slice table is not there."""
    p = dataset_paths(name, root)
    if not (p["slice_manifest"].exists() and p["slices"].exists()):
        return None
    manifest = SliceManifest.from_file(p["slice_manifest"], name)
    table = read_slice_table(p["slices"], columns=["slice", "label"])
    label = table.column("label").combine_chunks()
    if manifest.task == "multilabel":  # a fixed-size list per row: its values, one row of the array each
        labels = label.flatten().to_numpy().reshape(table.num_rows, -1)
    else:
        labels = label.to_numpy()
    rows = label_shares(manifest.task, manifest, table.column("slice").to_numpy(), labels)
    if not rows:
        return None
    write_json(p["plots"] / "labels.json", rows)
    what = rows[0]["what"]
    slices, classes, values = _grid(rows)
    real = {plot_text(n): n for n in [s.label for s in manifest.slices] + list(manifest.label_names)}
    slices, classes = [real.get(s, s) for s in slices], [real.get(c, c) for c in classes]
    stacked = what == "share"
    mean = None
    if manifest.task == "regression" and stacked:  # the mean rating from the shares, on its own axis
        mean = values @ np.array([float(c) for c in classes])
    label_share_plot(
        slices,
        classes,
        values,
        p["plots"] / "labels.png",
        f"{name}: {what} of each {'label' if manifest.task == 'multilabel' else 'class'} per slice",
        what,
        stacked=stacked,
        mean=mean,
    )
    return rows


def class_rows(scores: ClassScores, slice_labels: list[str]) -> list[dict]:
    """Per trained cutoff i and class: {train: cutoff, eval: class, value: the class's score on the diagonal
    cell (i, i), future: the mean over its later cells (i, j > i), future_cells: how many, metric}, from the
    seeds' per-class matrices averaged cell by cell; null where the class has no score. A class's ID and
    Future over the whole matrix follow from these rows (class_summary)."""
    per_seed = [np.array([from_json(m) for m in seed]) for seed in scores.seeds.values()]
    if not per_seed or not per_seed[0].size:
        return []
    rows = []
    matrices = [mean_over_seeds([s[c] for s in per_seed]) for c in range(len(scores.classes))]
    for i, cutoff in enumerate(slice_labels):
        if not any(np.isfinite(m[i]).any() for m in matrices):
            continue  # no model f_i (an untrained cutoff) or no cell of its row scored
        for name, m in zip(scores.classes, matrices):
            later = m[i, i + 1 :][np.isfinite(m[i, i + 1 :])]
            rows.append(
                {
                    "train": plot_text(cutoff),
                    "eval": plot_text(name),
                    "value": _value(m[i, i]),
                    "future": _value(later.mean()) if len(later) else None,
                    "future_cells": int(len(later)),
                    "metric": scores.metric,
                }
            )
    return rows


def class_summary(rows: list[dict]) -> list[dict]:
    """Per class, in order: {class, id, future, decay}: ID the mean of its diagonal cells, Future the mean of
    its later cells (each row's mean weighted by its cells), Decay oriented so that positive is worse, as
    drift.protocol.summary.id_future_decay computes them on the class's seed-averaged matrix."""
    higher = CLASS_METRIC_WORDS[rows[0]["metric"]][1] if rows else True
    out = []
    for name in dict.fromkeys(r["eval"] for r in rows):
        mine = [r for r in rows if r["eval"] == name]
        diagonal = [r["value"] for r in mine if r["value"] is not None]
        cells = sum(r["future_cells"] for r in mine if r["future"] is not None)
        id_ = float(np.mean(diagonal)) if diagonal else None
        future = (
            sum(r["future"] * r["future_cells"] for r in mine if r["future"] is not None) / cells
            if cells
            else None
        )
        decay = None if id_ is None or future is None else (id_ - future if higher else future - id_)
        out.append({"class": name, "id": id_, "future": future, "decay": decay})
    return out


def confusion_rows(scores: ClassScores, slice_labels: list[str]) -> list[dict]:
    """The confusion counts of scores.cell summed over the seeds: {train: true class, eval: predicted class (a
    multi-label row: tn, fp, fn, tp), value: count, cutoff, slice, seeds}; none without a cell."""
    if not scores.cell or not scores.confusion:
        return []
    counts = np.sum([np.asarray(c, dtype=np.int64) for c in scores.confusion.values()], axis=0)
    i, j = scores.cell
    columns = MULTILABEL_COUNTS if scores.metric == "auc" else scores.classes
    return [
        {
            "train": plot_text(true),
            "eval": plot_text(said),
            "value": int(counts[a, b]),
            "cutoff": plot_text(slice_labels[i]),
            "slice": plot_text(slice_labels[j]),
            "seeds": len(scores.confusion),
        }
        for a, true in enumerate(scores.classes)
        for b, said in enumerate(columns)
    ]


def write_class_outputs(name: str, results: dict[str, EvalResult], root: Path = Path(".")) -> list[str]:
    """For each model whose eval file has per-class scores: plots/<name>/<model>/classes.json, classes.png and
    confusion.json. Returns the models written."""
    plots = dataset_paths(name, root)["plots"]
    written = []
    for model, result in results.items():
        scores = result.per_class
        rows = class_rows(scores, result.labels) if scores else []
        if not scores or not rows:
            continue
        write_json(plots / model / "classes.json", rows)
        cutoffs, _, diagonal = _grid(rows)
        future = _grid(rows, "future")[2]
        real = {plot_text(label): label for label in result.labels}  # the figure names them as they are
        cutoffs, classes = [real.get(c, c) for c in cutoffs], scores.classes
        word = CLASS_METRIC_WORDS[scores.metric][0]
        class_score_plot(
            cutoffs,
            classes,
            diagonal,
            future,
            plots / model / "classes.png",
            f"{name} · {model}: {word} of each class per training cutoff",
            word,
        )
        confusion = confusion_rows(scores, result.labels)
        if confusion:
            write_json(plots / model / "confusion.json", confusion)
        written.append(model)
    return written


def manifest_names(name: str, root: Path = Path(".")) -> dict[str, str]:
    """{a name as the plots data holds it (plot_text): the name as the data has it}, from the slice manifest's
    label names; empty without the manifest (the plots data's names are then shown as they are)."""
    path = dataset_paths(name, root)["slice_manifest"]
    if not path.exists():
        return {}
    return {plot_text(n): n for n in SliceManifest.from_file(path, name).label_names}


def load_classes(name: str, model: str, root: Path = Path(".")) -> dict | None:
    """One model's per-class results as the report stage wrote them: {metric (in words), higher_is_better,
    classes: class_summary rows, rows: classes.json, confusion: confusion.json rows or []}, the names as the
    data has them where the slice manifest is there; None when the report has none for the model."""
    folder = dataset_paths(name, root)["plots"] / model
    if not (folder / "classes.json").exists():
        return None
    real = manifest_names(name, root)

    def named(rows: list[dict], *keys: str) -> list[dict]:
        return [{**r, **{k: real.get(r[k], r[k]) for k in keys}} for r in rows]

    rows = named(json.loads((folder / "classes.json").read_text()), "eval")
    confusion = folder / "confusion.json"
    word, higher = CLASS_METRIC_WORDS[rows[0]["metric"]] if rows else ("score", True)
    return {
        "metric": word,
        "higher_is_better": higher,
        "classes": class_summary(rows),
        "rows": rows,
        "confusion": named(json.loads(confusion.read_text()), "train", "eval") if confusion.exists() else [],
    }


def load_label_shares(name: str, root: Path = Path(".")) -> list[dict] | None:
    """plots/<name>/labels.json with the names as the data has them where the slice manifest is there; None
    without the file."""
    path = dataset_paths(name, root)["plots"] / "labels.json"
    if not path.exists():
        return None
    real = manifest_names(name, root)
    return [{**r, "eval": real.get(r["eval"], r["eval"])} for r in json.loads(path.read_text())]

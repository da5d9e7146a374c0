"""The results as data for notebooks and scripts: drift matrices, the summary table and the comparison of two
revisions as polars DataFrames, read from what the report stage commits (metrics/, plots/) and, per seed, from
the evaluate stage's data/eval/. `drift show`, `drift summary` and `drift compare` read their data here too.

```python
from drift.report import api

api.matrices("sotu", "ffn-s")  # one row per cell of the seed-averaged matrix
api.summary("sotu")  # what `drift summary sotu` prints
api.classes("synth-portraits", "cnn-s")  # each class's ID, Future and Decay, as `drift show` lists them
api.compare("HEAD~1")  # what `drift compare HEAD~1` prints
```

An unknown dataset or model is a DriftError, one line listing the valid names. docs/python-api.md shows more.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import polars as pl

from drift.core.errors import DriftError, close_matches
from drift.core.params import load_params
from drift.core.paths import METRICS, dataset_paths
from drift.evaluate.eval_result import read_eval
from drift.protocol.summary import STATS, check_order, last_epoch_drop, still_falling
from drift.report.results import (
    STAGE_FOLDERS,
    _open_repo,
    diff_metrics,
    diff_params,
    label_free,
    load_matrix,
    load_results,
    metrics_at,
    not_rerun,
    params_at,
    read_metrics,
    report_datasets,
    report_locks_at,
    report_models,
    summary_rows,
)
from drift.report.training import read_curves

MATRIX_SCHEMA = {
    "dataset": pl.String,
    "model": pl.String,
    "seed": pl.Int64,  # null: the mean over the seeds
    # the row: trained up to this slice (cast to an Enum of the labels in time order)
    "train_slice": pl.String,
    "eval_slice": pl.String,  # the column: evaluated on this slice
    "metric": pl.String,
    "value": pl.Float64,  # null: a cell no metric scores
}
CLASS_SCHEMA = {
    "dataset": pl.String,
    "model": pl.String,
    "class": pl.String,  # named as the data has it where the slice manifest is there
    "metric": pl.String,  # the per-class score: recall, AUC or MSE
    "higher_is_better": pl.Boolean,
    "id": pl.Float64,  # null: the class scores no cell
    "future": pl.Float64,
    "decay": pl.Float64,  # positive is worse, whichever way the metric points
}
SUMMARY_SCHEMA = {
    "dataset": pl.String,
    "rank": pl.Int64,  # null for a reference model
    "model": pl.String,
    "family": pl.String,
    "reference": pl.Boolean,
    "metric": pl.String,
    "higher_is_better": pl.Boolean,
    "k": pl.Int64,
    "seeds": pl.Int64,
    **{s: pl.Float64 for s in STATS},
    **{f"{s}_std": pl.Float64 for s in STATS},
    "margin_prior": pl.Float64,
    "margin_linear": pl.Float64,
    "margin_tfidf": pl.Float64,
    "beats_prior": pl.Boolean,
    "below_linear": pl.Boolean,
    "still_falling": pl.Boolean,
}
COMPARE_SCHEMA = {
    "dataset": pl.String,
    "model": pl.String,
    "reference": pl.Boolean,
    "metric": pl.String,
    "higher_is_better": pl.Boolean,
    "status": pl.String,  # changed, unchanged, not re-run, added, removed
    "stat": pl.String,  # id, future, decay
    "a": pl.Float64,
    "b": pl.Float64,
    "change": pl.Float64,  # b - a
    "improved": pl.Boolean,  # null: no change, or a side missing
}


def datasets(root: str | Path = ".") -> list[str]:
    """The datasets with a report (plots/<ds>/<model>/matrix.json).

    Example: `api.datasets()` gives `['sotu', 'synth-portraits']`.
    """
    return report_datasets(Path(root))


def models(dataset: str, root: str | Path = ".") -> list[str]:
    """The models with a matrix in the dataset's report, the cohort mean (`cohort-mean`) among them.

    Example: `api.models("synth-portraits")` gives `['baseline-linear', 'baseline-prior', 'cnn-s',
    'cohort-mean', 'mlp-s']`.
    """
    _check("dataset", dataset, datasets(root))
    return report_models(Path(root), dataset)


def matrices(
    dataset: str, model: str | None = None, seeds: bool = False, root: str | Path = "."
) -> pl.DataFrame:
    """A dataset's drift matrices in long form, one row per cell (MATRIX_SCHEMA): one model's, or (None) every
    model's with a metrics file (the cohort mean is asked for by name). `seeds=False`: the seed mean the
    report committed (plots/<ds>/<model>/matrix.json), `seed` null; `seeds=True`: each seed's matrix from the
    evaluate stage's data/eval/<ds>/<model>.json (a DVC output: `dvc pull` or `dvc repro evaluate@<ds>` brings
    it). The slice columns are an Enum of the labels in time order.

    Example: `api.matrices("sotu", "ffn-s").pivot(on="eval_slice", index="train_slice", values="value")`, the
    K x K matrix.
    """
    root = Path(root)
    valid = models(dataset, root)
    paths = dataset_paths(dataset, root)
    trained = [m for m in valid if (paths["metrics"] / f"{m}.json").exists()]
    if model is not None:
        _check("model", model, valid, f" for {dataset}")
    if seeds and model is not None and model not in trained:
        raise DriftError(
            f"{model} is no trained model of {dataset} (the mean of the others' matrices): it has no seeds; "
            f"give one of {', '.join(trained)}, or seeds=False"
        )
    rows: list[dict[str, Any]] = []
    for name in [model] if model is not None else trained:
        rows += _seed_rows(dataset, name, root) if seeds else _mean_rows(dataset, name, root)
    frame = pl.DataFrame(rows, schema=MATRIX_SCHEMA)
    in_order = pl.Enum(list(dict.fromkeys(r["train_slice"] for r in rows)))
    return frame.with_columns(pl.col("train_slice", "eval_slice").cast(in_order))


def _mean_rows(dataset: str, model: str, root: Path) -> list[dict[str, Any]]:
    """The cells of the committed seed mean; the metric from the model's metrics file (the cohort mean: any)."""
    paths = dataset_paths(dataset, root)
    own = paths["metrics"] / f"{model}.json"
    metrics_file = own if own.exists() else min(paths["metrics"].glob("*.json"), default=None)
    metric = read_metrics(metrics_file, dataset)["metric"] if metrics_file else None
    cells = json.loads((paths["plots"] / model / "matrix.json").read_text())
    return [
        {
            "dataset": dataset,
            "model": model,
            "seed": None,
            "train_slice": cell["train"],
            "eval_slice": cell["eval"],
            "metric": metric,
            "value": cell["value"],
        }
        for cell in cells
    ]


def _seed_rows(dataset: str, model: str, root: Path) -> list[dict[str, Any]]:
    """The cells of each seed's matrix, labelled as the report labels the mean's (plot_text)."""
    from drift.report.plots import plot_text  # lazy: matplotlib, only for the seeds

    result = read_eval(dataset_paths(dataset, root)["eval"], model)
    labels = [plot_text(label) for label in result.labels]
    return [
        {
            "dataset": dataset,
            "model": model,
            "seed": int(seed),
            "train_slice": labels[i],
            "eval_slice": labels[j],
            "metric": result.metric,
            "value": value,
        }
        for seed, matrix in result.seeds.items()
        for i, row in enumerate(matrix)
        for j, value in enumerate(row)
    ]


def matrix(dataset: str, model: str, deviation: bool = False, root: str | Path = ".") -> dict[str, Any]:
    """One seed-averaged matrix (or its deviation from the cohort mean) as `drift show` draws it: {"labels",
    "matrix" (a K x K numpy array, NaN for an empty cell), "dataset", "model", "deviation"} and the model's
    metrics (ID, Future, Decay, ...).

    Example: `api.matrix("sotu", "ffn-s")["matrix"].shape` gives `(18, 18)`.
    """
    return load_matrix(Path(root), dataset, model, deviation)


def classes(dataset: str, model: str, root: str | Path = ".") -> pl.DataFrame:
    """One model's ID, Future and Decay per class (CLASS_SCHEMA), one row per class in the report's order, as
    `drift show` lists them; no rows when the report has no per-class scores for the model (the cohort mean,
    a regression task).

    Example: `api.classes("synth-portraits", "cnn-s").sort("decay", descending=True)`, the classes that decay
    most first.
    """
    from drift.report.labels import load_classes  # lazy: matplotlib, only for the per-class scores

    _check("dataset", dataset, datasets(root))
    _check("model", model, models(dataset, root), f" for {dataset}")
    found = load_classes(dataset, model, Path(root))
    if found is None:
        return pl.DataFrame(schema=CLASS_SCHEMA)
    of_model = {"dataset": dataset, "model": model, "metric": found["metric"]}
    rows = [{**of_model, "higher_is_better": found["higher_is_better"], **r} for r in found["classes"]]
    return pl.DataFrame(rows, schema=CLASS_SCHEMA)


def metrics(dataset: str | None = None, root: str | Path = ".") -> dict[str, dict[str, dict[str, Any]]]:
    """{dataset: {model: its metrics/<ds>/<model>.json}} for one dataset or every one the workspace's
    params.yaml declares (every one with metrics without that file).

    Example: `api.metrics("sotu")["sotu"]["ffn-s"]["decay"]`.
    """
    root = Path(root)
    if dataset is not None:
        with_metrics = {p.parent.name for p in (root / METRICS).glob("*/*.json")} - set(STAGE_FOLDERS)
        _check("dataset", dataset, with_metrics)
    params = root / "params.yaml"
    declared = list(load_params(params).datasets) if params.exists() else None
    return load_results(root / METRICS, dataset, declared)


@dataclass
class SummaryRecords:
    """What `drift summary` shows, per dataset: its rows in rank order (`drift summary --json`), the
    label-free signals of each model (drift.report.results.label_free) and each model's training-loss curves.
    """

    rows: dict[str, list[dict[str, Any]]]
    label_free: dict[str, dict[str, dict[str, Any]]]
    curves: dict[str, dict[str, list[list[float]]]]


def summary_records(dataset: str | None = None, by: str = "decay", root: str | Path = ".") -> SummaryRecords:
    """The summary as records: each dataset's metrics in rank order `by` decay, future or id (summary_rows),
    each row with its label-free signals, `below_linear` (not for a reference), `last_epoch_drop` and
    `still_falling` where the model has loss curves.

    Example: `api.summary_records("sotu").rows["sotu"][0]["model"]`.
    """
    root = Path(root)
    check_order(by)
    rows = {name: summary_rows(per_model, by) for name, per_model in metrics(dataset, root).items()}
    signals = {name: label_free(root, name) for name in rows}
    curves = {name: read_curves(root, name) for name in rows}  # plots/losses/<ds>.json
    for name, dataset_rows in rows.items():
        for row in dataset_rows:
            if row["model"] in signals[name]:
                row["label_free"] = signals[name][row["model"]]
            if not row["reference"]:
                margin = row.get("margin_linear")
                row["below_linear"] = None if margin is None else margin < 0
            if row["model"] in curves[name]:
                mine = curves[name][row["model"]]
                row["last_epoch_drop"], row["still_falling"] = last_epoch_drop(mine), still_falling(mine)
    return SummaryRecords(rows, signals, curves)


def summary(dataset: str | None = None, by: str = "decay", root: str | Path = ".") -> pl.DataFrame:
    """The summary table (`drift summary`) as one frame (SUMMARY_SCHEMA): a row per model of each dataset, in
    rank order, references last with a null rank. The nested parts (confidence intervals, the peers'
    protocols, the label-free signals) are in summary_records.

    Example: `api.summary("sotu").select("rank", "model", "id", "future", "decay")`.
    """
    records = summary_records(dataset, by, root).rows
    rows = [{"dataset": name, **row} for name, dataset_rows in records.items() for row in dataset_rows]
    return pl.DataFrame(
        [{key: row.get(key) for key in SUMMARY_SCHEMA} for row in rows], schema=SUMMARY_SCHEMA
    )


class Comparison(TypedDict):
    """Two revisions compared (`drift compare --json`): the revisions, the params that differ ({key: {"a",
    "b"}}) and per dataset one row per model (drift.report.results.diff_metrics, with "not re-run")."""

    a: str
    b: str
    params: dict[str, dict[str, Any]]
    datasets: dict[str, list[dict[str, Any]]]


def compare_records(rev_a: str, rev_b: str = "workspace", root: str | Path = ".") -> Comparison:
    """What changed in ID, Future and Decay per model from `rev_a` to `rev_b` (git revisions, DVC experiments
    or "workspace"), read through DVC, and the params that changed.

    Example: `api.compare_records("HEAD~1")["params"]`.
    """
    repo = _open_repo(Path(root))
    with repo:
        a, b = metrics_at(repo, rev_a), metrics_at(repo, rev_b)
        params = diff_params(params_at(repo, rev_a), params_at(repo, rev_b))
        locks = report_locks_at(repo, rev_a), report_locks_at(repo, rev_b)
    if not a and not b:
        raise DriftError(f"no drift metrics (metrics/<dataset>/<model>.json) at {rev_a} or {rev_b}")
    return {"a": rev_a, "b": rev_b, "params": params, "datasets": not_rerun(diff_metrics(a, b), *locks)}


def compare(
    rev_a: str, rev_b: str = "workspace", dataset: str | None = None, root: str | Path = "."
) -> pl.DataFrame:
    """The comparison (`drift compare`) as one frame (COMPARE_SCHEMA): a row per dataset, model and statistic
    (id, future, decay) with its value at a and at b, the change and whether it is for the better.

    Example: `api.compare("HEAD~1", dataset="sotu").filter(pl.col("stat") == "decay")`.
    """
    rows = compare_records(rev_a, rev_b, root)["datasets"]
    if dataset is not None:
        _check("dataset", dataset, rows, f" at {rev_a} or {rev_b}")
        rows = {dataset: rows[dataset]}
    records = [
        {
            "dataset": name,
            **{key: row[key] for key in ("model", "reference", "metric", "higher_is_better", "status")},
            "stat": s,
            **row[s],  # a, b, change, improved
        }
        for name, dataset_rows in rows.items()
        for row in dataset_rows
        for s in STATS
    ]
    return pl.DataFrame(records, schema=COMPARE_SCHEMA)


def _check(what: str, name: str, valid, where: str = "") -> None:
    """A one-line DriftError for a `name` not in `valid`, listing the valid ones."""
    if name not in valid:
        if not valid:
            raise DriftError(
                f"no {what} has results here: run `dvc repro` (or check out a commit that has them)"
            )
        raise DriftError(f"unknown {what} {name!r}{where}: {close_matches(name, valid)}")

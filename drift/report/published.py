"""The authors' published runs (learning-mechanisms/drift-happens, CC BY 4.0) as data, and ours against them.

drift/report/published/<dataset>.json.gz holds, for Yearbook, Amazon Reviews and arXiv, every model's seed-averaged
K x K drift matrix as the authors' website publishes it, in their units (accuracy and macro AUC in %, balanced
MSE as is), with our registry name, family and the ID / Future / Decay the paper prints (values.tex).
`check_printed` recomputes ID / Future / Decay with our protocol code (drift.protocol.summary) and lists every
value that disagrees with the print; `compare` sets one of our evaluations beside the published matrix, cell by
cell, slices aligned by label. Source, commit and licence: drift/report/published/README.md.
"""
from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from drift.core.errors import DriftError, close_matches
from drift.core.paths import dataset_paths
from drift.protocol.summary import STATS, id_future_decay, mean_over_seeds, ranking
from drift.report.results import load_matrix

DATA = Path(__file__).with_name("published")
DATASETS = ("yearbook", "amazon", "arxiv")
ALIASES = {"amazon_reviews": "amazon", "amazon-reviews-23": "amazon"}  # the authors' names of our datasets


def resolve_dataset(dataset: str) -> str:
    """Our dataset name for `dataset` (theirs accepted too); anything else is a one-line DriftError."""
    name = ALIASES.get(dataset, dataset)
    if name not in DATASETS:
        raise DriftError(f"no published runs for dataset {dataset!r}: {close_matches(dataset, DATASETS)}")
    return name


@lru_cache(maxsize=None)
def _read(dataset: str) -> dict:
    return json.loads(gzip.decompress((DATA / f"{dataset}.json.gz").read_bytes()))


def load_published(dataset: str) -> dict:
    """One dataset's published runs: the file's fields (slices, metric, unit, scale, higher_is_better,
    printed_decimals, stored_decimals, source) and models, in the paper's ranking order, each with name (ours),
    display, preset (theirs), family, published_family, seeds, printed {id, future, decay} and matrix, a
    [K, K] float array in the published unit (ours x scale)."""
    data = dict(_read(resolve_dataset(dataset)))
    data["models"] = [{**{k: v for k, v in m.items() if k != "values"},
                       "matrix": np.array(m["values"], dtype=np.float64)} for m in data["models"]]
    return data


def published_model(data: dict, model: str) -> dict:
    """The model of `data` named `model`: our registry name, the paper's display name or the authors' preset id."""
    for m in data["models"]:
        if model.lower() in (m["name"], m["display"].lower(), m["preset"]):
            return m
    names = [m["name"] for m in data["models"]]
    raise DriftError(f"no published run of {model!r} on {data['dataset']}: {close_matches(model, names)}")


def published_stats(dataset: str) -> list[dict]:
    """Every published model's ID / Future / Decay, computed from its matrix with our protocol code, beside
    the printed ones; rows {model, display, family, published_family, id, future, decay, printed}."""
    data = load_published(dataset)
    return [{"model": m["name"], "display": m["display"], "family": m["family"],
             "published_family": m["published_family"], **id_future_decay(m["matrix"], data["higher_is_better"]),
             "printed": m["printed"]} for m in data["models"]]


def published_ranking(dataset: str, by: str = "decay") -> list[dict]:
    """The published models ranked as the paper ranks them (Tables 5, 13, 21: Decay, smallest first), from the
    computed statistics; each row also carries display, family and the printed values."""
    rows = {r["model"]: r for r in published_stats(dataset)}
    higher = load_published(dataset)["higher_is_better"]
    return [{**rows[r["model"]], "rank": r["rank"]} for r in ranking(rows, higher, by)]


def print_tolerance(data: dict) -> float:
    """How far a recomputed statistic may lie from the printed one: half a unit of the printed last digit, plus
    half a unit of the stored cells' last digit (a mean of rounded cells moves by at most that), plus float slack."""
    return 0.5 * 10.0 ** -data["printed_decimals"] + 0.5 * 10.0 ** -data["stored_decimals"] + 1e-9


def check_printed(dataset: str) -> list[str]:
    """Every recomputed ID / Future / Decay farther from the printed value than `print_tolerance`, one line each;
    empty when our protocol code reproduces every printed value of the dataset."""
    data = load_published(dataset)
    tol, d = print_tolerance(data), data["printed_decimals"]
    bad = []
    for row in published_stats(dataset):
        for s in STATS:
            if row[s] is None or abs(row[s] - row["printed"][s]) > tol:
                computed = "none" if row[s] is None else f"{row[s]:.{d + 3}f}"
                bad.append(f"{dataset} {row['model']} {s}: computed {computed}, printed {row['printed'][s]:.{d}f}")
    return bad


# -----------------------------------------------------------------------------
# ours against theirs

def our_result(root: Path, dataset: str, model: str) -> dict:
    """One of our models' seed-averaged matrix: data/eval/<ds>/<model>.json (every seed, averaged cell by
    cell), else the report's plots/<ds>/<model>/matrix.json. Returns {labels, matrix, metric, higher_is_better,
    seeds, source}."""
    p = dataset_paths(dataset, root)
    evaluation = p["eval"] / f"{model}.json"
    if evaluation.exists():
        result = json.loads(evaluation.read_text())
        if not result.get("seeds"):
            raise DriftError(f"{evaluation} has no seed's matrix: run `dvc repro evaluate@{dataset}`")
        return {"labels": [str(x) for x in result["labels"]], "matrix": mean_over_seeds(list(result["seeds"].values())),
                "metric": result["metric"], "higher_is_better": result["higher_is_better"],
                "seeds": len(result["seeds"]), "source": str(evaluation)}
    if (p["plots"] / model / "matrix.json").exists():
        m = load_matrix(root, dataset, model)
        return {"labels": m["labels"], "matrix": m["matrix"], "metric": m["metric"],
                "higher_is_better": m["higher_is_better"], "seeds": m.get("seeds"),
                "source": str(p["plots"] / model / "matrix.json")}
    raise DriftError(f"no results of {model} on {dataset} in {Path(root).resolve()} (neither {evaluation} nor "
                     f"{p['plots'] / model / 'matrix.json'}): run `dvc repro report@{dataset}` with {model} in train.models")


def _aligned(ours: list[str], theirs: list[str], dataset: str) -> list[int]:
    """For each published slice label, its index among ours; a one-line error when the label sets differ."""
    missing, extra = [x for x in theirs if x not in ours], [x for x in ours if x not in theirs]
    if missing or extra:
        def show(labels):
            return ", ".join(labels[:5]) + (f" (+{len(labels) - 5} more)" if len(labels) > 5 else "") or "none"
        raise DriftError(f"the slices of our {dataset} run do not match the published ones: missing {show(missing)}; "
                         f"extra {show(extra)}; set {dataset}.slices as the paper preset params/paper-{dataset}.yaml does")
    return [ours.index(x) for x in theirs]


def compare(ours: dict, dataset: str, model: str) -> dict:
    """Our result (`our_result`'s dict) beside the published matrix of `model`, in the published unit: ours and
    theirs ID / Future / Decay and their deltas (ours - published), and the cell-wise difference (ours -
    published) with its mean absolute value and the largest cell. Slices are aligned by label."""
    data = load_published(dataset)
    pub = published_model(data, model)
    if ours["metric"] != data["metric"]:
        raise DriftError(f"our result holds {ours['metric']}, the published {data['dataset']} matrices "
                         f"{data['metric']}: compare a {data['dataset']} evaluation")
    order = _aligned(ours["labels"], data["slices"], data["dataset"])
    mine = np.asarray(ours["matrix"], dtype=np.float64)[np.ix_(order, order)] * data["scale"]
    diff = mine - pub["matrix"]
    stats_ours = id_future_decay(mine, data["higher_is_better"])
    stats_pub = id_future_decay(pub["matrix"], data["higher_is_better"])
    filled = np.isfinite(diff)
    worst = None
    if filled.any():
        i, j = np.unravel_index(np.nanargmax(np.abs(diff)), diff.shape)
        worst = {"train": data["slices"][i], "eval": data["slices"][j], "ours": float(mine[i, j]),
                 "published": float(pub["matrix"][i, j]), "difference": float(diff[i, j])}
    return {"dataset": data["dataset"], "model": pub["name"], "display": pub["display"],
            "metric": data["metric"], "unit": data["unit"], "higher_is_better": data["higher_is_better"],
            "slices": data["slices"], "source": ours.get("source"), "seeds": ours.get("seeds"),
            "published_seeds": len(pub["seeds"]),
            "ours": stats_ours, "published": stats_pub,
            "delta": {s: None if stats_ours[s] is None else stats_ours[s] - stats_pub[s] for s in STATS},
            "cells": int(filled.sum()), "mean_abs_difference": float(np.abs(diff[filled]).mean()) if filled.any() else None,
            "largest": worst, "difference": [[None if not np.isfinite(v) else float(v) for v in row] for row in diff]}

"""The authors' published runs (learning-mechanisms/drift-happens, CC BY 4.0) as data, and ours against them.

drift/report/published/<dataset>.json.gz holds, for Yearbook, Amazon Reviews and arXiv, every model's
seed-averaged K x K drift matrix as the authors' website publishes it, in their units (accuracy and macro AUC
in %, balanced MSE as is), with our registry name, family and the ID / Future / Decay the paper prints
(values.tex). <dataset>.tables.json.gz holds the family and per-cutoff tables (`load_tables`). `check_printed`
recomputes ID / Future / Decay with our protocol code and lists every value that disagrees with the print;
`compare` sets one of our evaluations beside a published matrix, cell by cell over the slices both have, and
`compare_run` the workspace's whole run beside the paper (`drift paper`, the report's section). Source, commit
and licence: drift/report/published/README.md.

The published matrices score a cell with no rows 0.0 (our `evaluate.empty_cell: zero`; Yearbook's 1924 from
row 1924 on, EMPTY_TEST): a run of ours that left those cells empty is compared with them re-scored to 0.0
(`as_published`), the published figures as printed.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import numpy as np

from drift.core.errors import DriftError, close_matches
from drift.core.paths import dataset_paths
from drift.evaluate.eval_result import read_eval
from drift.protocol.summary import STATS, id_future_decay, ranking
from drift.report.results import load_matrix, report_models

DATA = Path(__file__).with_name("published")
# The slices whose held-out rows the authors' split leaves empty: it puts every row of a year with fewer than
# 3 portraits in train (drift_happens/sample/splits.py), and their loop (drift_happens/pipeline/evaluation.py)
# scores each cell (i, j <= i) on slice j's val + test rows, an empty set there, whose accuracy they log as
# 0.0 (drift_happens/evaluation/metrics.py). In every published Yearbook matrix column 1924 reads 0.0 from row
# 1924 on, and no other column does (tests/protocol/test_scoring_rules.py). Amazon and arXiv: none (their
# metrics score an empty set NaN, never logged).
EMPTY_TEST = {"yearbook": ("1924",)}
DATASETS = ("yearbook", "amazon", "arxiv")
ALIASES = {"amazon_reviews": "amazon", "amazon-reviews-23": "amazon"}  # the authors' names of our datasets


def resolve_dataset(dataset: str) -> str:
    """Our dataset name for `dataset` (theirs accepted too); anything else is a one-line DriftError."""
    name = ALIASES.get(dataset, dataset)
    if name not in DATASETS:
        raise DriftError(f"no published runs for dataset {dataset!r}: {close_matches(dataset, DATASETS)}")
    return name


@cache
def _read(dataset: str) -> dict:
    return json.loads(gzip.decompress((DATA / f"{dataset}.json.gz").read_bytes()))


def load_published(dataset: str) -> dict:
    """One dataset's published runs: the file's fields (slices, metric, unit, scale, higher_is_better,
    printed_decimals, stored_decimals, source) and models, in the paper's ranking order, each with name
    (ours), display, preset (theirs), family, published_family, seeds, printed {id, future, decay} and matrix,
    a [K, K] float array in the published unit (ours x scale)."""
    data = dict(_read(resolve_dataset(dataset)))
    data["models"] = [
        {**{k: v for k, v in m.items() if k != "values"}, "matrix": np.array(m["values"], dtype=np.float64)}
        for m in data["models"]
    ]
    return data


def load_tables(dataset: str) -> dict:
    """One dataset's published family and per-cutoff tables (Tables 6-10 and their Amazon / arXiv
    counterparts, website/data/<ds>/tables.json): cutoffs [{label, published_cutoff, ordered_by, rows [{rank,
    model (ours), paper_name, id, future, decay}]}], families {cutoffs, rows [{family, cells [{future,
    decay}]}]} in the paper's order, robustness [{model, paper_name, future, decay}], with metric, unit,
    printed_decimals, source."""
    name = resolve_dataset(dataset)
    return json.loads(gzip.decompress((DATA / f"{name}.tables.json.gz").read_bytes()))


def has_published(dataset: str) -> bool:
    """Whether the paper published runs of `dataset` (ours or the authors' name of it)."""
    return ALIASES.get(dataset, dataset) in DATASETS


def published_model(data: dict, model: str) -> dict:
    """The model of `data` named `model`: our registry name, the paper's display name or the authors' preset
    id."""
    for m in data["models"]:
        if model.lower() in (m["name"], m["display"].lower(), m["preset"]):
            return m
    names = [m["name"] for m in data["models"]]
    raise DriftError(f"no published run of {model!r} on {data['dataset']}: {close_matches(model, names)}")


def published_stats(dataset: str) -> list[dict]:
    """Every published model's ID / Future / Decay, computed from its matrix with our protocol code, beside
    the printed ones; rows {model, display, family, published_family, id, future, decay, printed}."""
    data = load_published(dataset)
    return [
        {
            "model": m["name"],
            "display": m["display"],
            "family": m["family"],
            "published_family": m["published_family"],
            **id_future_decay(m["matrix"], data["higher_is_better"]),
            "printed": m["printed"],
        }
        for m in data["models"]
    ]


def published_ranking(dataset: str, by: str = "decay") -> list[dict]:
    """The published models ranked as the paper ranks them (Tables 5, 13, 21: Decay, smallest first), from the
    computed statistics; each row also carries display, family and the printed values."""
    rows = {r["model"]: r for r in published_stats(dataset)}
    higher = load_published(dataset)["higher_is_better"]
    return [{**rows[r["model"]], "rank": r["rank"]} for r in ranking(rows, higher, by)]


def print_tolerance(data: dict) -> float:
    """How far a recomputed statistic may lie from the printed one: half a unit of the printed last digit,
    plus half a unit of the stored cells' last digit (a mean of rounded cells moves by at most that), plus
    float slack."""
    return 0.5 * 10.0 ** -data["printed_decimals"] + 0.5 * 10.0 ** -data["stored_decimals"] + 1e-9


def check_printed(dataset: str) -> list[str]:
    """Every recomputed ID / Future / Decay farther from the printed value than `print_tolerance`, one line
    each; empty when our protocol code reproduces every printed value of the dataset."""
    data = load_published(dataset)
    tol, d = print_tolerance(data), data["printed_decimals"]
    bad = []
    for row in published_stats(dataset):
        for s in STATS:
            if row[s] is None or abs(row[s] - row["printed"][s]) > tol:
                computed = "none" if row[s] is None else f"{row[s]:.{d + 3}f}"
                bad.append(
                    f"{dataset} {row['model']} {s}: computed {computed}, printed {row['printed'][s]:.{d}f}"
                )
    return bad


# -----------------------------------------------------------------------------
# ours against theirs


def our_result(root: Path, dataset: str, model: str) -> dict:
    """One of our models' seed-averaged matrix: data/eval/<ds>/<model>.json (every seed, averaged cell by
    cell), else the report's plots/<ds>/<model>/matrix.json. Returns {labels, matrix, metric,
    higher_is_better, seeds, source}."""
    p = dataset_paths(dataset, root)
    evaluation = p["eval"] / f"{model}.json"
    if evaluation.exists():
        result = read_eval(p["eval"], model)  # validated, with a seed at least
        return {
            "labels": result.labels,
            "matrix": result.matrix,
            "metric": result.metric,
            "higher_is_better": result.higher_is_better,
            "seeds": len(result.seeds),
            "source": str(evaluation),
        }
    if (p["plots"] / model / "matrix.json").exists():
        m = load_matrix(root, dataset, model)
        return {
            "labels": m["labels"],
            "matrix": m["matrix"],
            "metric": m["metric"],
            "higher_is_better": m["higher_is_better"],
            "seeds": m.get("seeds"),
            "source": str(p["plots"] / model / "matrix.json"),
        }
    raise DriftError(
        f"no results of {model} on {dataset} in {Path(root).resolve()} (neither {evaluation} nor "
        f"{p['plots'] / model / 'matrix.json'}): run `dvc repro report@{dataset}` with {model} in train.models"
    )


def our_models(root: Path, dataset: str) -> list[str]:
    """The models of `dataset` with results in the workspace under `root`: an evaluation
    (data/eval/<ds>/<model>.json) or a report matrix (plots/<ds>/<model>/matrix.json), the cohort mean aside.
    """
    from drift.report.outputs import (
        COHORT,  # lazy: the report stage's imports, kept out of the cli's reads
    )

    p = dataset_paths(dataset, root)
    evaluated = {f.stem for f in p["eval"].glob("*.json")}
    reported = {m for m in report_models(root, dataset) if m != COHORT}
    return sorted(evaluated | reported)


def _slices(ours: list[str], theirs: list[str]) -> dict:
    """The slice labels both sides have (in the published order) and those only one side has."""
    return {
        "shared": [x for x in theirs if x in ours],
        "only_ours": [x for x in ours if x not in theirs],
        "only_published": [x for x in theirs if x not in ours],
    }


def _in_published_unit(ours: dict, data: dict) -> np.ndarray:
    """Our seed-averaged matrix scaled to the published unit; a one-line error when the metrics differ."""
    if ours["metric"] != data["metric"]:
        raise DriftError(
            f"our result holds {ours['metric']}, the published {data['dataset']} matrices "
            f"{data['metric']}: compare a {data['dataset']} evaluation"
        )
    return np.asarray(ours["matrix"], dtype=np.float64) * data["scale"]


def as_published(matrix: np.ndarray, labels: list[str], dataset: str) -> tuple[np.ndarray, str | None]:
    """Our matrix under the published rule for cells with no rows, and the rule our run had followed there:
    cells (i, j <= i) of the EMPTY_TEST slices, in the rows our run trained, all empty ("empty": they read 0.0
    here, as empty_cell: zero writes them) or filled ("zero": left as they are). (the matrix as it is, None)
    when our run has none of those cells."""
    M = np.array(matrix, dtype=np.float64)
    trained = np.asarray(np.isfinite(M).any(axis=1))
    cells = [
        (i, labels.index(x))
        for x in EMPTY_TEST.get(dataset, ())
        if x in labels
        for i in range(labels.index(x), len(labels))
        if trained[i]
    ]
    if not cells:
        return M, None
    rows, columns = np.array(cells).T
    if not np.isnan(M[rows, columns]).all():
        return M, "zero"
    M[rows, columns] = 0.0
    return M, "empty"


def compare(ours: dict, dataset: str, model: str) -> dict:
    """Our result (`our_result`'s dict) beside the published matrix of `model`, in the published unit, over
    the slices both have (aligned by label, in the published order; those only one side has are named in
    `slices`): ours and theirs ID / Future / Decay and their differences (ours - published), and the cell-wise
    difference with its mean absolute value over the cells both fill and the largest cell. Ours under the
    published rule for cells with no rows (`as_published`); `empty_cells`: the rule our run had followed there
    (None: no such cell)."""
    data = load_published(dataset)
    pub = published_model(data, model)
    mine, rule = as_published(_in_published_unit(ours, data), ours["labels"], data["dataset"])
    slices = _slices(ours["labels"], data["slices"])
    i_ours = [ours["labels"].index(x) for x in slices["shared"]]
    i_pub = [data["slices"].index(x) for x in slices["shared"]]
    a, b = mine[np.ix_(i_ours, i_ours)], pub["matrix"][np.ix_(i_pub, i_pub)]
    diff = a - b
    stats_ours = id_future_decay(a, data["higher_is_better"])
    stats_pub = id_future_decay(b, data["higher_is_better"])
    filled = np.isfinite(diff)
    worst = None
    if filled.any():
        i, j = np.unravel_index(np.nanargmax(np.abs(diff)), diff.shape)
        worst = {
            "train": slices["shared"][i],
            "eval": slices["shared"][j],
            "ours": float(a[i, j]),
            "published": float(b[i, j]),
            "difference": float(diff[i, j]),
        }
    return {
        "dataset": data["dataset"],
        "model": pub["name"],
        "display": pub["display"],
        "metric": data["metric"],
        "unit": data["unit"],
        "higher_is_better": data["higher_is_better"],
        "slices": slices,
        "source": ours.get("source"),
        "seeds": ours.get("seeds"),
        "empty_cells": rule,
        "published_seeds": len(pub["seeds"]),
        "ours": stats_ours,
        "published": stats_pub,
        "delta": {s: None if stats_ours[s] is None else stats_ours[s] - stats_pub[s] for s in STATS},
        "cells": int(filled.sum()),
        "mean_abs_difference": float(np.abs(diff[filled]).mean()) if filled.any() else None,
        "largest": worst,
        "difference": [[None if not np.isfinite(v) else float(v) for v in row] for row in diff],
    }


def spearman(a: list[float], b: list[float]) -> float | None:
    """Spearman's rank correlation of two paired lists (ties share their mean rank); None under 2 pairs or
    when one side is constant."""
    from scipy.stats import spearmanr  # lazy: scipy, kept out of `drift --help`

    if len(a) < 2 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    return float(spearmanr(a, b).statistic)


def compare_run(root: Path, dataset: str) -> dict:
    """The published results of `dataset` with the workspace's run beside them (`drift paper`, the report's
    section). models: one row per published model in the paper's order, then the models only our run has:
    model, paper_name, family, published {id, future, decay, rank, printed} (None for ours alone), ours {id,
    future, decay, rank, seeds, source} (None without our result), difference (ours - published), cells,
    mean_abs_difference, largest and slices (`compare`). Also only_ours / only_published (models), slices
    (labels only one side has, over every model), the mean absolute difference over every cell both fill, and
    the Spearman correlation of the two Decay rankings over the models both have. run: whether any result of
    ours was found. empty_cells: {published: "zero", slices: the EMPTY_TEST labels, ours: the rules our models
    had followed there, sorted (none when our run lacks those slices)}; ours are compared under the published
    rule (`as_published`)."""
    data = load_published(dataset)
    name, higher = data["dataset"], data["higher_is_better"]
    published = {r["model"]: r for r in published_ranking(name)}
    mine = {m: our_result(root, name, m) for m in our_models(root, name)}
    compared = {m: compare(r, name, m) for m, r in mine.items() if m in published}
    alone = {m: as_published(_in_published_unit(r, data), r["labels"], name) for m, r in mine.items()}
    stats = {m: compared[m]["ours"] if m in compared else id_future_decay(alone[m][0], higher) for m in mine}
    our_rank = {r["model"]: r["rank"] for r in ranking(stats, higher, "decay")}

    def ours_of(m: str) -> dict | None:
        if m not in mine:
            return None
        return {**stats[m], "rank": our_rank[m], "seeds": mine[m]["seeds"], "source": mine[m]["source"]}

    rows = []
    for m in data["models"]:
        c, p = compared.get(m["name"]), published[m["name"]]
        rows.append(
            {
                "model": m["name"],
                "paper_name": m["display"],
                "family": m["family"],
                "published_family": m["published_family"],
                "published": {**{s: p[s] for s in STATS}, "rank": p["rank"], "printed": m["printed"]},
                "ours": ours_of(m["name"]),
                "difference": c and c["delta"],
                "cells": c and c["cells"],
                "mean_abs_difference": c and c["mean_abs_difference"],
                "largest": c and c["largest"],
                "slices": c and c["slices"],
            }
        )
    only_ours = [m for m in mine if m not in published]
    rows += [
        {
            "model": m,
            "paper_name": None,
            "family": None,
            "published_family": None,
            "published": None,
            "ours": ours_of(m),
            "difference": None,
            "cells": None,
            "mean_abs_difference": None,
            "largest": None,
            "slices": None,
        }
        for m in only_ours
    ]

    total = sum(c["cells"] for c in compared.values())
    pooled = (
        sum(c["cells"] * c["mean_abs_difference"] for c in compared.values() if c["cells"]) / total
        if total
        else None
    )
    paired = [
        (c["ours"]["decay"], c["published"]["decay"])
        for c in compared.values()
        if c["ours"]["decay"] is not None and c["published"]["decay"] is not None
    ]
    labels = {x for r in mine.values() for x in r["labels"]}
    return {
        "dataset": name,
        "title": data["title"],
        "metric": data["metric"],
        "published_metric": data["published_metric"],
        "unit": data["unit"],
        "higher_is_better": higher,
        "printed_decimals": data["printed_decimals"],
        "source": data["source"],
        "root": str(Path(root).resolve()),
        "run": bool(mine),
        "models": rows,
        "only_ours": only_ours,
        "only_published": [m["name"] for m in data["models"] if m["name"] not in mine],
        "slices": {
            "published": len(data["slices"]),
            "only_ours": sorted(labels - set(data["slices"])),
            "only_published": [x for x in data["slices"] if mine and x not in labels],
        },
        "empty_cells": {
            "published": "zero",
            "slices": list(EMPTY_TEST.get(name, ())),
            "ours": sorted({rule for _, rule in alone.values() if rule is not None}),
        },
        "cells": total,
        "mean_abs_difference": pooled,
        "spearman_decay": {
            "rho": spearman(*map(list, zip(*paired))) if paired else None,
            "models": len(paired),
        },
    }


def empty_cells_line(result: dict) -> str | None:
    """One line on the rule for cells with no rows (`compare_run`'s empty_cells): which one the paper used and
    how our run is set beside it; None for a dataset whose published matrices have no such cell."""
    e = result["empty_cells"]
    if not e["slices"]:
        return None
    where = ", ".join(e["slices"])
    rows = f"from row {where} on" if len(e["slices"]) == 1 else "each from its own row on"
    line = f"empty test sets (slice {where}, {rows}): the paper scores them 0.0 (evaluate.empty_cell: zero)"
    if not result["run"]:
        return line
    if not e["ours"]:
        return f"{line}; our run has no slice {where}: nothing to re-score"
    if e["ours"] == ["zero"]:
        return f"{line}, as did our run: compared as they are"
    who = "our run" if e["ours"] == ["empty"] else "some of our models"
    return (
        f"{line}; {who} left them empty (empty_cell: empty): re-scored to 0.0 here, as empty_cell: zero "
        "writes them"
    )

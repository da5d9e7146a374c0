"""The authors' published runs (drift/report/published/): our protocol code reproduces every printed ID /
Future / Decay from the published matrices, and one of our evaluations is set beside a published run, cell by
cell."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tomllib

from drift.core.errors import DriftError
from drift.core.stage import write_json
from drift.models import get_model_info
from drift.protocol.matrix import to_json
from drift.report.published import (
    DATA,
    DATASETS,
    check_printed,
    compare,
    load_published,
    our_result,
    print_tolerance,
    published_ranking,
    published_stats,
)
from tests.helpers import ROOT, metrics_json

# models, slices (paper Tables 1, 5, 13, 21)
COUNTS = {"yearbook": (21, 104), "amazon": (19, 20), "arxiv": (20, 26)}


@pytest.mark.parametrize("dataset", DATASETS)
def test_every_printed_value_is_recomputed_by_our_protocol_code(dataset):
    data = load_published(dataset)
    assert (len(data["models"]), len(data["slices"])) == COUNTS[dataset]
    assert check_printed(dataset) == []
    # to the printed precision: the formatted values agree, but for one mean that sits on a rounding boundary
    # once the cells are rounded to 4 decimals (Amazon BiLSTM-Attn-L: 0.7135 from the cells, printed 0.713)
    d = data["printed_decimals"]
    off = [
        (r["model"], s)
        for r in published_stats(dataset)
        for s in ("id", "future", "decay")
        if f"{r[s]:.{d}f}" != f"{r['printed'][s]:.{d}f}"
    ]
    assert off == ([("bilstm-attn-l", "id")] if dataset == "amazon" else [])


def test_the_tolerance_would_catch_a_wrong_statistic(monkeypatch):
    import drift.report.published as published

    data = load_published("arxiv")
    assert print_tolerance(data) < 0.051  # half a printed unit (0.05 points) plus the cells' rounding

    # a protocol that took the future over every off-diagonal cell (past ones too) is caught
    def both_sides(M, higher_is_better):
        off = M[~np.eye(len(M), dtype=bool)]
        id_, fut = float(np.diagonal(M).mean()), float(off.mean())
        return {"id": id_, "future": fut, "decay": id_ - fut}

    monkeypatch.setattr(published, "id_future_decay", both_sides)
    assert any("future" in line for line in check_printed("arxiv"))


@pytest.mark.parametrize("dataset", DATASETS)
def test_models_are_ours_and_ranked_as_the_paper_ranks_them(dataset):
    data = load_published(dataset)
    for m in data["models"]:
        info = get_model_info(m["name"])
        assert (info.display, info.family) == (m["display"], m["family"])
        assert m["matrix"].shape == (len(data["slices"]), len(data["slices"]))
    # the files keep the paper's order (Tables 5, 13, 21); our ranking by Decay gives the same order
    assert [r["model"] for r in published_ranking(dataset)] == [m["name"] for m in data["models"]]
    assert published_ranking(dataset)[0]["rank"] == 1


def test_published_families_and_seeds():
    families = {d: {m["published_family"] for m in load_published(d)["models"]} for d in DATASETS}
    assert families["yearbook"] == {"CNN", "MLP", "ResNet", "ViT", "Transfer"}
    assert families["amazon"] == families["arxiv"] == {"FFN", "TextCNN", "Recurrent", "Transformer", "Frozen"}
    assert {len(m["seeds"]) for m in load_published("yearbook")["models"]} == {5}
    assert {len(m["seeds"]) for m in load_published("amazon")["models"]} == {3}


def test_shipped_as_package_data_and_small():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["drift.report"]
    shipped = {p for pattern in patterns for p in (ROOT / "drift" / "report").glob(pattern)}
    files = sorted(DATA.glob("*"))
    assert set(files) == shipped and {f"{d}.json.gz" for d in DATASETS} < {f.name for f in files}
    assert sum(f.stat().st_size for f in files) < 600_000
    assert "CC BY 4.0" in (DATA / "README.md").read_text()


def write_eval(root: Path, dataset: str, model: str, seeds: list[np.ndarray], labels: list[str]):
    """Our evaluate stage's output, data/eval/<ds>/<model>.json, as stages/evaluate.py writes it."""
    data = load_published(dataset)
    write_json(
        root / "data" / "eval" / dataset / f"{model}.json",
        {
            "dataset": dataset,
            "model": model,
            "family": get_model_info(model).family,
            "metric": data["metric"],
            "higher_is_better": data["higher_is_better"],
            "labels": labels,
            "usable": [True] * len(labels),
            "seeds": {str(i): to_json(M) for i, M in enumerate(seeds)},
            "estimated": {},
        },
    )


def test_compare_an_evaluation_with_the_published_run(tmp_path):
    data = load_published("yearbook")
    theirs = next(m for m in data["models"] if m["name"] == "cnn-s")["matrix"] / 100  # our unit: a fraction
    a, b = theirs.copy(), theirs.copy()
    a[3, 50] += 0.10  # the two seeds average to +0.05 there: 5 points in the published unit
    # our slices in another order: aligned by label
    order = np.arange(len(data["slices"]))[::-1]
    write_eval(
        tmp_path,
        "yearbook",
        "cnn-s",
        [a[np.ix_(order, order)], b[np.ix_(order, order)]],
        [data["slices"][i] for i in order],
    )
    result = compare(our_result(tmp_path, "yearbook", "cnn-s"), "yearbook", "cnn-s")
    assert result["seeds"] == 2 and result["published_seeds"] == 5 and result["cells"] == 104 * 104
    assert result["largest"]["train"] == data["slices"][3] and result["largest"]["eval"] == data["slices"][50]
    assert result["largest"]["difference"] == pytest.approx(5.0)
    assert abs(result["delta"]["id"]) < 1e-9
    assert result["delta"]["future"] == pytest.approx(5.0 / (104 * 103 / 2))
    assert result["mean_abs_difference"] == pytest.approx(5.0 / 104**2)
    assert result["published"]["id"] == pytest.approx(87.0, abs=0.05)  # the paper's CNN-S ID, Table 5


def test_compare_reads_the_report_when_there_is_no_evaluation(tmp_path):
    data = load_published("amazon")
    M = next(m for m in data["models"] if m["name"] == "tx-s")["matrix"] + 0.01
    rows = [
        {"train": t, "eval": e, "value": float(M[i, j])}
        for i, t in enumerate(data["slices"])
        for j, e in enumerate(data["slices"])
    ]
    write_json(tmp_path / "plots" / "amazon" / "tx-s" / "matrix.json", rows)
    (tmp_path / "metrics" / "amazon").mkdir(parents=True)
    (tmp_path / "metrics" / "amazon" / "tx-s.json").write_text(
        metrics_json(metric="balanced_mse", higher_is_better=False)
    )
    result = compare(our_result(tmp_path, "amazon", "tx-s"), "amazon", "tx-s")
    assert result["delta"]["id"] == pytest.approx(0.01) and result["delta"]["decay"] == pytest.approx(
        0.0, abs=1e-12
    )


def test_slices_one_side_lacks_are_named_and_the_rest_compared(tmp_path):
    data = load_published("arxiv")
    theirs = data["models"][0]
    M = theirs["matrix"][:-1, :-1] / 100  # our run stops a year early
    write_eval(tmp_path, "arxiv", theirs["name"], [M], data["slices"][:-1])
    result = compare(our_result(tmp_path, "arxiv", theirs["name"]), "arxiv", theirs["name"])
    assert result["slices"]["only_published"] == ["2025"] and result["slices"]["only_ours"] == []
    assert result["cells"] == 25 * 25 and result["mean_abs_difference"] == pytest.approx(0.0, abs=1e-12)
    # both sides' scores over the slices both have
    assert result["ours"]["id"] == pytest.approx(float(np.diagonal(theirs["matrix"])[:-1].mean()))
    assert all(result["delta"][s] == pytest.approx(0.0, abs=1e-9) for s in ("id", "future", "decay"))


def test_mismatched_metric_or_missing_results_are_one_line_errors(tmp_path):
    data = load_published("arxiv")
    write_eval(tmp_path, "arxiv", "tx-s", [data["models"][0]["matrix"] / 100], data["slices"])
    ours = our_result(tmp_path, "arxiv", "tx-s")
    with pytest.raises(DriftError, match="holds accuracy") as e:
        compare({**ours, "metric": "accuracy"}, "arxiv", "tx-s")
    assert "\n" not in str(e.value)
    with pytest.raises(DriftError, match="no results of bigru-s on arxiv"):
        our_result(tmp_path, "arxiv", "bigru-s")
    with pytest.raises(DriftError, match="no published run of 'mlp-s' on arxiv"):
        compare(ours, "arxiv", "mlp-s")
    with pytest.raises(DriftError, match="valid: amazon, arxiv, yearbook"):
        load_published("portraits")

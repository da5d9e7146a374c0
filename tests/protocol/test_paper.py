"""`drift paper` and the published family and per-cutoff tables: the shipped tables equal the printed ones
(tests/fixtures/paper/, the authors' .tex), our protocol code recomputes them from the published matrices, and
small runs in each paper dataset's format (the evaluate stage's files, the published slice labels) are set
beside the published results."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from drift.core.stage import write_json
from drift.models import get_model_info
from drift.protocol.matrix import to_json
from drift.protocol.summary import cutoff_table, family_table, id_future_decay
from drift.report.published import (
    DATASETS,
    load_published,
    load_tables,
    print_tolerance,
)
from tests.helpers import ROOT, drift_cli

PRINTED = ROOT / "tests" / "fixtures" / "paper"
THEIRS = {"yearbook": "yearbook", "amazon": "amazon_reviews", "arxiv": "arxiv"}
ROW = re.compile(r"^(.+?) \\\\$")


def tex_rows(path: Path) -> list[list[str]]:
    """The body rows of a printed table (between \\midrule and \\bottomrule), cells stripped."""
    rows, inside = [], False
    for line in path.read_text().splitlines():
        if line.startswith("\\midrule"):
            inside = True
        elif line.startswith("\\bottomrule"):
            inside = False
        elif inside and ROW.match(line):
            rows.append([c.strip() for c in ROW.match(line).group(1).split("&")])
    return rows


def values_tex() -> dict[str, str]:
    """paper/generated/values.tex as key -> printed value."""
    text = (PRINTED / "values.tex").read_text()
    return dict(re.findall(r"\\csname valstore/([^\\]+)\\endcsname\{([^}]*)\}", text))


@pytest.mark.parametrize("dataset", DATASETS)
def test_the_shipped_tables_are_the_printed_ones(dataset):
    tables, theirs = load_tables(dataset), THEIRS[dataset]
    d = tables["printed_decimals"]
    assert tables["source"]["license"] == "CC BY 4.0" and len(tables["cutoffs"]) == 4
    for c in tables["cutoffs"]:  # Tables 6-9 (and their Amazon / arXiv counterparts), ordered by Future
        printed = tex_rows(PRINTED / f"{theirs}_cutoff_{c['published_cutoff']}.tex")
        assert len(printed) == len(load_published(dataset)["models"])
        assert [
            [str(r["rank"]), r["paper_name"], *(f"{r[s]:.{d}f}" for s in ("id", "future", "decay"))]
            for r in c["rows"]
        ] == printed
    printed = tex_rows(PRINTED / f"{theirs}_by_family.tex")  # Table 10
    assert [
        [r["family"], *(f"{cell[s]:.{d}f}" for cell in r["cells"] for s in ("future", "decay"))]
        for r in tables["families"]["rows"]
    ] == printed
    printed = tex_rows(PRINTED / f"robustness_{theirs}.tex")  # two halves, one after the other
    assert [
        [r["paper_name"], f"{r['future']:.{d}f}", f"{r['decay']:.{d}f}"] for r in tables["robustness"]
    ] == printed
    # the models' printed ID / Future / Decay (values.tex) are those of the shipped matrices' file
    values = values_tex()
    for m in load_published(dataset)["models"]:
        for s, key in (("id", "indist"), ("future", "future"), ("decay", "decay")):
            assert f"{m['printed'][s]:.{d}f}" == values[f"{theirs}/model/{m['preset']}/{key}"], (m["name"], s)
    # and our names are the registry's, the paper's the shipped models' display names
    names = {m["name"]: m["display"] for m in load_published(dataset)["models"]}
    assert {r["model"]: r["paper_name"] for r in tables["cutoffs"][0]["rows"]} == names


@pytest.mark.parametrize("dataset", DATASETS)
def test_our_protocol_code_recomputes_the_tables_from_the_published_matrices(dataset):
    data, tables = load_published(dataset), load_tables(dataset)
    tol = print_tolerance(data)
    matrices = {m["name"]: m["matrix"] for m in data["models"]}
    rows = cutoff_table(matrices, data["slices"], data["higher_is_better"], by="future")
    for c in tables["cutoffs"]:
        mine = [r for r in rows if r["cutoff_label"] == c["label"]]
        assert [r["model"] for r in mine] == [r["model"] for r in c["rows"]]  # the same order, by Future
        for a, b in zip(mine, c["rows"]):
            assert all(abs(a[s] - b[s]) <= tol for s in ("id", "future", "decay")), (c["label"], a, b)
    families = {m["name"]: m["published_family"] for m in data["models"]}
    averaged = family_table(rows, data["higher_is_better"], families)
    for r in tables["families"]["rows"]:
        for label, cell in zip(tables["families"]["cutoffs"], r["cells"]):
            mine = next(x for x in averaged if x["family"] == r["family"] and x["cutoff_label"] == label)
            assert abs(mine["future"] - cell["future"]) <= tol and abs(mine["decay"] - cell["decay"]) <= tol


def write_eval(root: Path, dataset: str, model: str, matrix: np.ndarray, labels: list[str]):
    """The evaluate stage's data/eval/<ds>/<model>.json (stages/evaluate.py), two seeds around `matrix`."""
    data = load_published(dataset)
    seeds = [matrix + 0.001, matrix - 0.001]
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


def paper_run(root: Path, dataset: str) -> tuple[list[str], dict]:
    """A run of three published models (in our unit, on the published slices) and baseline-prior; the best of
    the three by published Decay made worse on the future than the other two, so our Decay order changes:
    published ranks 1, 2, 3 become 3, 1, 2."""
    data = load_published(dataset)
    picked = [data["models"][i] for i in (0, 4, 8)]
    gap = picked[2]["printed"]["decay"] - picked[0]["printed"]["decay"] + 1.0  # in the published unit
    future = np.triu(np.ones((len(data["slices"]),) * 2, dtype=bool), k=1)
    shifts = {}
    for n, m in enumerate(picked):
        worse = gap if n == 0 else 0.0
        shift = np.where(future, -worse if data["higher_is_better"] else worse, 0.0) + 0.1 * (n + 1)
        shifts[m["name"]] = shift
        write_eval(root, dataset, m["name"], (m["matrix"] + shift) / data["scale"], data["slices"])
    K = len(data["slices"])
    write_eval(
        root,
        dataset,
        "baseline-prior",
        np.full((K, K), float(np.nanmean(picked[0]["matrix"])) / data["scale"]),
        data["slices"],
    )
    return [m["name"] for m in picked], shifts


@pytest.mark.parametrize("dataset", DATASETS)
def test_drift_paper_sets_a_run_beside_the_published_results(tmp_path, dataset):
    data = load_published(dataset)
    picked, shifts = paper_run(tmp_path, dataset)
    out = drift_cli("paper", dataset, "--root", tmp_path, "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    models = {r["model"]: r for r in result["models"]}
    assert [r["model"] for r in result["models"]] == [m["name"] for m in data["models"]] + ["baseline-prior"]
    assert result["only_ours"] == ["baseline-prior"] and models["baseline-prior"]["published"] is None
    assert sorted(result["only_published"]) == sorted(set(models) - set(picked) - {"baseline-prior"})
    for name in picked:
        r = models[name]
        assert r["paper_name"] == get_model_info(name).display
        pub = next(m for m in data["models"] if m["name"] == name)
        expected = id_future_decay(pub["matrix"] + shifts[name], data["higher_is_better"])
        assert set(r["published"]) >= {"id", "future", "decay", "rank"} and set(r["ours"]) >= set(
            r["published"]
        ) - {"printed"}
        for s in ("id", "future", "decay"):
            assert r["ours"][s] == pytest.approx(expected[s], abs=1e-9)
            assert r["difference"][s] == pytest.approx(expected[s] - r["published"][s], abs=1e-9)
        assert r["mean_abs_difference"] == pytest.approx(float(np.nanmean(np.abs(shifts[name]))), abs=1e-9)
        assert r["slices"]["only_ours"] == r["slices"]["only_published"] == []
    assert [models[m]["published"]["rank"] for m in picked] == [1, 5, 9]
    # baseline-prior is a reference: not ranked
    assert [models[m]["ours"]["rank"] for m in picked] == [3, 1, 2]
    assert models["baseline-prior"]["ours"]["rank"] is None
    assert result["spearman_decay"] == {"rho": pytest.approx(-0.5), "models": 3}
    K = len(data["slices"])
    assert result["cells"] == 3 * K * K
    assert result["mean_abs_difference"] == pytest.approx(np.mean([np.abs(shifts[m]).mean() for m in picked]))

    text = drift_cli("paper", dataset, "--root", tmp_path)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    first = picked[0]
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == [first])
    assert lines[at].split()[1] == "ours" and lines[at + 1].split()[:2] == [
        get_model_info(first).display,
        "paper",
    ]
    assert lines[at + 2].split()[0] == "Δ" and lines[at].split()[-1] == "3"
    assert any(line.startswith("only in our run: baseline-prior") for line in lines)
    assert "Spearman ρ of the Decay rankings -0.50 over 3 models" in " ".join(text.stdout.split())


def test_drift_paper_without_a_run_prints_the_published_results_alone(tmp_path):
    out = drift_cli("paper", "amazon_reviews", "--root", tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("Amazon Reviews, the paper's runs: Balanced MSE")
    first = next(line for line in lines if line.lstrip().startswith("1 "))
    assert first.split() == ["1", "probe-deberta-v3", "DeBERTa-v3", "Frozen", "0.806", "0.849", "0.043"]
    assert any(line.startswith("no run of amazon in") for line in lines)
    assert max(len(line) for line in lines) <= 80
    result = json.loads(drift_cli("paper", "yearbook", "--root", tmp_path, "--json").stdout)
    assert result["run"] is False and all(r["ours"] is None for r in result["models"])
    assert result["models"][0]["published"]["rank"] == 1 and result["source"]["license"] == "CC BY 4.0"


def test_drift_paper_on_the_embedded_default_and_on_a_typo():
    for name in ("sotu", "synth-portraits"):
        out = drift_cli("paper", name)
        assert out.returncode == 0 and out.stdout.strip().splitlines() == [
            f"{name}: no published run (the paper's datasets: yearbook, amazon, arxiv)"
        ]
    bad = drift_cli("paper", "yearbok")
    assert bad.returncode == 2 and "did you mean yearbook" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    assert drift_cli("published", "yearbook").returncode == 2  # renamed: no alias

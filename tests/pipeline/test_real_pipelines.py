"""One `dvc repro` of each real corpus end to end on its fixture, in the corpus's own on-disk format."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.helpers import repro_in_process, run, tiny_params

pytestmark = pytest.mark.compute  # its lane (tests/conftest.py): out of `make test-fast`


FIXTURES = Path(__file__).parents[1] / "fixtures"


def real_params(name: str, source: str, **cfg) -> dict:
    params = tiny_params()
    params["datasets"] = {name: {"input": source}}
    params[name] = {**params.get(name, {}), **cfg}
    return params


def results(repo: Path, name: str) -> dict:
    return {p.stem: json.loads(p.read_text()) for p in (repo / "metrics" / name).glob("*.json")}


def report_metrics(repo: Path, name: str) -> dict:
    """The metrics/<name>/<model>.json the report stage would write (ID, Future, Decay, the margins over the
    references), computed by its own functions (drift.report.outputs.model_metrics, then
    drift.protocol.summary.reference_margins, as write_report does) from the evaluate stage's files: for tests
    whose subject is the numbers, without the report's plots, tables, saliency and HTML."""
    from drift.protocol.summary import reference_margins
    from drift.report.outputs import load_eval, model_metrics

    evals = load_eval(
        repo / "data/eval" / name, sorted(p.stem for p in (repo / "data/eval" / name).glob("*.json"))
    )
    metrics = {model: model_metrics(r) for model, r in evals.items()}
    higher = next(iter(evals.values())).higher_is_better
    for model, margins in reference_margins(metrics, higher).items():
        metrics[model].update(margins)
    return metrics


def test_amazon_regression(project):
    params = real_params(
        "amazon",
        "data/raw/amazon",
        categories=["All_Beauty", "Software", "Gift_Cards"],
        slices={"unit": "year", "start": 2015, "end": 2024},
        min_samples=20,
        sample={"n": 300, "seed": 0},
        strict=False,
    )
    params["train"]["models"] = {"amazon": ["ffn-s", "probe-minilm"]}
    repo = project(params)
    shutil.copytree(FIXTURES / "amazon2023", repo / "data/raw/amazon")
    repro_in_process(repo, "amazon")
    ingest = json.loads((repo / "metrics/ingest/amazon.json").read_text())
    assert ingest["read"] == 450 and ingest["kept"] + ingest["filtered"] + ingest["quarantined"] == 450
    assert ingest["filtered_by_rule"]["time_outside_span"] > 0  # reviews before 2015
    slices = json.loads((repo / "data/slices/amazon.json").read_text())
    assert slices["rows"] == 300 and slices["task"] == "regression"
    assert [s["usable"] for s in slices["slices"]][-1] is False  # 2023: too few reviews, an empty band
    for m in results(repo, "amazon").values():
        assert m["metric"] == "balanced_mse" and m["higher_is_better"] is False
        assert abs(m["decay"] - (m["future"] - m["id"])) < 1e-9  # lower is better: Decay = Future - ID
        assert m["id"] > 0 and m["future"] > 0  # squared errors of ratings 1-5


def test_yearbook_from_png_folders(project):
    """PNG folders F/ and M/ through `dvc repro` up to evaluate (the matrices; the report is not the subject):
    an undecodable file quarantined, and a new year of portraits re-runs from ingest and grows the matrix."""
    params = real_params(
        "yearbook",
        "data/raw/yearbook/faces",
        slices={"unit": "year", "start": 1950, "end": 1955},
        min_samples=10,
    )
    params["train"]["models"] = {"yearbook": ["mlp-s"]}
    repo = project(params)
    rng = np.random.default_rng(0)
    for sex in ("F", "M"):
        folder = repo / "data/raw/yearbook/faces" / sex
        folder.mkdir(parents=True)
        for year in (1950, 1951, 1953):  # 1952 has no portrait: dropped, K = 3
            for i in range(15):
                pixels = rng.integers(0, 120, (32, 32)) + (100 if sex == "M" else 0)
                Image.fromarray(pixels.astype(np.uint8), "L").save(folder / f"{year}_{sex}_{i}.png")
    (repo / "data/raw/yearbook/faces/F/1951_truncated.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    run(["dvc", "repro", "evaluate@yearbook"], repo)
    ingest = json.loads((repo / "metrics/ingest/yearbook.json").read_text())
    assert (ingest["read"], ingest["kept"], ingest["quarantined"]) == (91, 90, 1)
    assert ingest["quarantined_by_reason"] == {"undecodable_image": 1}
    m = report_metrics(repo, "yearbook")["mlp-s"]
    assert m["k"] == 3 and 0 <= m["id"] <= 1
    # a new year of portraits re-runs ingest (the raw folder is a DVC dependency) and the matrix grows
    for sex in ("F", "M"):
        for i in range(15):
            pixels = rng.integers(0, 120, (32, 32)) + (100 if sex == "M" else 0)
            Image.fromarray(pixels.astype(np.uint8), "L").save(
                repo / f"data/raw/yearbook/faces/{sex}/1954_{sex}_{i}.png"
            )
    out = run(["dvc", "repro", "evaluate@yearbook"], repo).stdout
    assert "Running stage 'ingest@yearbook'" in out
    assert report_metrics(repo, "yearbook")["mlp-s"]["k"] == 4


def test_missing_source_is_one_line(project):
    params = real_params(
        "amazon",
        "data/raw/amazon",
        categories=["Software"],
        slices={"unit": "year", "start": 2015, "end": 2024},
    )
    params["train"]["models"] = {"amazon": ["ffn-s"]}
    repo = project(params)
    result = run(["python", "stages/ingest.py", "amazon"], repo, check=False)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "data/raw/amazon" in result.stderr

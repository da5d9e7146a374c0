"""The report stage's outputs on hand-built drift matrices, and `drift show` reading them."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from drift.cli_report import from_long_format
from drift.plots import color_limits, long_format
from drift.report import load_eval, write_report

PNG = b"\x89PNG\r\n\x1a\n"
LABELS = ["2000", "2001", "2002"]
N = None
# ffn-s, two seeds with different empty cells; averaged cell by cell:
#   [[0.7, 0.6, 0.4], [0.7, 0.8, 0.6], [--, 0.8, 0.9]]   ID 0.8, Future (0.6+0.4+0.6)/3, Decay 0.8 - that
MODELS = {
    "ffn-s": ("FFN", {"0": [[0.8, 0.6, 0.4], [0.7, 0.9, 0.5], [N, 0.8, 1.0]],
                      "1": [[0.6, 0.6, N], [0.7, 0.7, 0.7], [N, 0.8, 0.8]]}),
    "tx-s": ("Transformer", {"0": [[0.5, 0.5, 0.5], [0.5, 0.6, 0.4], [0.6, 0.6, 0.7]]}),
    "bigru-s": ("FFN", {"0": [[0.9, 0.3, 0.3], [0.9, 0.9, 0.2], [0.9, 0.9, 0.9]]}),  # family FFN on purpose
}


def approx(x):
    return pytest.approx(x, abs=1e-9)


def write_eval(root: Path, dataset="sotu", models=MODELS, metric="accuracy", higher=True):
    for model, (family, seeds) in models.items():
        path = root / "data" / "eval" / dataset / f"{model}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"dataset": dataset, "model": model, "family": family, "metric": metric,
                                    "higher_is_better": higher, "labels": LABELS, "usable": [True] * 3,
                                    "seeds": seeds}))


def report(root: Path, dataset="sotu", models=MODELS, **kw) -> dict:
    write_eval(root, dataset, models, **kw)
    return write_report(dataset, load_eval(root / "data" / "eval" / dataset, list(models)), root)


def read(root: Path, path: str):
    return json.loads((root / path).read_text())


def cell(rows, train, eval_):
    return next(r["value"] for r in rows if r["train"] == train and r["eval"] == eval_)


def test_report_by_hand(tmp_path):
    tables = report(tmp_path)

    # metrics: the seed-averaged matrix's ID / Future / Decay, and the spread over seeds
    m = read(tmp_path, "metrics/sotu/ffn-s.json")
    assert m["id"] == approx(0.8) and m["future"] == approx(1.6 / 3) and m["decay"] == approx(0.8 - 1.6 / 3)
    assert m["id_std"] == approx(np.sqrt(0.02))  # per seed: ID 0.9 and 0.7
    assert (m["metric"], m["higher_is_better"], m["k"], m["seeds"], m["family"]) == ("accuracy", True, 3, 2, "FFN")
    assert cell(read(tmp_path, "plots/sotu/ffn-s/matrix.json"), "2002", "2000") is None

    # Table 5: ranked by Future; Table 10: FFN (ffn-s, bigru-s) against Transformer (tx-s)
    assert [(r["rank"], r["model"]) for r in tables["ranking"]] == [(1, "ffn-s"), (2, "tx-s"), (3, "bigru-s")]
    families = {r["family"]: r for r in tables["families"]}
    assert families["FFN"]["n_models"] == 2 and families["FFN"]["id"] == approx((0.8 + 0.9) / 2)
    assert families["FFN"]["future"] == approx((1.6 / 3 + 0.8 / 3) / 2)
    assert [r["family"] for r in tables["families"]] == ["Transformer", "FFN"]  # Future 0.467 > 0.400

    # Tables 6-9: K = 3 gives cutoffs 0 and 1 (the last slice has no future)
    assert sorted({r["cutoff_label"] for r in tables["cutoffs"]}) == ["2000", "2001"]
    at_2001 = [r for r in tables["cutoffs"] if r["cutoff"] == 1]
    assert [r["model"] for r in at_2001] == ["ffn-s", "tx-s", "bigru-s"]  # Future 0.6, 0.4, 0.2
    assert at_2001[0]["id"] == approx(0.8) and at_2001[0]["decay"] == approx(0.2)
    assert {r["family"] for r in tables["family_cutoffs"] if r["cutoff"] == 1} == {"FFN", "Transformer"}

    # cohort mean over the cells every model fills; deviations from it
    cohort = read(tmp_path, "plots/sotu/cohort-mean/matrix.json")
    assert cell(cohort, "2000", "2001") == approx(round((0.6 + 0.5 + 0.3) / 3, 6))
    assert cell(cohort, "2002", "2000") is None  # ffn-s never filled it
    dev = read(tmp_path, "plots/deviations/sotu/ffn-s.json")
    assert cell(dev, "2001", "2002") == approx(round(0.6 - (0.6 + 0.4 + 0.2) / 3, 6))
    assert cell(dev, "2002", "2000") is None and all(r["higher_is_better"] is True for r in dev)
    ffn = next(r for r in tables["deviations"] if r["model"] == "ffn-s")
    # (ffn-s diagonal 0.7, 0.8, 0.9 against the cohort's (0.7+0.5+0.9)/3, (0.8+0.6+0.9)/3, (0.9+0.7+0.9)/3)
    assert ffn["id"] == approx(0.8 - (2.1 + 2.3 + 2.5) / 9)

    # forgetting curves: F(g) = mean_i M[i, i+g]
    curves = read(tmp_path, "plots/forgetting/sotu.json")
    ffn_curve = {r["gap"]: r["value"] for r in curves if r["model"] == "ffn-s"}
    assert ffn_curve == {0: approx(0.8), 1: approx(0.6), 2: approx(0.4)}
    assert set(curves[0]) == {"gap", "value", "model"}

    # pictures and the markdown tables
    for png in ["ffn-s/heatmap.png", "ffn-s/deviation.png", "cohort-mean/heatmap.png", "forgetting.png",
                "families.png"]:
        data = (tmp_path / "plots/sotu" / png).read_bytes()
        assert data[:8] == PNG and len(data) > 5000, png
    md = (tmp_path / "tables/sotu.md").read_text()
    assert "| 1 | ffn-s | FFN | 0.800 | 0.533 | 0.267 |" in md
    assert read(tmp_path, "tables/sotu.json")["cohort"]["id"] == approx((2.1 + 2.3 + 2.5) / 9)


def test_lower_is_better_and_a_smaller_roster(tmp_path):
    report(tmp_path)
    two = {"ffn-s": MODELS["ffn-s"], "tx-s": MODELS["tx-s"]}
    tables = report(tmp_path, models=two, metric="balanced_mse", higher=False)
    assert [r["model"] for r in tables["ranking"]] == ["tx-s", "ffn-s"]  # lower Future first
    m = read(tmp_path, "metrics/sotu/ffn-s.json")
    assert m["decay"] == approx(1.6 / 3 - 0.8) and m["higher_is_better"] is False
    assert all(r["higher_is_better"] is False for r in read(tmp_path, "plots/deviations/sotu/tx-s.json"))
    # the dropped model leaves nothing behind
    assert not (tmp_path / "metrics/sotu/bigru-s.json").exists()
    assert not (tmp_path / "plots/sotu/bigru-s").exists()
    assert not (tmp_path / "plots/deviations/sotu/bigru-s.json").exists()


def test_diverging_scale_is_zero_centred_and_long_format_round_trips():
    assert color_limits(np.array([[-0.1, 0.3], [np.nan, 0.0]]), diverging=True) == (-0.3, 0.3)
    assert color_limits(np.zeros((2, 2)), diverging=True) == (-1.0, 1.0)
    assert color_limits(np.ones((2, 2)), diverging=False) == (None, None)
    M = np.array([[0.5, np.nan], [0.25, 1.0]])
    labels, back = from_long_format(long_format(M, ["a", "b"]))
    assert labels == ["a", "b"]
    np.testing.assert_array_equal(back, M)


# --- drift show ------------------------------------------------------------------------------------------------

def drift(*args, cwd=None):
    """The report commands, whether or not drift/cli.py registers them yet."""
    return subprocess.run([sys.executable, "-m", "drift.cli_report", *args], cwd=cwd, capture_output=True, text=True)


def test_show_prints_the_matrix_latest_on_top_and_the_numbers(tmp_path):
    report(tmp_path)
    result = drift("show", "sotu", "ffn-s", "--root", str(tmp_path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "ID 0.800 ± 0.141" in out and "Future 0.533" in out and "Decay 0.267" in out
    rows = [line.split()[0] for line in out.splitlines() if line.strip()[:4] in LABELS and "0." in line]
    assert rows == ["2002", "2001", "2000"]                 # time grows up: the latest cutoff on top
    assert "0.90" in out and "0.70" in out

    data = json.loads(drift("show", "sotu", "ffn-s", "--json", "--root", str(tmp_path)).stdout)
    assert data["labels"] == LABELS and data["matrix"][2][0] is None and data["matrix"][1][2] == approx(0.6)
    assert data["id"] == approx(0.8) and data["future"] == approx(1.6 / 3)

    dev = json.loads(drift("show", "sotu", "ffn-s", "--deviation", "--json", "--root", str(tmp_path)).stdout)
    assert dev["id"] == approx(0.8 - (2.1 + 2.3 + 2.5) / 9) and dev["matrix"][2][0] is None
    cohort = drift("show", "sotu", "cohort-mean", "--root", str(tmp_path))
    assert cohort.returncode == 0 and "ID 0.767" in cohort.stdout


def test_show_unknown_names_are_one_line(tmp_path):
    result = drift("show", "sotu", "ffn-s", "--root", str(tmp_path))
    assert result.returncode == 2 and "run `dvc repro`" in result.stderr
    report(tmp_path)
    result = drift("show", "sotuu", "ffn-s", "--root", str(tmp_path))
    assert result.returncode == 2 and "did you mean sotu" in result.stderr
    result = drift("show", "sotu", "ffn", "--root", str(tmp_path))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "valid: bigru-s, cohort-mean, ffn-s, tx-s" in result.stderr


def test_drift_command_has_the_report_commands():
    """drift/cli.py registers show, compare, plots and saliency (drift.cli_report.register)."""
    result = subprocess.run([str(Path(sys.executable).parent / "drift"), "--help"], capture_output=True, text=True)
    listed = {line.strip("│ ").split(" ")[0] for line in result.stdout.splitlines()}
    assert {"show", "compare", "plots", "saliency"} <= listed, result.stdout

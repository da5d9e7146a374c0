"""The report stage's outputs on hand-built drift matrices, and `drift show` reading them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from drift.report.outputs import load_eval, write_report
from drift.report.plots import color_limits, long_format
from drift.report.results import from_long_format
from tests.helpers import drift_cli as drift

PNG = b"\x89PNG\r\n\x1a\n"
LABELS = ["2000", "2001", "2002"]
N = None
# ffn-s, two seeds with different empty cells; averaged cell by cell:
#   [[0.7, 0.6, 0.4], [0.7, 0.8, 0.6], [--, 0.8, 0.9]]   ID 0.8, Future (0.6+0.4+0.6)/3, Decay 0.8 - that
MODELS = {
    "ffn-s": (
        "FFN",
        {
            "0": [[0.8, 0.6, 0.4], [0.7, 0.9, 0.5], [N, 0.8, 1.0]],
            "1": [[0.6, 0.6, N], [0.7, 0.7, 0.7], [N, 0.8, 0.8]],
        },
    ),
    "tx-s": ("Transformer", {"0": [[0.5, 0.5, 0.5], [0.5, 0.6, 0.4], [0.6, 0.6, 0.7]]}),
    "bigru-s": ("FFN", {"0": [[0.9, 0.3, 0.3], [0.9, 0.9, 0.2], [0.9, 0.9, 0.9]]}),  # family FFN on purpose
}


def approx(x):
    return pytest.approx(x, abs=1e-9)


def write_eval(root: Path, dataset="sotu", models=MODELS, metric="accuracy", higher=True):
    for model, (family, seeds) in models.items():
        path = root / "data" / "eval" / dataset / f"{model}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps(
                {
                    "dataset": dataset,
                    "model": model,
                    "family": family,
                    "metric": metric,
                    "higher_is_better": higher,
                    "labels": LABELS,
                    "usable": [True] * 3,
                    "seeds": seeds,
                    "estimated": {},
                }
            )
        )


def report(root: Path, dataset="sotu", models=MODELS, **kw) -> dict:
    write_eval(root, dataset, models, **kw)
    return write_report(dataset, load_eval(root / "data" / "eval" / dataset, list(models)), root)


def read(root: Path, path: str):
    return json.loads((root / path).read_text())


def cell(rows, train, eval_):
    return next(r["value"] for r in rows if r["train"] == train and r["eval"] == eval_)


@pytest.mark.compute
def test_report_by_hand(tmp_path):
    tables = report(tmp_path)

    # metrics: the seed-averaged matrix's ID / Future / Decay, and the spread over seeds
    m = read(tmp_path, "metrics/sotu/ffn-s.json")
    assert m["id"] == approx(0.8) and m["future"] == approx(1.6 / 3) and m["decay"] == approx(0.8 - 1.6 / 3)
    assert m["id_std"] == approx(np.sqrt(0.02))  # per seed: ID 0.9 and 0.7
    assert (m["metric"], m["higher_is_better"], m["k"], m["seeds"], m["family"]) == (
        "accuracy",
        True,
        3,
        2,
        "FFN",
    )
    assert cell(read(tmp_path, "plots/sotu/ffn-s/matrix.json"), "2002", "2000") is None

    # Table 5: ranked by Decay, smallest first: tx-s 0.6 - 1.4/3 = 0.133, ffn-s 0.8 - 1.6/3 = 0.267,
    # bigru-s 0.9 - 0.8/3 = 0.633; Table 10: FFN (ffn-s, bigru-s) against Transformer (tx-s)
    assert tables["ranked_by"] == "decay"
    assert [(r["rank"], r["model"]) for r in tables["ranking"]] == [(1, "tx-s"), (2, "ffn-s"), (3, "bigru-s")]
    families = {r["family"]: r for r in tables["families"]}
    assert families["FFN"]["n_models"] == 2 and families["FFN"]["id"] == approx((0.8 + 0.9) / 2)
    assert families["FFN"]["future"] == approx((1.6 / 3 + 0.8 / 3) / 2)
    assert [r["family"] for r in tables["families"]] == ["Transformer", "FFN"]  # Decay 0.133 < 0.450
    # no reference in the roster: no margin, nobody below the prior
    assert tables["references"] == [] and tables["below_prior"] == []
    assert m["margin_prior"] is None and m["margin_linear"] is None and m["beats_prior"] is None
    assert m["reference"] is False

    # Tables 6-9: K = 3 gives cutoffs 0 and 1 (the last slice has no future)
    assert sorted({r["cutoff_label"] for r in tables["cutoffs"]}) == ["2000", "2001"]
    at_2000 = [r for r in tables["cutoffs"] if r["cutoff"] == 0]
    # row 2000: ffn-s 0.7 - 0.5 = 0.2, tx-s 0.5 - 0.5 = 0, bigru-s 0.9 - 0.3 = 0.6
    assert [(r["rank"], r["model"]) for r in at_2000] == [(1, "tx-s"), (2, "ffn-s"), (3, "bigru-s")]
    at_2001 = {r["model"]: r for r in tables["cutoffs"] if r["cutoff"] == 1}
    assert at_2001["ffn-s"]["id"] == approx(0.8) and at_2001["ffn-s"]["decay"] == approx(0.2)
    assert at_2001["bigru-s"]["rank"] == 3 and at_2001["bigru-s"]["decay"] == approx(0.7)
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
    for png in [
        "ffn-s/heatmap.png",
        "ffn-s/deviation.png",
        "cohort-mean/heatmap.png",
        "forgetting.png",
        "families.png",
    ]:
        data = (tmp_path / "plots/sotu" / png).read_bytes()
        assert data[:8] == PNG and len(data) > 5000, png
    md = (tmp_path / "tables/sotu.md").read_text()
    assert "| 2 | ffn-s | FFN | 0.800 | 0.533 | 0.267 |" in md and "ranked by Decay, smallest first" in md
    assert read(tmp_path, "tables/sotu.json")["cohort"]["id"] == approx((2.1 + 2.3 + 2.5) / 9)


@pytest.mark.compute
def test_lower_is_better_and_a_smaller_roster(tmp_path):
    report(tmp_path)
    two = {"ffn-s": MODELS["ffn-s"], "tx-s": MODELS["tx-s"]}
    tables = report(tmp_path, models=two, metric="balanced_mse", higher=False)
    # decay = Future - ID: ffn-s 1.6/3 - 0.8 = -0.267, tx-s 1.4/3 - 0.6 = -0.133; the smallest first
    assert [r["model"] for r in tables["ranking"]] == ["ffn-s", "tx-s"]
    by_future = write_report("sotu", load_eval(tmp_path / "data/eval/sotu", list(two)), tmp_path, by="future")
    assert [r["model"] for r in by_future["ranking"]] == ["tx-s", "ffn-s"]  # lower Future first
    assert (
        by_future["ranked_by"] == "future" and "ranked by Future" in (tmp_path / "tables/sotu.md").read_text()
    )
    m = read(tmp_path, "metrics/sotu/ffn-s.json")
    assert m["decay"] == approx(1.6 / 3 - 0.8) and m["higher_is_better"] is False
    assert all(r["higher_is_better"] is False for r in read(tmp_path, "plots/deviations/sotu/tx-s.json"))
    # the dropped model leaves nothing behind
    assert not (tmp_path / "metrics/sotu/bigru-s.json").exists()
    assert not (tmp_path / "plots/sotu/bigru-s").exists()
    assert not (tmp_path / "plots/deviations/sotu/bigru-s.json").exists()


# --- reference models ------------------------------------------------------------------------------------------


def constant(diag: float, future: float, history: float = 0.7) -> list[list[float]]:
    """A 3x3 matrix with every diagonal cell `diag`, every future cell `future`, every past cell `history`."""
    return [[diag if i == j else future if j > i else history for j in range(3)] for i in range(3)]


# three models and the two references, one seed each, accuracy (higher is better):
#   model            ID     Future   Decay    vs prior             vs linear
#   ffn-s            0.80   0.60     0.20     0.80 - 0.60 = 0.20   0.80 - 0.70 = 0.10
#   tx-s             0.90   0.80     0.10     0.90 - 0.60 = 0.30   0.90 - 0.70 = 0.20
#   cnn-s            0.55   0.50     0.05     0.55 - 0.60 = -0.05  0.55 - 0.70 = -0.15   below the prior
#   baseline-prior   0.60   0.60     0.00     (reference)
#   baseline-linear  0.70   0.62     0.08     (reference)
WITH_REFS = {
    "ffn-s": ("FFN", {"0": constant(0.80, 0.60)}),
    "baseline-prior": ("Reference", {"0": constant(0.60, 0.60)}),
    "tx-s": ("Transformer", {"0": constant(0.90, 0.80)}),
    "baseline-linear": ("Reference", {"0": constant(0.70, 0.62)}),
    "cnn-s": ("CNN", {"0": constant(0.55, 0.50)}),
}


@pytest.mark.compute
def test_references_are_reported_but_not_ranked_nor_in_the_cohort(tmp_path, capsys):
    tables = report(tmp_path, models=WITH_REFS)

    # ranking by decay: cnn-s 0.05, tx-s 0.10, ffn-s 0.20; then the references, unranked
    assert [(r["rank"], r["model"], r["reference"]) for r in tables["ranking"]] == [
        (1, "cnn-s", False),
        (2, "tx-s", False),
        (3, "ffn-s", False),
        (None, "baseline-prior", True),
        (None, "baseline-linear", True),
    ]
    assert sorted(tables["references"]) == ["baseline-linear", "baseline-prior"]
    ranked = {r["model"]: r for r in tables["ranking"]}
    assert ranked["ffn-s"]["margin_prior"] == approx(0.80 - 0.60)
    assert ranked["tx-s"]["margin_linear"] == approx(0.90 - 0.70)
    assert ranked["cnn-s"]["margin_prior"] == approx(0.55 - 0.60) and ranked["cnn-s"]["beats_prior"] is False
    assert tables["below_prior"] == ["cnn-s"]

    # the metrics files: the references flagged, the others with their margins
    prior = read(tmp_path, "metrics/sotu/baseline-prior.json")
    assert prior["reference"] is True and prior["id"] == approx(0.60) and "margin_prior" not in prior
    assert read(tmp_path, "metrics/sotu/baseline-linear.json")["reference"] is True
    ffn = read(tmp_path, "metrics/sotu/ffn-s.json")
    assert ffn["reference"] is False and ffn["beats_prior"] is True
    assert ffn["margin_prior"] == approx(0.20) and ffn["margin_linear"] == approx(0.10)
    cnn = read(tmp_path, "metrics/sotu/cnn-s.json")
    assert cnn["margin_prior"] == approx(-0.05) and cnn["margin_linear"] == approx(-0.15)
    assert cnn["beats_prior"] is False

    # cohort mean over the three models only: diagonal (0.80 + 0.90 + 0.55) / 3, not (... + 0.60 + 0.70) / 5
    assert tables["cohort"]["id"] == approx((0.80 + 0.90 + 0.55) / 3)
    assert tables["cohort"]["future"] == approx((0.60 + 0.80 + 0.50) / 3)
    assert cell(read(tmp_path, "plots/sotu/cohort-mean/matrix.json"), "2000", "2000") == approx(
        round((0.80 + 0.90 + 0.55) / 3, 6)
    )
    assert {r["model"] for r in tables["deviations"]} == {"ffn-s", "tx-s", "cnn-s"}
    assert not (tmp_path / "plots/deviations/sotu/baseline-prior.json").exists()
    assert not (tmp_path / "plots/sotu/baseline-prior/deviation.png").exists()
    dev = read(tmp_path, "plots/deviations/sotu/ffn-s.json")
    assert cell(dev, "2000", "2000") == approx(round(0.80 - (0.80 + 0.90 + 0.55) / 3, 6))

    # their own matrix and heatmap like any model; in the forgetting curves, not in any family
    assert cell(read(tmp_path, "plots/sotu/baseline-linear/matrix.json"), "2000", "2001") == approx(0.62)
    assert (tmp_path / "plots/sotu/baseline-prior/heatmap.png").read_bytes()[:8] == PNG
    assert {r["model"] for r in read(tmp_path, "plots/forgetting/sotu.json")} == set(WITH_REFS)
    assert [(r["rank"], r["family"]) for r in tables["families"]] == [
        (1, "CNN"),
        (2, "Transformer"),
        (3, "FFN"),
    ]
    assert all(r["family"] != "Reference" for r in tables["families"] + tables["family_cutoffs"])
    at_2000 = [(r["rank"], r["model"]) for r in tables["cutoffs"] if r["cutoff"] == 0]
    assert at_2000 == [
        (1, "cnn-s"),
        (2, "tx-s"),
        (3, "ffn-s"),
        (None, "baseline-prior"),
        (None, "baseline-linear"),
    ]

    # one line on stderr for the model below the prior, and the same in the markdown
    err = capsys.readouterr().err
    line = (
        "warning: cnn-s does not beat baseline-prior in distribution on sotu "
        "(ID 0.550 vs prior 0.600, accuracy, higher is better)"
    )
    assert [x for x in err.splitlines() if x.startswith("warning:")] == [line]
    md = (tmp_path / "tables/sotu.md").read_text()
    assert "| ref | baseline-prior | Reference | 0.600 | 0.600 | 0.000 |" in md
    assert "| 1 | cnn-s | CNN | 0.550 | 0.500 | 0.050 |" in md and "| -0.050 | -0.150 |" in md and line in md


@pytest.mark.compute
def test_margins_lower_is_better_and_no_prior_no_warning(tmp_path, capsys):
    # balanced MSE: margin = ref.id - model.id; ffn-s 0.60 - 0.80 = -0.20 (worse than the prior)
    models = {
        "ffn-s": WITH_REFS["ffn-s"],
        "tx-s": ("Transformer", {"0": constant(0.40, 0.50)}),
        "baseline-prior": WITH_REFS["baseline-prior"],
    }
    tables = report(tmp_path, models=models, metric="balanced_mse", higher=False)
    ranked = {r["model"]: r for r in tables["ranking"]}
    assert ranked["ffn-s"]["margin_prior"] == approx(0.60 - 0.80) and ranked["ffn-s"]["beats_prior"] is False
    assert ranked["tx-s"]["margin_prior"] == approx(0.60 - 0.40) and ranked["tx-s"]["beats_prior"] is True
    assert ranked["tx-s"]["margin_linear"] is None  # no baseline-linear in the roster
    assert tables["below_prior"] == ["ffn-s"]
    assert "(ID 0.800 vs prior 0.600, balanced_mse, lower is better)" in capsys.readouterr().err

    # without baseline-prior: margins null, nothing printed
    tables = report(
        tmp_path, models={"ffn-s": WITH_REFS["ffn-s"], "baseline-linear": WITH_REFS["baseline-linear"]}
    )
    assert tables["below_prior"] == [] and "warning" not in capsys.readouterr().err
    ffn = read(tmp_path, "metrics/sotu/ffn-s.json")
    assert ffn["margin_prior"] is None and ffn["beats_prior"] is None and ffn["margin_linear"] == approx(0.10)


@pytest.mark.compute
def test_show_a_reference_and_its_missing_deviation(tmp_path):
    report(tmp_path, models=WITH_REFS)
    result = drift("show", "sotu", "baseline-prior", "--root", str(tmp_path))
    assert result.returncode == 0 and "ID 0.600" in result.stdout
    result = drift("show", "sotu", "baseline-prior", "--deviation", "--root", str(tmp_path))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "reference model" in result.stderr


def test_diverging_scale_is_zero_centred_and_long_format_round_trips():
    assert color_limits(np.array([[-0.1, 0.3], [np.nan, 0.0]]), diverging=True) == (-0.3, 0.3)
    assert color_limits(np.zeros((2, 2)), diverging=True) == (-1.0, 1.0)
    assert color_limits(np.ones((2, 2)), diverging=False) == (None, None)
    M = np.array([[0.5, np.nan], [0.25, 1.0]])
    labels, back = from_long_format(long_format(M, ["a", "b"]))
    assert labels == ["a", "b"]
    np.testing.assert_array_equal(back, M)


# --- drift show ------------------------------------------------------------------------------------------------


@pytest.mark.compute
def test_show_prints_the_matrix_latest_on_top_and_the_numbers(tmp_path):
    report(tmp_path)
    result = drift("show", "sotu", "ffn-s", "--root", str(tmp_path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "ID 0.800 ± 0.141" in out and "Future 0.533" in out and "Decay 0.267" in out
    rows = [line.split()[0] for line in out.splitlines() if line.strip()[:4] in LABELS and "0." in line]
    assert rows == ["2002", "2001", "2000"]  # time grows up: the latest cutoff on top
    assert "0.90" in out and "0.70" in out

    data = json.loads(drift("show", "sotu", "ffn-s", "--json", "--root", str(tmp_path)).stdout)
    assert data["labels"] == LABELS and data["matrix"][2][0] is None and data["matrix"][1][2] == approx(0.6)
    assert data["id"] == approx(0.8) and data["future"] == approx(1.6 / 3)

    dev = json.loads(drift("show", "sotu", "ffn-s", "--deviation", "--json", "--root", str(tmp_path)).stdout)
    assert dev["id"] == approx(0.8 - (2.1 + 2.3 + 2.5) / 9) and dev["matrix"][2][0] is None
    cohort = drift("show", "sotu", "cohort-mean", "--root", str(tmp_path))
    assert cohort.returncode == 0 and "ID 0.767" in cohort.stdout


@pytest.mark.compute
def test_show_unknown_names_are_one_line(tmp_path):
    result = drift("show", "sotu", "ffn-s", "--root", str(tmp_path))
    assert result.returncode == 2 and "run `dvc repro`" in result.stderr
    report(tmp_path)
    result = drift("show", "sotuu", "ffn-s", "--root", str(tmp_path))
    assert result.returncode == 2 and "did you mean sotu" in result.stderr
    result = drift("show", "sotu", "ffn", "--root", str(tmp_path))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "valid: bigru-s, cohort-mean, ffn-s, tx-s" in result.stderr


@pytest.mark.compute
@pytest.mark.pipeline
def test_drift_command_has_the_report_commands():
    """The `drift` command has show, compare, plots and saliency (drift/cli/report_commands.py)."""
    result = subprocess.run(
        [str(Path(sys.executable).parent / "drift"), "--help"], capture_output=True, text=True
    )
    listed = {line.strip("│ ").split(" ")[0] for line in result.stdout.splitlines()}
    assert {"show", "compare", "plots", "saliency"} <= listed, result.stdout

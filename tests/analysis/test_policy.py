"""Retraining policies replayed from hand-built drift matrices whose best policy is known by hand, and
`drift policy` on a report written to a temp dir."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from drift.analysis.policy import (
    dataset_policies,
    replay_policies,
    retrain_costs,
    trained_cutoffs,
    write_policy_report,
)
from drift.core.errors import DriftError
from drift.core.params import load_params
from drift.report.plots import long_format
from drift.store.slices import hand_manifest
from tests.helpers import drift_cli as drift
from tests.helpers import metrics_json

N = np.nan
# rows: trained through 0..3, columns: evaluated on 0..3; deployment periods 1, 2, 3 (after f_0)
IMPROVING = np.array([[0.9, 0.5, 0.4, 0.3], [0.8, 0.9, 0.6, 0.5], [0.7, 0.8, 0.9, 0.7], [0.6, 0.7, 0.8, 0.9]])
COSTS = retrain_costs(4, 2, [10, 20, 30, 40])  # rows through t x 2 epochs: 20, 60, 120, 200


def by_name(result: dict) -> dict:
    return {p["name"]: p for p in result["policies"]}


def approx(x):
    return pytest.approx(x, abs=1e-9)


def test_costs_are_cumulative_training_rows_times_epochs():
    assert COSTS.tolist() == [20, 60, 120, 200]
    assert retrain_costs(3, 5).tolist() == [5, 10, 15]  # no manifest: each slice one row
    with pytest.raises(DriftError, match="manifest lists 2 slices but the matrix has 3"):
        retrain_costs(3, 1, [1, 2])


def test_fixed_policies_by_hand():
    p = by_name(replay_policies(IMPROVING, True, COSTS, every=(2, 3)))
    # never: f_0 in periods 1, 2, 3
    assert p["never"]["deployed"] == [0, 0, 0] and p["never"]["mean"] == approx(0.4)
    assert p["never"]["worst"] == approx(0.3) and p["never"]["retrainings"] == 0 and p["never"]["cost"] == 0
    # always: f_{j-1} in period j -> 0.5, 0.6, 0.7; retrained at cutoffs 1 and 2: 60 + 120
    assert p["always"]["deployed"] == [0, 1, 2] and p["always"]["mean"] == approx(0.6)
    assert p["always"]["worst"] == approx(0.5) and p["always"]["retrained_at"] == [1, 2]
    assert p["always"]["cost"] == 180
    # every 2: f_0 serves periods 1 and 2, then f_2 in period 3 -> 0.5, 0.4, 0.7
    assert p["every 2"]["deployed"] == [0, 0, 2] and p["every 2"]["mean"] == approx(1.6 / 3)
    assert p["every 2"]["cost"] == 120 and p["every 2"]["retrainings"] == 1
    # every 3 never comes due in three periods: the same point as never, both on the front
    assert p["every 3"]["deployed"] == [0, 0, 0] and p["every 3"]["cost"] == 0
    assert [n for n, x in p.items() if x["best"]] == ["always"]
    assert {n for n, x in p.items() if x["pareto"]} == {"never", "every 2", "every 3", "always"}


def test_ties_go_to_the_cheaper_then_the_first_listed():
    # older models do better here (a drift that reverts): retraining only costs
    reverting = np.array(
        [[0.9, 0.9, 0.9, 0.9], [0.8, 0.9, 0.6, 0.6], [0.7, 0.8, 0.9, 0.5], [0.6, 0.7, 0.8, 0.9]]
    )
    p = by_name(replay_policies(reverting, True, COSTS, every=(2, 5)))
    assert p["never"]["mean"] == approx(0.9) and p["every 5"]["mean"] == approx(0.9)
    assert p["always"]["mean"] < 0.9
    assert [n for n, x in p.items() if x["best"]] == ["never"]  # tied with every 5, listed first
    assert p["every 5"]["pareto"] and not p["always"]["pareto"]
    # equal means at different costs: the cheaper is best, the dearer is off the front
    flat = np.full((4, 4), 0.5)
    q = by_name(replay_policies(flat, True, COSTS, every=(2,)))
    assert [n for n, x in q.items() if x["best"]] == ["never"]
    assert [n for n, x in q.items() if x["pareto"]] == ["never"]


def test_empty_rows_and_columns():
    M = IMPROVING.copy()
    M[1] = N  # slice 1 had too few rows to train on: no f_1
    M[:, 2] = N  # slice 2 has no test rows: period 2 is not scored
    assert trained_cutoffs(M) == [0, 2, 3]
    p = by_name(replay_policies(M, True, COSTS, every=(2,)))
    # always: period 2 would deploy f_1, which does not exist: f_0 stays and nothing is paid; period 3: f_2
    assert p["always"]["deployed"] == [0, 0, 2] and p["always"]["retrained_at"] == [2]
    assert p["always"]["cost"] == 120
    assert p["always"]["scores"] == [0.5, None, 0.7] and p["always"]["scored"] == 2
    assert p["always"]["mean"] == approx(0.6)
    # a first row that is empty: f_1 is the first model, deployed from period 2
    M = IMPROVING.copy()
    M[0] = N
    p = by_name(replay_policies(M, True, COSTS, every=(2,)))
    assert p["never"]["periods"] == [2, 3] and p["never"]["deployed"] == [1, 1]
    with pytest.raises(DriftError, match="no filled row"):
        replay_policies(np.full((3, 3), N), True, COSTS[:3])


def test_lower_is_better():
    mse = 1 - IMPROVING  # balanced MSE: the same story, lower is better
    p = by_name(replay_policies(mse, False, COSTS, every=(2,)))
    assert p["always"]["mean"] == approx(0.4) and p["always"]["worst"] == approx(0.5)  # worst = the largest
    assert p["never"]["worst"] == approx(0.7)
    assert [n for n, x in p.items() if x["best"]] == ["always"]
    assert {n for n, x in p.items() if x["pareto"]} == {"never", "every 2", "always"}


def test_signal_policies_by_hand():
    shift = np.zeros((4, 4))
    shift[0, 2] = 5.0  # period 2 moves away from what f_0 saw
    shift[1, 3] = N  # no signal: no retraining
    est = np.full((4, 4), N)
    est[0] = [N, 0.85, 0.85, 0.5]  # no estimated diagonal: the measured M[0][0] = 0.9 is the reference
    est[2] = [N, N, 0.8, 0.8]
    result = replay_policies(
        IMPROVING,
        True,
        COSTS,
        every=(),
        shift=shift,
        estimate=est,
        shift_thresholds=[1.0],
        drop_thresholds=[0.2],
    )
    p = by_name(result)
    assert result["skipped"] == []
    # shift > 1: retrain at period 2 (f_1), then S[1][3] is empty: f_1 stays -> 0.5, 0.6, 0.5
    assert p["shift 1"]["deployed"] == [0, 1, 1] and p["shift 1"]["mean"] == approx(1.6 / 3)
    assert p["shift 1"]["cost"] == 60
    # drop > 0.2: 0.9 - 0.85 = 0.05 in periods 1 and 2, 0.9 - 0.5 = 0.4 in period 3 -> f_2 there
    assert p["drop 0.2"]["deployed"] == [0, 0, 2] and p["drop 0.2"]["retrained_at"] == [2]
    # lower is better: the drop is E[t][j] - reference
    q = by_name(
        replay_policies(1 - IMPROVING, False, COSTS, every=(), estimate=1 - est, drop_thresholds=[0.2])
    )
    assert q["drop 0.2"]["deployed"] == [0, 0, 2]
    # default thresholds: the quartiles of the signal over the cells a policy consults (t trained, j > t)
    default = replay_policies(IMPROVING, True, COSTS, every=(), shift=shift)
    assert default["thresholds"]["shift"] == [0.0]  # five of the six consulted cells are 0, one is empty
    # absent signals skip their policies and say so
    none = replay_policies(IMPROVING, True, COSTS)
    assert {p["policy"] for p in none["policies"]} == {"never", "every", "always"}
    assert len(none["skipped"]) == 2 and "shift" in none["skipped"][0] and "estimated" in none["skipped"][1]
    with pytest.raises(DriftError, match="shift matrix is 3x3, the drift matrix 4x4"):
        replay_policies(IMPROVING, True, COSTS, shift=np.zeros((3, 3)))


LABELS = ["2000", "2001", "2002", "2003"]


def write_committed(root: Path, manifest: bool = True):
    """A report as the report stage commits it: matrices, metrics; the slice manifest and params.yaml."""
    for model, matrix, reference in (
        ("ffn-s", IMPROVING, False),
        ("baseline-prior", np.full((4, 4), 0.5), True),
    ):
        folder = root / "plots" / "sotu" / model
        folder.mkdir(parents=True)
        (folder / "matrix.json").write_text(json.dumps(long_format(matrix, LABELS)))
        metrics = root / "metrics" / "sotu" / f"{model}.json"
        metrics.parent.mkdir(parents=True, exist_ok=True)
        metrics.write_text(
            metrics_json(
                id=0.9,
                future=0.6,
                decay=0.3,
                metric="accuracy",
                higher_is_better=True,
                k=4,
                reference=reference,
            )
        )
    (root / "plots" / "sotu" / "cohort-mean").mkdir()
    (root / "plots" / "sotu" / "cohort-mean" / "matrix.json").write_text(
        json.dumps(long_format(IMPROVING, LABELS))
    )
    (root / "params.yaml").write_text("datasets: {sotu: {input: requirements.lock}}\ntrain: {epochs: 2}\n")
    if manifest:
        sliced = hand_manifest("sotu", LABELS)
        for k, s in enumerate(sliced.slices):
            s.train = 10 * (k + 1)
        sliced.to_file(root / "data" / "slices" / "sotu.json")


@pytest.mark.compute
def test_dataset_policies_and_the_report(tmp_path):
    write_committed(tmp_path)
    shift = np.zeros((4, 4))
    shift[0, 2] = 5.0
    params = load_params(tmp_path / "params.yaml")
    policy, epochs = params.report.policy, params.train.epochs
    result = write_policy_report("sotu", policy, epochs, tmp_path, shift=shift)
    assert list(result["models"]) == ["baseline-prior", "ffn-s"]  # not the cohort mean
    assert result["cost_unit"] == "rows x epochs"
    ffn, prior = by_name(result["models"]["ffn-s"]), by_name(result["models"]["baseline-prior"])
    assert ffn["always"]["cost"] == 180  # (20 + 30) x 2 epochs + (10 + 20 + 30) x 2
    assert prior["always"]["cost"] == 90  # a closed-form reference: one pass
    # default shift thresholds: the quartiles over the consulted cells (five zeros and the 5): retrain when S
    # > 0
    assert result["models"]["ffn-s"]["thresholds"]["shift"] == [0.0]
    assert ffn["shift 0"]["deployed"] == [0, 1, 1]
    png = tmp_path / "plots" / "sotu" / "policies.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    rows = json.loads((tmp_path / "plots" / "policies" / "sotu.json").read_text())
    assert {(r["model"], r["policy"]) for r in rows} >= {("ffn-s", "always"), ("baseline-prior", "never")}
    always = next(r for r in rows if r["model"] == "ffn-s" and r["policy"] == "always")
    assert always == {
        "model": "ffn-s",
        "policy": "always",
        "cost": 180,
        "mean": 0.6,
        "worst": 0.5,
        "retrainings": 2,
        "pareto": True,
        "best": True,
        "cost_unit": "rows x epochs",
    }
    # seconds from a given figure
    seconds = dataset_policies("sotu", policy, epochs, tmp_path, ["ffn-s"], seconds_per_row=0.5)
    assert seconds["cost_unit"] == "seconds" and by_name(seconds["models"]["ffn-s"])["always"]["cost"] == 90
    with pytest.raises(DriftError, match="unknown model 'ffn' for sotu: did you mean ffn-s"):
        dataset_policies("sotu", policy, epochs, tmp_path, ["ffn"])
    with pytest.raises(DriftError, match="unknown dataset 'sotuu'"):
        dataset_policies("sotuu", policy, epochs, tmp_path)


def test_without_a_manifest_each_slice_counts_as_one_row(tmp_path):
    write_committed(tmp_path, manifest=False)
    params = load_params(tmp_path / "params.yaml")
    result = dataset_policies(
        "sotu", params.report.policy, params.train.epochs, tmp_path, ["ffn-s"], seconds_per_row=0.5
    )
    assert result["cost_unit"] == "slices x epochs"
    assert by_name(result["models"]["ffn-s"])["always"]["cost"] == (2 + 3) * 2
    assert any("no slice manifest" in n for n in result["notes"]) and any(
        "ignored" in n for n in result["notes"]
    )


def test_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # as on an 80-column terminal (piped without it: the natural width)
    write_committed(tmp_path)
    out = drift("policy", "sotu", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any("always" in line and "★" in line and "0.600" in line for line in lines)
    assert "skipped shift" in out.stdout
    data = json.loads(drift("policy", "sotu", "ffn-s", "--json", cwd=tmp_path).stdout)
    assert list(data["models"]) == ["ffn-s"] and data["cost_unit"] == "rows x epochs"
    bad = drift("policy", "sotu", "tx-s", cwd=tmp_path)
    assert (
        bad.returncode == 2 and bad.stderr.count("\n") == 1 and "valid: baseline-prior, ffn-s" in bad.stderr
    )
    bad = drift("policy", "amazon", cwd=tmp_path)
    assert bad.returncode == 2 and "valid: sotu" in bad.stderr
    # an estimate for one model, as a long-format file
    est = np.full((4, 4), N)
    est[0] = [N, 0.85, 0.85, 0.5]
    (tmp_path / "est.json").write_text(json.dumps(long_format(est, LABELS)))
    data = json.loads(
        drift("policy", "sotu", "ffn-s", "--estimate", "est.json", "--json", cwd=tmp_path).stdout
    )
    assert any(p["policy"] == "drop" for p in data["models"]["ffn-s"]["policies"])


def test_the_policy_figure_has_no_overlapping_labels_or_ticks():
    """Crowded panels (thresholds close in cost and score, paper-scale costs): every label drawn sits inside
    its axes and overlaps no other label, x tick labels never touch, and each label drawn or counted as left
    off."""
    import itertools

    import matplotlib.text

    from drift.report.plots import pareto_figure

    rng = np.random.default_rng(0)
    policies = [{"policy": "never", "param": None, "name": "never", "cost": 0.0}]
    policies += [{"policy": "every", "param": n, "name": f"every {n}", "cost": 4.2e6 / n} for n in (2, 3, 4)]
    policies += [{"policy": "always", "param": None, "name": "always", "cost": 8.4e6}]
    policies += [
        {"policy": kind, "param": float(t), "name": f"{kind} {t:g}", "cost": 6e5 + 2e4 * i}
        for kind in ("shift", "drop")
        for i, t in enumerate(rng.uniform(0, 0.1, 3))
    ]
    for i, p in enumerate(policies):
        p.update(mean=0.45 + 0.004 * (i % 5), worst=0.0, pareto=i % 2 == 0, best=i == 1, retrainings=i)
    result = {
        "dataset": "crowded",
        "metric": "accuracy",
        "higher_is_better": True,
        "cost_unit": "rows x epochs",
        "models": {
            m: {"policies": [dict(p) for p in policies], "reference": m.startswith("baseline")}
            for m in ("ffn-s", "probe-minilm", "baseline-tfidf", "tx-s")
        },
    }
    fig = pareto_figure(result)
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes[:4]:
        labels = [t for t in ax.texts if isinstance(t, matplotlib.text.Annotation)]
        boxes = [t.get_window_extent(renderer) for t in labels]
        frame = ax.get_window_extent(renderer)
        for i, box in enumerate(boxes):
            assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            for j in range(i):
                assert not box.overlaps(boxes[j]), (labels[i].get_text(), labels[j].get_text())
        left_off = len(policies) - len(labels)
        assert (f"{left_off} label(s) left off" in ax.get_xlabel()) == (left_off > 0)
        assert left_off < len(policies) // 2  # most policies keep their label
        assert all(len(t.get_text()) <= 12 for t in labels)  # "drop 0.063", never "drop 0.0634781"
        ticks = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text()]
        assert len(ticks) >= 3 and all(len(t.get_text()) <= 5 for t in ax.get_xticklabels())
        ticks.sort(key=lambda b: b.x0)
        assert all(a.x1 + 2 <= b.x0 for a, b in itertools.pairwise(ticks)), [
            t.get_text() for t in ax.get_xticklabels()
        ]
    import matplotlib.pyplot as plt

    plt.close(fig)

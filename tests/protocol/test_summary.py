"""drift.protocol.summary against values computed by hand (paper Section 4.5, Appendix C.7, Tables 5-10)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from drift.core.errors import DriftError
from drift.protocol.summary import (
    below_prior,
    below_prior_message,
    check_order,
    cohort_mean,
    cutoff_indices,
    cutoff_table,
    deviations,
    family_curves,
    family_table,
    forgetting_curve,
    forgetting_curves,
    id_future_decay,
    id_margin,
    is_reference,
    mean_over_seeds,
    ranking,
    reference_margins,
    seed_spread,
)

nan = np.nan
FAST = settings(max_examples=50, deadline=None)

# diagonal filled: 0.9, 0.85 (the last is empty); future (j > i): 0.8, 0.7 (cell (0, 2) empty);
# the lower-left cells (0.5, 0.6) are history, in neither statistic
M = np.array(
    [
        [0.9, 0.8, nan],
        [0.5, 0.85, 0.7],
        [nan, 0.6, nan],
    ]
)


def approx(x):
    return pytest.approx(x, abs=1e-12)


# --- ID / Future / Decay ---------------------------------------------------------------------------------------


def test_id_future_decay_by_hand_higher_is_better():
    s = id_future_decay(M, higher_is_better=True)
    assert s == {"id": approx(0.875), "future": approx(0.75), "decay": approx(0.125)}
    assert all(type(v) is float for v in s.values())


def test_id_future_decay_lower_is_better_flips_decay():
    s = id_future_decay(M, higher_is_better=False)
    assert s["decay"] == approx(-0.125)  # Future - ID: here the future is "better" (lower)


def test_id_future_decay_empty_regions_are_none():
    only_history = np.array([[nan, nan], [1.0, nan]])
    assert id_future_decay(only_history, True) == {"id": None, "future": None, "decay": None}
    only_diag = np.array([[2.0, nan], [nan, 4.0]])
    assert id_future_decay(only_diag, False) == {"id": 3.0, "future": None, "decay": None}


def test_matrices_from_json_with_nulls():
    as_lists = [[0.9, 0.8, None], [0.5, 0.85, 0.7], [None, 0.6, None]]
    assert id_future_decay(as_lists, True) == id_future_decay(M, True)


# --- seeds -----------------------------------------------------------------------------------------------------


def test_mean_over_seeds_unequal_seeds():
    a = np.array([[1.0, nan], [3.0, nan]])
    b = np.array([[3.0, nan], [nan, nan]])
    c = np.array([[nan, nan], [5.0, nan]])
    out = mean_over_seeds([a, b, c])
    np.testing.assert_array_equal(out, [[2.0, nan], [4.0, nan]])


def test_mean_over_seeds_rejects_mixed_shapes():
    with pytest.raises(DriftError):
        mean_over_seeds([np.zeros((2, 2)), np.zeros((3, 3))])
    with pytest.raises(DriftError):
        mean_over_seeds([])


def test_seed_spread_two_constant_seeds():
    # seed 1 scores 0.6 everywhere, seed 2 0.8: per-seed ID 0.6, 0.8; decay 0 in both. Bootstrap over seeds:
    # {1,1} -> 0.6 (p = 1/4), mixed -> 0.7 (1/2), {2,2} -> 0.8 (1/4); cells are constant.
    s = seed_spread([np.full((4, 4), 0.6), np.full((4, 4), 0.8)], higher_is_better=True, n_boot=400)
    assert s["id"]["mean"] == approx(0.7)
    assert s["id"]["std"] == approx(np.std([0.6, 0.8], ddof=1))
    assert s["id"]["n_seeds"] == 2
    assert (s["id"]["ci_low"], s["id"]["ci_high"]) == (approx(0.6), approx(0.8))
    assert s["decay"]["mean"] == approx(0.0)
    assert (s["decay"]["ci_low"], s["decay"]["ci_high"]) == (approx(0.0), approx(0.0))


def test_seed_spread_resamples_cells_within_a_seed():
    # one seed, diagonal cells 0 and 1: drawing two cells with replacement gives ID 0, 0.5 or 1 -> CI [0, 1];
    # the same for the future cells 0 and 1, drawn independently
    one = np.array([[0.0, 0.0, 1.0], [nan, 1.0, nan], [nan, nan, nan]])
    s = seed_spread([one], higher_is_better=True, n_boot=400, seed=3)
    assert s["id"]["std"] is None and s["id"]["mean"] == approx(0.5) and s["id"]["n_seeds"] == 1
    assert (s["id"]["ci_low"], s["id"]["ci_high"]) == (approx(0.0), approx(1.0))
    assert (s["future"]["ci_low"], s["future"]["ci_high"]) == (approx(0.0), approx(1.0))
    assert (s["decay"]["ci_low"], s["decay"]["ci_high"]) == (approx(-1.0), approx(1.0))
    # a matrix whose regions are constant has no cell spread at all
    flat = seed_spread([np.full((3, 3), 0.4)], higher_is_better=True, n_boot=50)
    assert (flat["future"]["ci_low"], flat["future"]["ci_high"]) == (approx(0.4), approx(0.4))


def test_seed_spread_deterministic_and_lower_is_better():
    rng = np.random.default_rng(0)
    mats = [rng.random((6, 6)) for _ in range(3)]
    mats[0][1, 3] = nan  # unequal seeds
    a = seed_spread(mats, higher_is_better=False, n_boot=200, seed=7)
    b = seed_spread(mats, higher_is_better=False, n_boot=200, seed=7)
    assert a == b
    per_seed = [id_future_decay(m, False)["decay"] for m in mats]
    assert a["decay"]["mean"] == approx(np.mean(per_seed))
    assert a["decay"]["std"] == approx(np.std(per_seed, ddof=1))
    assert a["decay"]["ci_low"] <= a["decay"]["mean"] <= a["decay"]["ci_high"]


# --- per-cutoff and family tables (Tables 6-10) ----------------------------------------------------------------


def test_cutoff_indices_spread_over_the_timeline_without_the_last_slice():
    assert cutoff_indices(104, 4) == [0, 34, 68, 102]  # Yearbook: 1905, 1944, 1978, 2012 (Tables 6-9)
    assert cutoff_indices(20, 4) == [0, 6, 12, 18]
    assert cutoff_indices(5, 3) == [0, 2, 3]  # 1.5 rounds half up
    assert cutoff_indices(3, 4) == [0, 1]  # fewer possible cutoffs than asked
    assert cutoff_indices(1, 4) == []


def test_cutoff_table_by_hand_lower_is_better():
    mats = {
        "A": [[1.0, 2.0, 4.0, nan], [nan] * 4, [nan, nan, 1.5, 2.5], [nan] * 4],
        "B": [[2.0, 1.0, 2.0, 3.0], [nan] * 4, [nan, nan, nan, 3.5], [nan] * 4],
        "C": [[nan, 5.0, nan, nan], [nan] * 4, [nan] * 4, [nan] * 4],
    }
    rows = cutoff_table(mats, ["t0", "t1", "t2", "t3"], higher_is_better=False, n_cutoffs=2, by="future")
    got = [
        (r["cutoff"], r["cutoff_label"], r["rank"], r["model"], r["id"], r["future"], r["decay"])
        for r in rows
    ]
    assert got == [
        (0, "t0", 1, "B", 2.0, 2.0, 0.0),  # lower future is better: B (2.0) before A (3.0)
        (0, "t0", 2, "A", 1.0, 3.0, 2.0),  # decay = future - id
        (0, "t0", 3, "C", None, 5.0, None),
        (2, "t2", 1, "A", 1.5, 2.5, 1.0),
        (2, "t2", 2, "B", None, 3.5, None),
        (2, "t2", None, "C", None, None, None),
    ]
    # by decay (the default): at t0 B (0.0) before A (2.0), C has no decay; at t2 only A has one
    by_decay = cutoff_table(mats, ["t0", "t1", "t2", "t3"], higher_is_better=False, n_cutoffs=2)
    assert [(r["cutoff"], r["rank"], r["model"]) for r in by_decay] == [
        (0, 1, "B"),
        (0, 2, "A"),
        (0, None, "C"),
        (2, 1, "A"),
        (2, None, "B"),
        (2, None, "C"),
    ]


def test_cutoff_table_lists_references_after_the_ranked_models():
    # at cutoff 0: A decays 0.3, B 0.1, ref-like "baseline-prior" 0.0 (the least) but it is not ranked
    mats = {
        "A": [[0.9, 0.6], [nan, 0.9]],
        "baseline-prior": [[0.5, 0.5], [nan, 0.5]],
        "B": [[0.7, 0.6], [nan, 0.7]],
    }
    rows = cutoff_table(mats, ["x", "y"], True, references=["baseline-prior"])
    assert [(r["rank"], r["model"], r["reference"]) for r in rows] == [
        (1, "B", False),
        (2, "A", False),
        (None, "baseline-prior", True),
    ]


def test_cutoff_table_higher_is_better_orders_the_other_way():
    mats = {"A": np.array([[0.9, 0.7], [nan, 0.8]]), "B": np.array([[0.8, 0.75], [nan, 0.9]])}
    rows = cutoff_table(mats, ["x", "y"], higher_is_better=True, by="future")
    assert [(r["model"], r["rank"], r["decay"]) for r in rows] == [
        ("B", 1, approx(0.05)),
        ("A", 2, approx(0.2)),
    ]
    rows = cutoff_table(mats, ["x", "y"], higher_is_better=True, by="id")
    assert [(r["model"], r["rank"]) for r in rows] == [("A", 1), ("B", 2)]  # ID 0.9 before 0.8


def test_cutoff_table_checks_shapes():
    with pytest.raises(DriftError):
        cutoff_table({"A": np.zeros((3, 3))}, ["a", "b"], True)


def test_family_table_reproduces_paper_table_10_from_table_6():
    # Yearbook, trained up to 1905 (Table 6): future and decay in %, accuracy (higher is better)
    table6 = [
        ("CNN-L", "CNN", 50.0, 45.4, 4.6),
        ("CNN-S", "CNN", 50.0, 44.9, 5.1),
        ("CNN-M", "CNN", 60.0, 44.7, 15.3),
        ("MLP-L", "MLP", 40.0, 49.8, -9.8),
        ("MLP-S", "MLP", 40.0, 46.3, -6.3),
        ("MLP-M", "MLP", 50.0, 44.9, 5.1),
        ("ResNet-M", "ResNet", 60.0, 50.3, 9.7),
        ("ResNet-L", "ResNet", 70.0, 50.1, 19.9),
        ("ResNet-S", "ResNet", 70.0, 49.3, 20.7),
    ]
    rows = [dict(model=m, family=f, id=i, future=fu, decay=d) for m, f, i, fu, d in table6]
    fam = family_table(rows, higher_is_better=True, by="future")
    # Table 10, 1905: CNN 45.0 / 8.3, MLP 47.0 / -3.7, ResNet 49.9 / 16.8
    assert [
        (r["rank"], r["family"], r["n_models"], round(r["future"], 1), round(r["decay"], 1)) for r in fam
    ] == [(1, "ResNet", 3, 49.9, 16.8), (2, "MLP", 3, 47.0, -3.7), (3, "CNN", 3, 45.0, 8.3)]
    # by decay (the default), smallest first: the negative decay leads
    assert [(r["rank"], r["family"]) for r in family_table(rows, higher_is_better=True)] == [
        (1, "MLP"),
        (2, "CNN"),
        (3, "ResNet"),
    ]


def test_family_table_groups_by_cutoff_skips_missing_values_lower_is_better():
    rows = [
        dict(cutoff=0, cutoff_label="a", model="m1", id=1.0, future=2.0, decay=1.0),
        dict(cutoff=0, cutoff_label="a", model="m2", id=None, future=4.0, decay=None),
        dict(cutoff=0, cutoff_label="a", model="t1", id=1.0, future=1.0, decay=0.0),
        dict(cutoff=5, cutoff_label="f", model="m1", id=2.0, future=3.0, decay=1.0),
        dict(cutoff=5, cutoff_label="f", model="t1", id=2.0, future=5.0, decay=3.0),
    ]
    fams = {"m1": "M", "m2": "M", "t1": "T"}
    got = [
        (r["cutoff"], r["cutoff_label"], r["rank"], r["family"], r["id"], r["future"], r["decay"])
        for r in family_table(rows, higher_is_better=False, families=fams, by="future")
    ]
    assert got == [
        (0, "a", 1, "T", 1.0, 1.0, 0.0),
        (0, "a", 2, "M", 1.0, 3.0, 1.0),  # id and decay over m1 only; future over m1 and m2
        (5, "f", 1, "M", 2.0, 3.0, 1.0),
        (5, "f", 2, "T", 2.0, 5.0, 3.0),
    ]


def test_family_table_leaves_references_out():
    rows = [
        dict(model="m1", family="M", id=1.0, future=0.5, decay=0.5, reference=False),
        dict(model="baseline-prior", family="Reference", id=0.2, future=0.2, decay=0.0, reference=True),
    ]
    assert [(r["family"], r["n_models"], r["id"]) for r in family_table(rows, True)] == [("M", 1, 1.0)]


def test_ranking_by_future_direction_aware():
    stats = {
        "a": dict(id=0.9, future=0.7, decay=0.2),
        "b": dict(id=0.8, future=0.75, decay=0.05),
        "c": dict(id=0.5, future=None, decay=None),
    }
    assert [(r["rank"], r["model"]) for r in ranking(stats, True, by="future")] == [
        (1, "b"),
        (2, "a"),
        (None, "c"),
    ]
    assert [(r["rank"], r["model"]) for r in ranking(stats, False, by="future")] == [
        (1, "a"),
        (2, "b"),
        (None, "c"),
    ]
    assert ranking(stats, True, by="future")[0] == {
        "rank": 1,
        "model": "b",
        "id": 0.8,
        "future": 0.75,
        "decay": 0.05,
        "reference": False,
    }
    assert [r["model"] for r in ranking(stats, True, by="id")] == ["a", "b", "c"]  # higher ID first
    assert [r["model"] for r in ranking(stats, False, by="id")] == ["c", "b", "a"]  # lower ID first


def test_ranking_by_decay_is_the_default_smallest_first_whatever_the_direction():
    # Tables 5, 13, 21 list the smallest decay first, for accuracy and for balanced MSE alike; a negative
    # decay (better on later periods) comes before any positive one
    stats = {
        "a": dict(id=0.9, future=0.7, decay=0.2),
        "b": dict(id=0.8, future=0.75, decay=0.05),
        "n": dict(id=0.6, future=0.65, decay=-0.05),
        "c": dict(id=0.5, future=None, decay=None),
    }
    for higher in (True, False):
        assert [(r["rank"], r["model"]) for r in ranking(stats, higher)] == [
            (1, "n"),
            (2, "b"),
            (3, "a"),
            (None, "c"),
        ]
    # Table 13's first three (Amazon, balanced MSE): DeBERTa-v3 0.043, ModernBERT 0.064, BERT 0.075
    table13 = {
        "BERT": dict(id=None, future=0.999, decay=0.075),
        "DeBERTa-v3": dict(id=None, future=0.849, decay=0.043),
        "ModernBERT": dict(id=None, future=1.086, decay=0.064),
    }
    assert [r["model"] for r in ranking(table13, False)] == ["DeBERTa-v3", "ModernBERT", "BERT"]


def test_unknown_order_is_one_line_listing_the_valid_ones():
    assert check_order("future") == "future"
    with pytest.raises(DriftError) as e:
        check_order("futur")
    assert "valid: decay, future, id" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(DriftError):
        ranking({"a": dict(id=1.0, future=1.0, decay=0.0)}, True, by="auc")


# --- reference models: not ranked, the margin of the others over them -----------------------------------------

REFS = {
    "ffn-s": dict(id=0.80, future=0.60, decay=0.20, family="FFN"),
    "tx-s": dict(id=0.55, future=0.50, decay=0.05, family="Transformer"),
    "baseline-prior": dict(id=0.60, future=0.60, decay=0.00, family="Reference", reference=True),
    "cnn-s": dict(id=None, future=0.50, decay=None, family="CNN"),
    "baseline-linear": dict(id=0.70, future=0.65, decay=0.05, family="Reference", reference=True),
    "baseline-tfidf": dict(id=0.75, future=0.70, decay=0.05, family="Reference", reference=True),
}


def test_references_are_listed_after_the_ranked_models_without_a_rank():
    rows = ranking(REFS, True)
    # decay: tx-s 0.05, ffn-s 0.20, cnn-s none; then the references (prior's decay 0.00 would lead otherwise)
    assert [(r["rank"], r["model"], r["reference"]) for r in rows] == [
        (1, "tx-s", False),
        (2, "ffn-s", False),
        (None, "cnn-s", False),
        (None, "baseline-prior", True),
        (None, "baseline-linear", True),
        (None, "baseline-tfidf", True),
    ]
    assert is_reference("baseline-prior") and is_reference("x", {"family": "Reference"})
    assert is_reference("x", {"reference": True}) and not is_reference("probe-minilm", {"family": "Frozen"})


def test_reference_margins_by_hand():
    m = reference_margins(REFS, higher_is_better=True)
    assert set(m) == {"ffn-s", "tx-s", "cnn-s"}  # references get no margin
    assert m["ffn-s"] == {
        "margin_prior": approx(0.80 - 0.60),
        "margin_linear": approx(0.80 - 0.70),
        "margin_tfidf": approx(0.80 - 0.75),
        "beats_prior": True,
    }
    assert m["tx-s"] == {
        "margin_prior": approx(0.55 - 0.60),
        "margin_linear": approx(0.55 - 0.70),
        "margin_tfidf": approx(0.55 - 0.75),
        "beats_prior": False,
    }
    assert m["cnn-s"] == {
        "margin_prior": None,
        "margin_linear": None,
        "margin_tfidf": None,
        "beats_prior": None,
    }  # no ID
    assert below_prior(REFS, True) == ["tx-s"]
    # lower is better (balanced MSE): the margin is ref - model, so positive is still better
    lower = {"ffn-s": dict(id=2.31), "tx-s": dict(id=1.90), "baseline-prior": dict(id=2.10)}
    m = reference_margins(lower, higher_is_better=False)
    assert m["ffn-s"]["margin_prior"] == approx(2.10 - 2.31) and m["ffn-s"]["beats_prior"] is False
    assert m["tx-s"]["margin_prior"] == approx(2.10 - 1.90) and m["tx-s"]["beats_prior"] is True
    assert m["tx-s"]["margin_linear"] is None  # no baseline-linear
    assert below_prior(lower, False) == ["ffn-s"]
    assert id_margin(0.5, 0.5, True) == 0.0 and reference_margins({"ffn-s": dict(id=0.5)}, True)["ffn-s"] == {
        "margin_prior": None,
        "margin_linear": None,
        "margin_tfidf": None,
        "beats_prior": None,
    }
    assert below_prior({"ffn-s": dict(id=0.5)}, True) == []  # no prior: nothing to warn about


def test_below_prior_message_is_one_line():
    msg = below_prior_message("amazon", "ffn-s", 2.31, 2.10, "balanced_mse", False)
    assert msg == (
        "warning: ffn-s does not beat baseline-prior in distribution on amazon "
        "(ID 2.310 vs prior 2.100, balanced_mse, lower is better)"
    )


# --- cohort mean and deviations (eq. 9) ------------------------------------------------------------------------


def test_cohort_mean_only_where_every_model_fills():
    a = np.array([[1.0, 2.0], [nan, 4.0]])
    b = np.array([[3.0, nan], [5.0, 6.0]])
    c = np.array([[5.0, 1.0], [1.0, 8.0]])
    cohort = cohort_mean({"a": a, "b": b, "c": c})
    np.testing.assert_array_equal(cohort, [[3.0, nan], [nan, 6.0]])
    dev = deviations({"a": a, "b": b, "c": c})
    np.testing.assert_array_equal(dev["a"], [[-2.0, nan], [nan, -2.0]])
    np.testing.assert_array_equal(dev["c"], [[2.0, nan], [nan, 2.0]])


# --- forgetting curves (C.7, Figure 4) -------------------------------------------------------------------------


def test_forgetting_curve_by_hand():
    m = np.array(
        [
            [0.9, 0.8, 0.6],
            [nan, 0.7, nan],
            [0.1, 0.2, 0.5],  # lower-left cells are negative gaps: not part of the curve
        ]
    )
    gaps, values = forgetting_curve(m)
    np.testing.assert_array_equal(gaps, [0, 1, 2])
    np.testing.assert_allclose(values, [0.7, 0.8, 0.6])
    m[0, 2] = nan  # a gap with no filled cell is left out
    gaps, values = forgetting_curve(m)
    np.testing.assert_array_equal(gaps, [0, 1])


def test_family_curves_average_models_gap_by_gap():
    # CNN: cnn-a has gaps 0..2, cnn-b only 0..1 (its gap-2 cell is empty); MLP: one model
    curves = {
        "cnn-a": (np.array([0, 1, 2]), np.array([0.9, 0.7, 0.5])),
        "mlp": (np.array([0, 1]), np.array([0.6, 0.6])),
        "cnn-b": (np.array([0, 1]), np.array([0.8, 0.5])),
    }
    fam = family_curves(curves, {"cnn-a": "CNN", "cnn-b": "CNN", "mlp": "MLP"})
    assert list(fam) == ["CNN", "MLP"]
    np.testing.assert_array_equal(fam["CNN"][0], [0, 1, 2])
    np.testing.assert_allclose(fam["CNN"][1], [0.85, 0.6, 0.5])  # gap 2: cnn-a alone
    np.testing.assert_allclose(fam["MLP"][1], [0.6, 0.6])


def test_forgetting_curves_average_seeds_cell_by_cell():
    s1 = np.array([[1.0, 2.0], [nan, 3.0]])
    s2 = np.array([[3.0, nan], [nan, nan]])
    # averaged matrix [[2, 2], [nan, 3]] -> F(0) = (2 + 3) / 2, F(1) = 2
    # (pooling all seed cells instead would give F(0) = (1 + 3 + 3) / 3)
    gaps, values = forgetting_curves([s1, s2])
    np.testing.assert_array_equal(gaps, [0, 1])
    np.testing.assert_allclose(values, [2.5, 2.0])


# --- properties ------------------------------------------------------------------------------------------------

matrices = st.integers(1, 6).flatmap(
    lambda k: hnp.arrays(np.float64, (k, k), elements=st.one_of(st.just(nan), st.floats(0, 1)))
)


@FAST
@given(m=matrices)
def test_curve_and_statistics_agree(m):
    s = id_future_decay(m, True)
    gaps, values = forgetting_curve(m)
    curve = dict(zip(gaps.tolist(), values.tolist()))
    assert s["id"] == (pytest.approx(curve[0]) if 0 in curve else None)
    # Future is the cell-count-weighted mean of the curve over gaps >= 1
    counts = {g: np.isfinite(np.diagonal(m, g)).sum() for g in curve if g >= 1}
    if counts:
        expected = sum(curve[g] * n for g, n in counts.items()) / sum(counts.values())
        assert s["future"] == pytest.approx(expected)
    else:
        assert s["future"] is None
    lower = id_future_decay(m, False)
    assert (s["decay"] is None and lower["decay"] is None) or s["decay"] == pytest.approx(-lower["decay"])


@FAST
@given(m=matrices, n=st.integers(1, 4))
def test_mean_over_identical_seeds_is_the_matrix(m, n):
    np.testing.assert_allclose(mean_over_seeds([m] * n), m, rtol=1e-12)  # nan where m is nan
    np.testing.assert_allclose(cohort_mean({str(i): m for i in range(n)}), m, rtol=1e-12)

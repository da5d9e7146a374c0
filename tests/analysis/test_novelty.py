"""Which rows drifted (drift/analysis/novelty.py): the share of novel rows per cell and the most novel
examples, by brute force and through LanceDB, on data whose novel slice is known."""

from __future__ import annotations

import numpy as np
import pytest

import drift.analysis.novelty
from drift.analysis.novelty import LanceNeighbours, nearest_numpy, novelty
from drift.core.errors import DriftError


def dataset(seed=0, k=5, per=200):
    """k slices of 16-d Gaussians; slice 3 moved by 0.8 in every dimension."""
    rng = np.random.default_rng(seed)
    slices = np.repeat(np.arange(k), per)
    splits = np.where(rng.random(k * per) < 0.3, "test", "train")
    features = rng.normal(size=(k * per, 16)).astype(np.float32)
    features[slices == 3] += 0.8
    return features, slices, splits


def test_nearest_numpy_is_the_minimum_distance(monkeypatch):
    rng = np.random.default_rng(1)
    reference, queries = rng.normal(size=(30, 4)), rng.normal(size=(7, 4))
    direct = np.sqrt(((queries[:, None] - reference[None]) ** 2).sum(-1)).min(1)
    assert nearest_numpy(reference, queries) == pytest.approx(direct, rel=1e-4)
    monkeypatch.setattr(drift.analysis.novelty, "CHUNK_VALUES", 50)  # blocks of one query
    assert nearest_numpy(reference, queries) == pytest.approx(direct, rel=1e-4)


def test_the_moved_slice_is_novel_and_its_rows_are_the_examples():
    features, slices, splits = dataset()
    ids = [f"row-{r}" for r in range(len(slices))]
    out = novelty(
        features,
        slices,
        splits,
        cutoffs=[0, 1, 2, 3, 4],
        usable=[True] * 5,
        ids=ids,
        quantile=0.95,
        max_rows=500,
        top=3,
    )
    share = out["share"]
    assert (share[:3, 3] > 0.2).all()  # f_0..f_2 never saw anything like slice 3
    assert np.nanmean(np.delete(share, 3, axis=1)) == pytest.approx(0.05, abs=0.03)  # the calibrated level
    assert share[4, 3] < 0.15  # f_4 trained on slice 3
    example = next(e for e in out["examples"] if e["period"] == 3)
    assert example["cutoff"] == 2 and all(slices[r] == 3 for r in example["rows"])
    assert example["ids"] == [ids[r] for r in example["rows"]]
    assert example["distances"] == sorted(example["distances"], reverse=True) and all(example["novel"])
    assert [e["period"] for e in out["examples"]] == [1, 2, 3, 4]  # period 0 has no cutoff before it


@pytest.mark.compute
def test_lancedb_gives_the_brute_force_answer():
    features, slices, splits = dataset(seed=2, per=120)
    args = (features, slices, splits, [0, 2, 3], [True, True, False, True, True])
    plain, lance = novelty(*args, backend="numpy"), novelty(*args, backend="lancedb")
    np.testing.assert_array_equal(plain["share"], lance["share"])
    assert np.isnan(plain["share"][1]).all() and np.isnan(plain["share"][:, 2]).all()
    assert plain["threshold"].keys() == lance["threshold"].keys()
    for i in plain["threshold"]:
        assert plain["threshold"][i] == pytest.approx(lance["threshold"][i], rel=1e-4)
    assert [e["rows"] for e in plain["examples"]] == [e["rows"] for e in lance["examples"]]


def test_the_ivf_index_finds_nearly_every_nearest_neighbour(monkeypatch, tmp_path):
    monkeypatch.setattr(drift.analysis.novelty, "INDEX_MIN_ROWS", 1000)
    rng = np.random.default_rng(3)
    reference, queries = rng.normal(size=(2000, 8)), rng.normal(size=(200, 8))
    # all partitions: exact
    index = LanceNeighbours(reference, np.zeros(2000, int), str(tmp_path), nprobes=44)
    assert index.nprobes == 44
    assert index.nearest(queries, 0) == pytest.approx(nearest_numpy(reference, queries), rel=1e-3)
    assert index.nearest(queries[:1], 0) == pytest.approx(nearest_numpy(reference, queries[:1]), rel=1e-3)


def test_bad_parameters_are_named():
    features, slices, splits = dataset(per=20)
    with pytest.raises(DriftError, match="novelty_quantile"):
        novelty(features, slices, splits, [0], [True] * 5, quantile=1.0)
    with pytest.raises(DriftError, match="backend"):
        novelty(features, slices, splits, [0], [True] * 5, backend="faiss")

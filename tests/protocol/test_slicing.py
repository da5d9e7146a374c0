"""Time slices, the stratified split and sampling, and the slice table."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from drift.core.errors import DriftError
from drift.core.params import DatasetParams, SliceSpec, SplitParams
from drift.protocol.slicing import (
    assign_slices,
    build_slices,
    slice_edges,
    stratified_sample,
    stratified_split,
    stratum_keys,
)


def test_units_and_labels():
    edges, labels = slice_edges(SliceSpec(unit="year", start=1905, end=2014))
    assert len(labels) == 109 and labels[0] == "1905" and edges[-1] == dt.datetime(2014, 1, 1)
    edges, labels = slice_edges(SliceSpec(unit="half-year", start=2014, end=2024))
    assert len(labels) == 20 and labels[:3] == ["2014-H1", "2014-H2", "2015-H1"]
    assert edges[1] == dt.datetime(2014, 7, 1)
    edges, labels = slice_edges(SliceSpec(unit="quarter", start=2019, end=2022))
    assert len(labels) == 12 and labels[:2] == ["2019-Q1", "2019-Q2"] and labels[-1] == "2021-Q4"
    assert edges[1:4] == [dt.datetime(2019, 4, 1), dt.datetime(2019, 7, 1), dt.datetime(2019, 10, 1)]
    edges, labels = slice_edges(SliceSpec(unit="month", start=2023, end=2024))
    assert labels == [f"2023-{m:02d}" for m in range(1, 13)] and edges[-2:] == [
        dt.datetime(2023, 12, 1),
        dt.datetime(2024, 1, 1),
    ]
    _, labels = slice_edges(SliceSpec(unit="decade", start=1850, end=2030))
    assert len(labels) == 18 and labels[-1] == "2020s"
    edges, labels = slice_edges(SliceSpec(unit="custom", edges=["1950-01-01", "1970-07-01", 2000]))
    assert labels == ["1950-01-01", "1970-07-01"] and edges[-1] == dt.datetime(2000, 1, 1)


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"unit": "year", "start": 2000, "end": 2000}, "yields no slices"),
        (
            {"unit": "week", "start": 2000, "end": 2001},
            "valid: year, half-year, quarter, month, decade, custom",
        ),
        ({"unit": "decade", "start": 1855, "end": 1900}, "on a decade"),
        ({"unit": "custom", "edges": ["2000-01-01", "1999-01-01"]}, "increase"),
        ({"unit": "year"}, "need integer `start` and `end`"),
    ],
)
def test_bad_specs_fail_with_one_line(spec, message):
    with pytest.raises(DriftError, match=message) as error:
        slice_edges(SliceSpec(**spec))
    assert "\n" not in str(error.value)


def test_assign_slices_edges_are_half_open():
    edges, _ = slice_edges(SliceSpec(unit="half-year", start=2014, end=2015))
    times = np.array(
        ["2013-12-31T23:59:59", "2014-01-01", "2014-06-30T23:59", "2014-07-01", "2015-01-01"],
        dtype="datetime64[us]",
    )
    assert assign_slices(times, edges).tolist() == [-1, 0, 0, 1, -1]


def test_split_is_stratified_reproducible_and_stable_under_appends():
    ids = [f"r{i}" for i in range(1000)]
    labels = [0] * 800 + [1] * 200
    split = stratified_split(ids, stratum_keys(labels), 0.3, seed=0)
    assert Counter(s for s, y in zip(split, labels) if y == 0)["test"] == 240
    assert Counter(s for s, y in zip(split, labels) if y == 1)["test"] == 60
    assert (stratified_split(ids, stratum_keys(labels), 0.3, seed=0) == split).all()
    assert (stratified_split(ids, stratum_keys(labels), 0.3, seed=1) != split).any()
    # the order depends on each row's id, not its position: reordering rows keeps every row's split
    perm = np.random.default_rng(0).permutation(1000)
    again = stratified_split([ids[i] for i in perm], stratum_keys([labels[i] for i in perm]), 0.3, seed=0)
    assert (again == split[perm]).all()


def test_stratified_sample_is_proportional():
    ids = [f"r{i}" for i in range(1000)]
    strata = ["a"] * 600 + ["b"] * 300 + ["c"] * 100
    chosen = stratified_sample(ids, strata, 100, seed=3)
    assert Counter(strata[i] for i in chosen) == {"a": 60, "b": 30, "c": 10}
    assert (chosen == stratified_sample(ids, strata, 100, seed=3)).all()
    assert list(chosen) == sorted(chosen)


def _records(n_per_year: dict[int, int]) -> pa.Table:
    rows = [(f"{y}-{i}", dt.datetime(y, 3, 1), i % 2) for y, n in n_per_year.items() for i in range(n)]
    return pa.table(
        {
            "id": [r[0] for r in rows],
            "key": [r[0] for r in rows],
            "time": [r[1] for r in rows],
            "label": [r[2] for r in rows],
            "text": ["x"] * len(rows),
        }
    )


def test_build_slices_marks_small_slices_and_caps():
    records = _records({2000: 50, 2001: 5, 2002: 40, 1999: 7})
    cfg = {"slices": {"unit": "year", "start": 2000, "end": 2003}, "min_samples": 10, "cap_per_slice": 30}
    table, slices = build_slices(records, DatasetParams(**cfg), SplitParams(seed=0, test_fraction=0.3))
    assert [s["rows"] for s in slices] == [30, 5, 30]
    assert [s["usable"] for s in slices] == [True, False, True]
    assert [s["test"] for s in slices] == [10, 2, 10]  # 30% of each label stratum, rounded per stratum
    assert table.num_rows == 65 and set(table.column("slice").to_pylist()) == {0, 1, 2}
    again, _ = build_slices(records, DatasetParams(**cfg), SplitParams(seed=0, test_fraction=0.3))
    assert again.equals(table)


def test_build_slices_without_any_usable_slice_fails():
    with pytest.raises(DriftError, match="min_samples"):
        build_slices(
            _records({2000: 5}),
            DatasetParams(slices=SliceSpec(unit="year", start=2000, end=2001), min_samples=10),
            SplitParams(),
        )


def test_empty_slices_are_dropped_small_ones_kept_as_bands():
    records = _records({2000: 30, 2002: 4, 2003: 30})  # 2001 has no row at all
    cfg = {"slices": {"unit": "year", "start": 2000, "end": 2004}, "min_samples": 10}
    table, slices = build_slices(records, DatasetParams(**cfg), SplitParams(seed=0))
    assert [(s["label"], s["usable"]) for s in slices] == [("2000", True), ("2002", False), ("2003", True)]
    assert sorted(set(table.column("slice").to_pylist())) == [0, 1, 2]
    assert set(zip(table.column("slice").to_pylist(), table.column("slice_label").to_pylist())) == {
        (0, "2000"),
        (1, "2002"),
        (2, "2003"),
    }


def test_a_one_row_year_is_trainable_but_has_no_column():
    """Yearbook has years with one portrait (min_samples 1): its single row lands in train, so f_k can be
    trained (a row of the matrix) but nothing can be scored on that year's test split (its column stays
    empty)."""
    records = _records({2000: 30, 2001: 1, 2002: 30})
    cfg = {"slices": {"unit": "year", "start": 2000, "end": 2003}, "min_samples": 1}
    _, slices = build_slices(records, DatasetParams(**cfg), SplitParams(seed=0, test_fraction=0.3))
    # 15 rows per label: 30% is 4.5, rounded half up per stratum to 5 test rows each
    assert [(s["train"], s["test"]) for s in slices] == [(20, 10), (1, 0), (20, 10)]
    assert [s["trainable"] for s in slices] == [True, True, True]
    assert [s["usable"] for s in slices] == [True, False, True]

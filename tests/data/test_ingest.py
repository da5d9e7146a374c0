"""Ingest of the embedded datasets: every input row accounted for, reproducible records."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow.parquet as pq
import pytest

from drift.core.errors import DriftError
from drift.data.datasets import dataset_params, get_dataset, sotu, synth_portraits
from drift.data.ingest import ingest
from drift.data.ledger import Ledger
from drift.data.records import payload_key


def paragraphs_in_package() -> int:
    """Non-empty lines of every address the package ships: the rows sotu's reader reads."""
    data = sotu._package_dir()
    return sum(
        1 for f in (data / "speeches").glob("*.txt") for line in f.read_text().split("\n") if line.strip()
    )


def test_sotu_every_paragraph_accounted_for(tmp_path):
    cfg = {"min_words": 30, "start_year": 1853, "slices": {"unit": "decade", "start": 1850, "end": 2030}}
    counts = ingest("sotu", dataset_params("sotu", cfg), tmp_path / "r.parquet", tmp_path / "q.parquet")
    assert counts["read"] == paragraphs_in_package()
    assert counts["kept"] + counts["filtered"] + counts["quarantined"] == counts["read"]
    assert (
        counts["filtered_by_rule"]["before_start_year"] > 0
        and counts["filtered_by_rule"]["short_paragraph"] > 0
    )
    assert counts["filtered_by_rule"]["party_not_dem_or_rep"] > 0  # Lincoln's 1864 National Union ticket
    records = pq.read_table(tmp_path / "r.parquet")
    assert records.num_rows == counts["kept"]
    assert set(records.column("label").to_pylist()) == {0, 1}
    years = [t.year for t in records.column("time").to_pylist()]
    assert min(years) >= 1853
    texts = records.column("text").to_pylist()
    assert all(len(t.split()) >= 30 for t in texts)
    assert records.column("key").to_pylist()[0] == payload_key(texts[0])
    # Lincoln's 1862 message is Republican, Cleveland's 1885 Democratic
    by_id = dict(zip(records.column("id").to_pylist(), records.column("label").to_pylist()))
    assert any(by_id[i] == 1 for i in by_id if i.startswith("1862-Lincoln"))
    assert any(by_id[i] == 0 for i in by_id if i.startswith("1885-Cleveland"))


def test_time_span_filter_is_counted(tmp_path):
    cfg = {"min_words": 30, "start_year": 1853, "slices": {"unit": "decade", "start": 1900, "end": 1950}}
    counts = ingest("sotu", dataset_params("sotu", cfg), tmp_path / "r.parquet", tmp_path / "q.parquet")
    assert counts["filtered_by_rule"]["time_outside_span"] > 0
    years = [t.year for t in pq.read_table(tmp_path / "r.parquet").column("time").to_pylist()]
    assert 1900 <= min(years) and max(years) < 1950


def test_synth_is_deterministic_and_drifts():
    cfg = {"k": 4, "per_slice": 50, "seed": 3, "label_drift": 0.6, "concept_drift": 1.0}
    a = [r for r in synth_portraits.read(synth_portraits.PARAMS(**cfg), Ledger("s"))]
    b = [r for r in synth_portraits.read(synth_portraits.PARAMS(**cfg), Ledger("s"))]
    assert len(a) == 200 and all(
        (x["image"] == y["image"]).all() and x["label"] == y["label"] for x, y in zip(a, b)
    )
    assert a[0]["image"].shape == (3, 32, 32) and a[0]["image"].dtype == np.uint8
    assert [r["time"] for r in a[::50]] == [dt.datetime(2000 + t, 1, 1) for t in range(4)]
    other = synth_portraits.read(synth_portraits.PARAMS(**{**cfg, "seed": 4}), Ledger("s"))
    assert not (next(other)["image"] == a[0]["image"]).all()
    # label drift moves the class prior from 0.2 to 0.8 across the timeline
    first, last = (
        synth_portraits.make_slice(0, synth_portraits.PARAMS(**{**cfg, "per_slice": 2000})),
        synth_portraits.make_slice(3, synth_portraits.PARAMS(**{**cfg, "per_slice": 2000})),
    )
    assert first[1].mean() < 0.3 and last[1].mean() > 0.7


def test_duplicate_ids_are_quarantined_and_strict_stops(tmp_path, monkeypatch):
    rows = [
        {"id": "a", "time": dt.datetime(2001, 1, 1), "label": 0, "text": "x"},
        {"id": "a", "time": dt.datetime(2001, 1, 1), "label": 1, "text": "y"},
        {"id": "b", "time": dt.datetime(1990, 1, 1), "label": 1, "text": "z"},
    ]
    monkeypatch.setattr(sotu, "read", lambda cfg, ledger: iter(rows))
    cfg = {"slices": {"unit": "year", "start": 2000, "end": 2002}}
    counts = ingest("sotu", dataset_params("sotu", cfg), tmp_path / "r.parquet", tmp_path / "q.parquet")
    assert (counts["read"], counts["kept"], counts["filtered"], counts["quarantined"]) == (3, 1, 1, 1)
    bad = pq.read_table(tmp_path / "q.parquet").to_pylist()
    assert bad == [{"where": "a", "reason": "duplicate_id", "raw": "y"}]  # the dropped row's own text
    # the configured span beside the data's own: the first and last time of the rows kept
    assert counts["span"] == ["2000-01-01", "2002-01-01"]
    assert counts["data_span"] == ["2001-01-01 00:00:00", "2001-01-01 00:00:00"]
    with pytest.raises(DriftError, match="bad input at a: duplicate_id"):
        ingest(
            "sotu",
            dataset_params("sotu", {**cfg, "strict": True}),
            tmp_path / "r2.parquet",
            tmp_path / "q2.parquet",
        )
    assert not (tmp_path / "r2.parquet").exists() and not (tmp_path / "r2.partial").exists()


def test_unknown_dataset():
    with pytest.raises(DriftError, match="unknown dataset 'amazn': did you mean amazon"):
        get_dataset("amazn")

"""The ingest fast path (drift.data.datasets._fast) against the line-by-line path on the same input: the same
records (byte for byte), the same quarantine rows in the same order, the same counts, the same strict error.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from drift.core.errors import DriftError
from drift.data.datasets import _fast, dataset_params
from drift.data.ingest import ingest
from tests.data.test_datasets_real import edit  # a JSON line with fields changed or dropped (...)

FIXTURES = Path(__file__).parents[1] / "fixtures"
AMAZON = FIXTURES / "amazon2023"
ARXIV = FIXTURES / "arxiv" / "arxiv-metadata-sample.json"
WIDE_SPAN = {"unit": "year", "start": 1900, "end": 2100}


def both_paths(tmp_path: Path, name: str, cfg: dict) -> dict:
    """Ingests with fast=False and fast=True; asserts the outputs are identical and returns the counts."""
    out = {}
    for fast in (False, True):
        records, quarantine = tmp_path / f"records-{fast}.parquet", tmp_path / f"quarantine-{fast}.parquet"
        counts = ingest(name, dataset_params(name, cfg), records, quarantine, fast=fast)
        out[fast] = counts, records, pq.read_table(quarantine).to_pylist()
    (old_counts, old_records, old_bad), (new_counts, new_records, new_bad) = out[False], out[True]
    assert new_counts == old_counts
    assert new_bad == old_bad
    assert pq.read_table(new_records).equals(pq.read_table(old_records))
    assert new_records.read_bytes() == old_records.read_bytes()  # same batches too: DVC sees no change
    c = old_counts
    assert c["read"] == c["kept"] + c["filtered"] + c["quarantined"]
    return old_counts


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of a few KiB and leaves of 4 lines, so the fixtures cross many chunks and bad lines are
    bisected."""
    monkeypatch.setattr(_fast, "CHUNK_BYTES", 8192)
    monkeypatch.setattr(_fast, "LEAF_LINES", 4)


@pytest.mark.parametrize("span", [None, WIDE_SPAN])
def test_amazon_fixtures_all_categories_identical(tmp_path, span, small_chunks):
    cfg = {"source": str(AMAZON), **({"slices": span} if span else {})}
    counts = both_paths(tmp_path, "amazon", cfg)
    assert counts["read"] == 2400 and counts["kept"] > 2000  # 16 categories, the .gz one included


@pytest.mark.parametrize("time_field", ["first_version", "update_date"])
def test_arxiv_fixture_identical(tmp_path, time_field, small_chunks):
    counts = both_paths(tmp_path, "arxiv", {"source": str(ARXIV), "time_field": time_field})
    assert counts["read"] == 300 and counts["filtered_by_rule"]["no_kept_category"] > 0


def test_full_size_chunks_identical(tmp_path):
    """The default chunk size: a whole fixture file is one chunk."""
    both_paths(tmp_path, "amazon", {"source": str(AMAZON), "categories": ["All_Beauty", "Gift_Cards"]})
    both_paths(tmp_path, "arxiv", {"source": str(ARXIV)})


def with_bad_lines(lines: list[str], edits: dict[int, str | list[str]]) -> str:
    """The file's lines with some (1-based) replaced by one or several lines."""
    out = []
    for i, line in enumerate(lines, start=1):
        new = edits.get(i, line)
        out += new if isinstance(new, list) else [new]
    return "\n".join(out) + "\n"


def amazon_bad_file(folder: Path) -> Path:
    lines = (AMAZON / "All_Beauty.jsonl").read_text(encoding="utf-8").splitlines()
    good = lines[40]
    edits = {
        1: "null",  # a null first line (pyarrow would crash)
        10: good[:60],  # truncated JSON
        12: edit(good, rating="five"),  # wrong types
        14: edit(good, rating="4"),  # a number in a string: the old path keeps it
        16: edit(good, title=3),
        18: edit(good, user_id=7),  # an int id: the old path keeps it as "7"
        20: edit(good, user_id=0),
        22: edit(good, timestamp=1.5e12),
        24: edit(good, timestamp="1586445693499"),
        26: edit(good, rating=True),
        30: edit(good, user_id=...),  # missing fields
        32: edit(good, timestamp=...),
        34: edit(good, rating=...),
        36: edit(good, title=..., text=...),
        38: edit(good, parent_asin=""),
        50: edit(good, timestamp=10**17),  # bad timestamps
        52: edit(good, timestamp=-(10**15)),
        54: edit(good, timestamp=10**20),
        56: edit(good, rating=7.5),
        58: edit(good, title="\u3000", text="\x1c\xa0 \t"),  # Python-whitespace only
        60: edit(good, title="\u200b"),  # not whitespace to Python
        70: lines[5],  # duplicates
        72: lines[5],
        74: edit(lines[6], title="another title"),  # same id, other text
        80: ["", "   ", lines[79]],  # blank lines keep the numbering
        82: "null",
        84: "[1, 2]",
        86: good[:-1] + ', "rating": 2.0}',  # a duplicate key: the last one wins
        88: good.replace('"title": "', '"title": "\\ud800'),  # a lone surrogate
        90: good[:-1] + "} trailing",
        92: "{}",
        95: edit(good, timestamp=1388534399999),  # just before the span
        97: edit(good, timestamp=1704067200000),  # at the span's end
    }
    path = folder / "All_Beauty.jsonl"
    path.write_text(with_bad_lines(lines, edits), encoding="utf-8")
    with open(path, "ab") as f:
        f.write(lines[100].encode().replace(b"e", b"\xff", 1) + b"\n")  # not UTF-8
        f.write(lines[101].encode() + b"\r\n" + lines[102].encode())  # CRLF, and no newline at the end
    return path


def test_amazon_bad_lines_identical(tmp_path, small_chunks):
    folder = tmp_path / "amazon"
    folder.mkdir()
    path = amazon_bad_file(folder)
    shutil.copy(AMAZON / "Gift_Cards.jsonl.gz", folder)
    counts = both_paths(tmp_path, "amazon", {"source": str(folder)})
    reasons = counts["quarantined_by_reason"]
    assert set(reasons) == {
        "malformed_json",
        "missing_id",
        "missing_timestamp",
        "bad_timestamp",
        "missing_rating",
        "bad_rating",
        "rating_out_of_range",
        "empty_text",
        "duplicate_id",
    }
    assert counts["filtered_by_rule"]["time_outside_span"] >= 2

    gz = tmp_path / "gz"  # the same file compressed: read as a stream
    gz.mkdir()
    with open(path, "rb") as src, gzip.open(gz / "All_Beauty.jsonl.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    from_gz = both_paths(tmp_path, "amazon", {"source": str(gz)})
    assert from_gz.pop("files") == {"All_Beauty.jsonl.gz": counts.pop("files")["All_Beauty.jsonl"]}
    from_gz.pop("data_span"), counts.pop("data_span")  # one file of the two: its own first and last time
    assert from_gz == {**counts, "read": counts["read"] - 150, "kept": counts["kept"] - 150}


def test_amazon_bad_lines_default_chunks(tmp_path):
    folder = tmp_path / "amazon"
    folder.mkdir()
    amazon_bad_file(folder)
    both_paths(tmp_path, "amazon", {"source": str(folder)})


@pytest.mark.parametrize("time_field", ["first_version", "update_date"])
def test_arxiv_bad_lines_identical(tmp_path, time_field, small_chunks):
    lines = ARXIV.read_text(encoding="utf-8").splitlines()
    kept = next(line for line in lines if "hep-ph" in json.loads(line)["categories"].split())
    row = json.loads(kept)

    def created(s: str) -> str:
        return edit(kept, versions=[{"version": "v1", "created": s}] + row["versions"][1:])

    edits = {
        20: kept[:100],
        22: edit(kept, id=...),
        24: edit(kept, id=""),
        26: edit(kept, categories=...),
        28: edit(kept, categories=["hep-ph"]),
        30: edit(kept, categories="math.CO\thep-ph"),  # a tab separates categories too
        32: edit(kept, categories="math.CO"),  # filtered
        34: edit(kept, versions=...),
        36: edit(kept, versions=[]),
        38: created("Fri, 30 Feb 2007 10:00:00 GMT"),  # no such day
        40: created("2 Apr 2007 19:18:42 +0200"),  # another RFC 2822 form: the general parser
        42: created("Mon, 2 Apr 2007 25:18:42 GMT"),
        44: created("yesterday"),
        46: edit(kept, update_date="2008-02-30"),
        48: edit(kept, update_date="2008-1-3"),
        50: edit(kept, update_date=" 2008-01-03 "),
        52: edit(kept, update_date=...),
        54: edit(kept, title="  ", abstract="\n\u2028"),  # Python-whitespace only
        56: edit(kept, title=None, abstract=" x\u3000y\n z "),
        58: edit(kept, versions="v1"),
        60: edit(kept, id=1234),
        62: kept,  # a duplicate
        # out of span
        64: edit(kept, versions=[{"version": "v1", "created": "Sun, 1 Apr 1990 20:46:54 GMT"}]),
    }
    path = tmp_path / "snapshot.json"
    path.write_text(with_bad_lines(lines, edits), encoding="utf-8")
    counts = both_paths(tmp_path, "arxiv", {"source": str(path), "time_field": time_field})
    assert {
        "malformed_json",
        "missing_id",
        "missing_categories",
        "missing_timestamp",
        "bad_timestamp",
        "empty_text",
        "duplicate_id",
    } <= set(counts["quarantined_by_reason"])


def test_strict_stops_at_the_same_row(tmp_path, small_chunks):
    lines = (AMAZON / "Software.jsonl").read_text(encoding="utf-8").splitlines()
    folder = tmp_path / "amazon"
    folder.mkdir()
    # a duplicate (line 40) comes before a bad row (line 41) in the same chunk: the duplicate is named
    (folder / "Software.jsonl").write_text(with_bad_lines(lines, {40: lines[2], 41: "{"}), encoding="utf-8")
    messages = []
    for fast in (False, True):
        with pytest.raises(DriftError) as err:
            ingest(
                "amazon",
                dataset_params("amazon", {"source": str(folder), "strict": True, "slices": WIDE_SPAN}),
                tmp_path / "r.parquet",
                tmp_path / "q.parquet",
                fast=fast,
            )
        messages.append(str(err.value))
        assert not (tmp_path / "r.parquet").exists()
    assert messages[0] == messages[1]
    assert "duplicate_id" in messages[0]


def test_python_whitespace_list():
    assert _fast.PY_WHITESPACE == [c for c in range(0x110000) if chr(c).isspace()]


def test_env_var_selects_the_old_path(tmp_path, monkeypatch):
    from drift.data import ingest as ingest_module

    monkeypatch.setenv("DRIFT_INGEST_FAST", "0")
    assert ingest_module.fast_default() is False
    monkeypatch.setenv("DRIFT_INGEST_FAST", "1")
    assert ingest_module.fast_default() is True


# ---------------------------------------------------------------- damaged files and vanished rows


def damaged_gz(folder: Path, how: str) -> Path:
    """Gift_Cards.jsonl.gz (150 rows), cut at 60% of its bytes (a cut download) or with 8 bytes overwritten
    there (a corrupt block)."""
    data = bytearray((AMAZON / "Gift_Cards.jsonl.gz").read_bytes())
    at = len(data) * 6 // 10
    if how == "cut":
        data = data[:at]
    else:
        data[at : at + 8] = b"\x00\xff" * 4
    path = folder / "Gift_Cards.jsonl.gz"
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("how", ["cut", "corrupt"])
def test_a_damaged_gz_keeps_its_readable_rows_and_every_other_file(tmp_path, small_chunks, how):
    folder = tmp_path / "amazon"
    folder.mkdir()
    shutil.copy(AMAZON / "All_Beauty.jsonl", folder)
    damaged_gz(folder, how)
    counts = both_paths(tmp_path, "amazon", {"source": str(folder)})  # the line and the fast path agree
    files = counts["files"]
    assert files["All_Beauty.jsonl"]["read"] == 150  # the other file whole
    damaged = files["Gift_Cards.jsonl.gz"]
    assert 0 < damaged["kept"] < 150 and damaged["damaged"].startswith(
        "truncated" if how == "cut" else "corrupt"
    )
    assert counts["damaged_files"] == {"Gift_Cards.jsonl.gz": damaged["damaged"]}
    assert counts["read"] == counts["kept"] + counts["filtered"] + counts["quarantined"]
    bad = pq.read_table(tmp_path / "quarantine-True.parquet").to_pylist()
    assert {"where": "Gift_Cards.jsonl.gz", "reason": "damaged_file", "raw": damaged["damaged"]} in bad
    assert any(w.startswith("amazon: Gift_Cards.jsonl.gz is damaged (") for w in counts["warnings"])
    # the rows kept are the intact file's first rows, as they were
    whole = [json.loads(line) for line in gzip.open(AMAZON / "Gift_Cards.jsonl.gz", "rt")]
    kept = pq.read_table(tmp_path / "records-True.parquet").to_pylist()
    kept_gift = [
        r["id"]
        for r in kept
        if r["id"] in {f"{w['user_id']}:{w['parent_asin']}:{w['timestamp']}" for w in whole}
    ]
    assert len(kept_gift) == damaged["kept"]


@pytest.mark.parametrize("fast", [False, True])
def test_strict_names_the_damaged_file(tmp_path, small_chunks, fast):
    folder = tmp_path / "amazon"
    folder.mkdir()
    damaged_gz(folder, "cut")
    records = tmp_path / "records.parquet"
    with pytest.raises(
        DriftError, match=r"^amazon: Gift_Cards\.jsonl\.gz is damaged: truncated: .*strict mode"
    ):
        ingest(
            "amazon",
            dataset_params("amazon", {"source": str(folder), "strict": True}),
            records,
            tmp_path / "quarantine.parquet",
            fast=fast,
        )
    assert not records.exists() and not list(tmp_path.glob("*.partial"))


def test_files_whose_rows_vanish_get_a_warning(tmp_path, small_chunks):
    """An empty category file, and one whose timestamps are seconds (1970 when read as milliseconds): each
    named, with the rule that took its rows and the unit that looks wrong."""
    folder = tmp_path / "amazon"
    folder.mkdir()
    shutil.copy(AMAZON / "All_Beauty.jsonl", folder)
    (folder / "Software.jsonl").write_text("")
    rows = [json.loads(line) for line in gzip.open(AMAZON / "Gift_Cards.jsonl.gz", "rt")]
    (folder / "Gift_Cards.jsonl").write_text(
        "".join(json.dumps({**r, "timestamp": r["timestamp"] // 1000}) + "\n" for r in rows)
    )
    counts = both_paths(tmp_path, "amazon", {"source": str(folder)})
    assert counts["files"]["Software.jsonl"]["read"] == 0
    assert counts["files"]["Gift_Cards.jsonl"]["filtered_by_rule"] == {"time_outside_span": 150}
    warnings = counts["warnings"]
    assert "amazon: Software.jsonl contributed no rows: it holds none (an empty file?)" in warnings
    assert (
        "amazon: Gift_Cards.jsonl contributed no rows: all 150 rows filtered by time_outside_span; 150 of its "
        "timestamps land in January-February 1970: seconds since the epoch where milliseconds are expected?"
        in warnings
    )
    assert not any("All_Beauty" in w for w in warnings)

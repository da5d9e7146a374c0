"""The authors' way of turning source rows into records, each a setting of its corpus (ours the default):
yearbook.row_id (a name in both F/ and M/), amazon.keep_missing_ids (no user_id or parent_asin) and
arxiv.row_rules (how categories split, empty papers, the text's ends). Run through the ingest driver, on both
the line-by-line and the fast path."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path, PurePosixPath

import pyarrow.parquet as pq
import pytest
from PIL import Image

from drift.core.errors import DriftError
from drift.core.params import SplitParams
from drift.data.datasets import _fast, dataset_params
from drift.data.ingest import ingest
from drift.protocol.slicing import build_slices

FIXTURES = Path(__file__).parents[1] / "fixtures"
AMAZON = FIXTURES / "amazon2023"
ARXIV = FIXTURES / "arxiv" / "arxiv-metadata-sample.json"
WIDE_SPAN = {"unit": "year", "start": 1900, "end": 2100}


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of a few KiB and leaves of 4 lines: the fast path crosses chunks and bisects bad lines."""
    monkeypatch.setattr(_fast, "CHUNK_BYTES", 8192)
    monkeypatch.setattr(_fast, "LEAF_LINES", 4)


def run_ingest(tmp_path: Path, name: str, cfg: dict, fast: bool = False, tag: str = "") -> tuple:
    """(counts, records as rows, quarantine as rows, the records file's bytes)."""
    records, quarantine = (
        tmp_path / f"records{tag}-{fast}.parquet",
        tmp_path / f"quarantine{tag}-{fast}.parquet",
    )
    counts = ingest(name, dataset_params(name, cfg), records, quarantine, fast=fast)
    return (
        counts,
        pq.read_table(records).to_pylist(),
        pq.read_table(quarantine).to_pylist(),
        records.read_bytes(),
    )


def both_paths(tmp_path: Path, name: str, cfg: dict, tag: str = "") -> tuple:
    """run_ingest on the line-by-line and the fast path; asserts they write the same bytes."""
    slow = run_ingest(tmp_path, name, cfg, False, tag)
    fast = run_ingest(tmp_path, name, cfg, True, tag)
    assert fast[0] == slow[0] and fast[2] == slow[2] and fast[3] == slow[3]
    return slow


# -------------------------------------------------------------------------------------------- yearbook


def png(value: int) -> bytes:
    buf = io.BytesIO()
    Image.new("L", (32, 32), value).save(buf, format="PNG")
    return buf.getvalue()


def twin_names(root: Path) -> Path:
    """F/ and M/ each holding 1950_Ohio_a.png (other pixels), and F/1960_Iowa_b.png."""
    folder = root / "faces_aligned_small_mirrored_co_aligned_cropped_cleaned"
    (folder / "F").mkdir(parents=True)
    (folder / "M").mkdir()
    (folder / "F" / "1950_Ohio_a.png").write_bytes(png(10))
    (folder / "M" / "1950_Ohio_a.png").write_bytes(png(200))
    (folder / "F" / "1960_Iowa_b.png").write_bytes(png(90))
    return folder


def as_tar(folder: Path) -> Path:
    archive = folder.with_name(folder.name + ".tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return archive


@pytest.mark.parametrize("form", ["folder", "tar.gz"])
def test_yearbook_row_id_name_quarantines_the_twin_path_keeps_both(tmp_path, form):
    folder = twin_names(tmp_path / "src")
    source = str(folder if form == "folder" else as_tar(folder))

    counts, rows, bad, _ = run_ingest(tmp_path, "yearbook", {"source": source})  # the default: name
    assert sorted(r["id"] for r in rows) == ["1950_Ohio_a.png", "1960_Iowa_b.png"]
    assert bad == [{"where": "1950_Ohio_a.png", "reason": "duplicate_id", "raw": "time 1950-01-01 00:00:00"}]
    assert (counts["read"], counts["kept"], counts["quarantined"]) == (3, 2, 1)

    counts, rows, bad, _ = run_ingest(tmp_path, "yearbook", {"source": source, "row_id": "path"}, tag="path")
    by_id = {r["id"]: r for r in rows}
    assert set(by_id) == {"F/1950_Ohio_a.png", "M/1950_Ohio_a.png", "F/1960_Iowa_b.png"}
    assert not bad and (counts["read"], counts["kept"], counts["quarantined"]) == (3, 3, 0)
    assert by_id["F/1950_Ohio_a.png"]["label"] == 0 and by_id["M/1950_Ohio_a.png"]["label"] == 1
    assert set(by_id["F/1950_Ohio_a.png"]["image"]) == {10} and set(by_id["M/1950_Ohio_a.png"]["image"]) == {
        200
    }
    assert by_id["F/1960_Iowa_b.png"]["label"] == 0

    # the ids feed the slice stage's id-hash split as any string: each row gets its split
    table = pq.read_table(tmp_path / "recordspath-False.parquet")
    sliced, _ = build_slices(
        table,
        dataset_params("yearbook", {"source": source}),
        SplitParams(stratify=["slice"], test_fraction=0.5),
    )
    assert sorted(sliced.column("id").to_pylist()) == sorted(by_id)
    assert "test" in sliced.column("split").to_pylist()


def test_yearbook_path_ids_never_leave_the_root(tmp_path):
    """An archive member named with `..` or from the archive's root still gets `<F|M>/<file name>`: two parts,
    the first F or M, no slash or backslash in the name."""
    archive = tmp_path / "yb.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, value in [
            ("../../F/1970_x.png", 20),
            ("/abs/M/1971_y.png", 30),
            ("a/b/F/1972_z.png", 40),
            ("M/sub\\1973_w.png", 50),
        ]:
            info = tarfile.TarInfo(name)
            data = png(value)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    _, rows, bad, _ = run_ingest(tmp_path, "yearbook", {"source": str(archive), "row_id": "path"})
    ids = sorted(r["id"] for r in rows)
    assert ids == ["F/1970_x.png", "F/1972_z.png", "M/1971_y.png", "M/1973_w.png"] and not bad
    for row_id in ids:
        parts = PurePosixPath(row_id).parts
        assert len(parts) == 2 and parts[0] in ("F", "M") and ".." not in parts and "\\" not in row_id


def test_yearbook_row_id_refuses_other_values():
    with pytest.raises(DriftError, match=r"row_id.*name, path") as e:
        dataset_params("yearbook", {"row_id": "relative_path"})
    assert "\n" not in str(e.value)


# ---------------------------------------------------------------------------------------------- amazon

REVIEW = {
    "rating": 4.0,
    "title": "Fine",
    "text": "Works.",
    "parent_asin": "B01",
    "user_id": "U1",
    "timestamp": 1600000000000,
}


def amazon_lines(folder: Path) -> Path:
    """Toys.jsonl: good reviews around rows without ids, with a null or missing text, a non-string text."""
    edits = [
        {},  # 1 good
        {"user_id": None},  # 2 null user_id
        {"user_id": ...},  # 3 no user_id key
        {"parent_asin": ""},  # 4 empty parent_asin
        {"user_id": ..., "parent_asin": ...},  # 5 neither
        {"text": None},  # 6 null text
        {"text": ...},  # 7 no text key
        {"text": 5},  # 8 a number
        {"text": ["a", "b"]},  # 9 a list
        {"timestamp": 1600000000001},  # 10 good
    ]
    lines = []
    for i, change in enumerate(edits):
        row = {**REVIEW, "timestamp": REVIEW["timestamp"] + 10 * i}
        for k, v in change.items():
            if v is ...:
                row.pop(k)
            else:
                row[k] = v
        lines.append(json.dumps(row))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "Toys.jsonl"
    path.write_text("\n".join(lines * 3) + "\n")  # 30 lines: the fast path bisects across chunks
    return path


def test_amazon_keep_missing_ids(tmp_path, small_chunks):
    path = amazon_lines(tmp_path / "in")
    cfg = {"source": str(path.parent), "text_fields": ["text"], "keep_duplicates": True, "slices": WIDE_SPAN}

    counts, rows, bad, _ = both_paths(tmp_path, "amazon", cfg)
    assert counts["quarantined_by_reason"] == {"missing_id": 12, "empty_text": 12}
    assert [b["where"] for b in bad if b["reason"] == "missing_id"][:4] == [
        f"Toys.jsonl:{i}" for i in (2, 3, 4, 5)
    ]

    counts, rows, bad, _ = both_paths(tmp_path, "amazon", {**cfg, "keep_missing_ids": True}, tag="kept")
    assert counts["quarantined_by_reason"] == {"empty_text": 12}
    ts = REVIEW["timestamp"]
    assert [r["id"] for r in rows[:5]] == [
        f"U1:B01:{ts}",
        f":B01:{ts + 10}",
        f":B01:{ts + 20}",
        f"U1::{ts + 30}",
        f"::{ts + 40}",
    ]
    assert all(r["text"] == "Works." for r in rows[:5])
    # the second and third copies: repeats of the first, kept as `#2`, `#3` (keep_duplicates)
    assert sum(r["id"].startswith("::") for r in rows) == 3 and f"::{ts + 40}#3" in {r["id"] for r in rows}


def test_amazon_null_or_missing_text_and_non_string_text(tmp_path):
    """A null text and a missing one read alike, as the authors' (None, then fill_null("")): "" kept with
    keep_empty. A number or a list never becomes text, under either id setting: their preprocessing cannot
    write it (pyarrow refuses a column of strings and numbers), so no row of theirs holds one."""
    path = amazon_lines(tmp_path / "in")
    for keep_missing_ids in (False, True):
        cfg = {
            "source": str(path.parent),
            "text_fields": ["text"],
            "keep_empty": True,
            "keep_duplicates": True,
            "keep_missing_ids": keep_missing_ids,
            "slices": WIDE_SPAN,
        }
        counts, rows, bad, _ = both_paths(tmp_path, "amazon", cfg, tag=str(keep_missing_ids))
        ts = REVIEW["timestamp"]
        texts = {r["id"]: r["text"] for r in rows}
        assert texts[f"U1:B01:{ts + 50}"] == texts[f"U1:B01:{ts + 60}"] == ""
        assert {b["where"] for b in bad if b["reason"] == "empty_text"} >= {"Toys.jsonl:8", "Toys.jsonl:9"}
        assert counts["quarantined_by_reason"].get("empty_text") == 6


def test_amazon_fixtures_unchanged_by_keep_missing_ids(tmp_path):
    """Every fixture review has both ids: the setting changes no byte of the records."""
    cfg = {"source": str(AMAZON), "slices": WIDE_SPAN}
    base = run_ingest(tmp_path, "amazon", cfg, fast=True)
    theirs = run_ingest(tmp_path, "amazon", {**cfg, "keep_missing_ids": True}, fast=True, tag="theirs")
    assert base[0]["read"] == 2400 and theirs[0] == base[0] and theirs[3] == base[3] and theirs[2] == base[2]


# ----------------------------------------------------------------------------------------------- arxiv

PAPER = {
    "id": "0704.0001",
    "categories": "cs.LG hep-th",
    "title": "A  title",
    "abstract": " An\n abstract. ",
    "versions": [{"version": "v1", "created": "Mon, 2 Apr 2007 19:18:42 GMT"}],
    "update_date": "2008-11-13",
}
ODD = [  # (changes, ours, authors): each `kept text` or a filter / quarantine reason
    ({}, "A title\n\nAn abstract.", "A title\n\nAn abstract."),
    ({"categories": "cs.LG  hep-th"}, "A title\n\nAn abstract.", "other_category"),  # two spaces
    ({"categories": "cs.LG\thep-th"}, "A title\n\nAn abstract.", "no_kept_category"),  # a tab joins them
    ({"categories": "cs.LG\tgr-qc hep-th"}, "A title\n\nAn abstract.", "other_category"),
    ({"categories": " cs.LG"}, "A title\n\nAn abstract.", "other_category"),  # a leading space
    ({"categories": "cs.LG\n"}, "A title\n\nAn abstract.", "A title\n\nAn abstract."),  # stripped: the same
    ({"categories": "math.CO"}, "no_kept_category", "no_kept_category"),
    ({"title": "", "abstract": None}, "empty_text", ""),  # kept, empty
    ({"title": " \n", "abstract": ...}, "empty_text", ""),
    ({"title": ""}, "\n\nAn abstract.", "An abstract."),  # no separator left
    ({"abstract": "  "}, "A title\n\n", "A title"),
    ({"title": "Ti\u00a0tle"}, "Ti tle\n\nAn abstract.", "Ti tle\n\nAn abstract."),  # rare whitespace
]


def arxiv_file(folder: Path) -> Path:
    lines = []
    for i, (change, _, _) in enumerate(ODD):
        row = {**PAPER, "id": f"0704.{i:04d}"}
        for k, v in change.items():
            if v is ...:
                row.pop(k)
            else:
                row[k] = v
        lines.append(json.dumps(row))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "arxiv.json"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("rules", ["ours", "authors"])
def test_arxiv_row_rules(tmp_path, small_chunks, rules):
    path = arxiv_file(tmp_path / "in")
    cfg = {"source": str(path), "inclusion": "all", "separator": "\n\n", "row_rules": rules}
    counts, rows, bad, _ = both_paths(tmp_path, "arxiv", cfg)
    texts = {r["id"]: r["text"] for r in rows}
    reasons = {b["where"]: b["reason"] for b in bad}
    want = [(ours if rules == "ours" else authors) for _, ours, authors in ODD]
    for i, expected in enumerate(want):
        row_id = f"0704.{i:04d}"
        if expected in ("other_category", "no_kept_category"):
            assert row_id not in texts
        elif expected == "empty_text":
            assert reasons[f"arxiv.json:{i + 1}"] == "empty_text"
        else:
            assert texts[row_id] == expected, (i, rules)
    filters = [w for w in want if w in ("other_category", "no_kept_category")]
    assert counts["filtered_by_rule"] == {r: filters.count(r) for r in sorted(set(filters))}
    labels = {r["id"]: r["label"] for r in rows}
    assert labels["0704.0000"] == [1, 0, 0, 0, 1, 0, 0]  # cs.LG and hep-th


def test_arxiv_row_rules_inclusion_any(tmp_path, small_chunks):
    """With `inclusion: any` an empty piece is no category at all: only the joined one (a tab) loses its
    labels."""
    path = arxiv_file(tmp_path / "in")
    cfg = {"source": str(path), "row_rules": "authors"}
    _, rows, _, _ = both_paths(tmp_path, "arxiv", cfg)
    labels = {r["id"]: r["label"] for r in rows}
    assert labels["0704.0001"] == [1, 0, 0, 0, 1, 0, 0]  # two spaces: both labels
    assert labels["0704.0004"] == [1, 0, 0, 0, 0, 0, 0]  # " cs.LG"
    assert "0704.0002" not in labels  # "cs.LG\thep-th": neither
    assert labels["0704.0003"] == [0, 0, 0, 0, 1, 0, 0]  # "cs.LG\tgr-qc" is one piece


def test_arxiv_row_rules_refuses_other_values():
    with pytest.raises(DriftError, match=r"row_rules.*ours, authors") as e:
        dataset_params("arxiv", {"row_rules": "theirs"})
    assert "\n" not in str(e.value)


def test_arxiv_fixtures_unchanged_by_row_rules(tmp_path):
    """Every fixture paper has single-spaced categories, a title and an abstract: no byte of the records
    moves."""
    for inclusion in ("any", "all"):
        cfg = {"source": str(ARXIV), "inclusion": inclusion, "separator": "\n\n", "slices": WIDE_SPAN}
        base = run_ingest(tmp_path, "arxiv", cfg, fast=True, tag=inclusion)
        theirs = run_ingest(
            tmp_path, "arxiv", {**cfg, "row_rules": "authors"}, fast=True, tag=f"a{inclusion}"
        )
        assert base[0]["kept"] > 0 and theirs[0] == base[0] and theirs[3] == base[3] and theirs[2] == base[2]

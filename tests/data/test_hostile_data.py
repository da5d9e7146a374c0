"""Hostile data: files made to cost more than they hold. Each test is one probe of the readers' bounds (bytes
a .gz may expand to, blank lines in a row, the bytes of one image, what a path may name, how deep a JSON line
may nest, values that mean "missing", years no corpus holds), with the exact line or quarantine reason a user
sees."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from drift.core.errors import DriftError
from drift.core.params import SliceSpec, parse
from drift.data.datasets import table, yearbook
from drift.data.datasets._io import OutsideRoot, open_inside
from drift.data.datasets.table import NotAFile, TableParams, image_path, label_names
from drift.data.ingest import ingest
from drift.data.inspect import propose
from drift.data.ledger import Ledger
from drift.protocol.slicing import slice_edges

SPAN = {"unit": "year", "start": 2000, "end": 2030}


def section(source: Path, **extra) -> TableParams:
    cfg = {
        "source": str(source),
        "time": "time",
        "text": ["text"],
        "label": "label",
        "task": "binary",
        "slices": SPAN,
        **extra,
    }
    return parse(TableParams, cfg, "t")


def ingested(tmp_path: Path, cfg, fast: bool = True, name: str = "t") -> tuple[dict, pa.Table, list[dict]]:
    counts = ingest(name, cfg, tmp_path / "r.parquet", tmp_path / "q.parquet", fast=fast)
    return counts, pq.read_table(tmp_path / "r.parquet"), pq.read_table(tmp_path / "q.parquet").to_pylist()


def row(
    fmt: str, i: int, time_: str | None = None, text: str | None = None, label: str | None = None
) -> bytes:
    values = {
        "time": time_ or f"20{10 + i % 10}-01-01",
        "text": text or f"row {i} says hello",
        "label": "ab"[i % 2] if label is None else label,
    }
    if fmt == "csv":
        return ",".join(values.values()).encode() + b"\n"
    return json.dumps(values).encode() + b"\n"


def rows(fmt: str, n: int) -> bytes:
    """A table of `n` good rows (header included): times 2010-2019, labels a and b."""
    return (b"time,text,label\n" if fmt == "csv" else b"") + b"".join(row(fmt, i) for i in range(n))


def damaged(counts: dict, bad: list[dict], name: str, detail: str) -> None:
    """The file is quarantined by name as damaged, with `detail`, and said so in one warning line."""
    assert counts["damaged_files"] == {name: detail}
    assert bad == [{"where": name, "reason": "damaged_file", "raw": detail}]
    assert counts["warnings"] == [
        f"t: {name} is damaged ({detail}): quarantined, its rows before the damage kept"
    ]


# ---------------------------------------------------------------- 1. decompression bombs


def newline_bomb(path: Path, head: bytes, mib: int) -> Path:
    """`head`, then `mib` MiB of empty lines: gzip members of 1 MiB each, about 1 KB on disk."""
    member = gzip.compress(b"\n" * (1 << 20), 9)
    with open(path, "wb") as f:
        f.write(gzip.compress(head))
        for _ in range(mib):
            f.write(member)
    return path


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_gzip_bomb_of_blank_lines_stops_at_max_blank_lines_and_keeps_the_rows_before(tmp_path, fmt, fast):
    path = newline_bomb(tmp_path / f"bomb.{fmt}.gz", rows(fmt, 60), mib=2048)  # 2 MB expanding to 2 GiB
    assert path.stat().st_size < 3 << 20
    start = time.perf_counter()
    counts, records, bad = ingested(tmp_path, section(path, max_blank_lines=1000), fast)
    assert time.perf_counter() - start < 20  # unbounded: 2 GiB in $TMPDIR, then 2 billion rows quarantined
    assert (counts["read"], counts["kept"], counts["quarantined_by_reason"]) == (60, 60, {})
    first_blank = 62 if fmt == "csv" else 61  # the header is line 1 of the CSV
    damaged(
        counts,
        bad,
        path.name,
        f"more than max_blank_lines (1000) blank lines in a row from line {first_blank}: "
        f"its rows after them are not read; raise max_blank_lines in its section if "
        f"they are genuine",
    )


def test_the_default_bounds_exist_and_stop_a_bomb(tmp_path):
    assert TableParams.model_fields["max_expanded_bytes"].default == 10 * 2**30
    assert TableParams.model_fields["max_blank_lines"].default == 10_000
    path = newline_bomb(tmp_path / "bomb.csv.gz", rows("csv", 60), mib=0)
    with open(path, "ab") as f:
        f.write(gzip.compress(b"\n" * 20_000 + rows("csv", 4)[len(b"time,text,label\n") :]))
    counts, _, bad = ingested(tmp_path, section(path))
    assert counts["kept"] == 60 and counts["quarantined"] == 0
    damaged(
        counts,
        bad,
        "bomb.csv.gz",
        "more than max_blank_lines (10000) blank lines in a row from line 62: its "
        "rows after them are not read; raise max_blank_lines in its section if they "
        "are genuine",
    )


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_gzip_that_expands_past_max_expanded_bytes_is_cut_there_and_quarantined(tmp_path, fmt):
    head, filler = rows(fmt, 60), row(fmt, 5, text="filler")
    member = gzip.compress(filler * ((1 << 20) // len(filler)), 9)
    path = tmp_path / f"big.{fmt}.gz"
    with open(path, "wb") as f:
        f.write(gzip.compress(head))
        for _ in range(1024):  # about 1 GiB expanded, 3 MB on disk
            f.write(member)
    limit = 1 << 20
    counts, records, bad = ingested(tmp_path, section(path, max_expanded_bytes=limit))
    assert counts["kept"] == 60 + (limit - len(head)) // len(filler) and counts["quarantined"] == 0
    damaged(
        counts,
        bad,
        path.name,
        f"expands past max_expanded_bytes ({limit} bytes): a decompression bomb? its rows "
        f"after that point are not read; raise max_expanded_bytes in its section if "
        f"{path.name} is genuine",
    )


def test_blank_lines_are_no_rows_but_a_blank_line_inside_a_quoted_field_is_text(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b'time,text,label\n\n2020-01-01,first,a\n\n\r\n2021-01-01,"para one\n\npara two",b\n\n')
    for fast in (True, False):
        counts, records, bad = ingested(tmp_path, section(path), fast)
        assert (counts["read"], counts["kept"], bad) == (2, 2, [])
        assert records["id"].to_pylist() == ["t.csv:1", "t.csv:2"]
        assert records["text"].to_pylist() == ["first", "para one\n\npara two"]


# ---------------------------------------------------------------- 2. one archive member cannot fill memory


def png_bytes(value: int = 100) -> bytes:
    buffer = io.BytesIO()
    Image.new("L", (40, 40), value).save(buffer, format="PNG")
    return buffer.getvalue()


def yearbook_read(source: Path, **extra) -> tuple[list[dict], Ledger]:
    ledger, kept = Ledger("yearbook"), []
    for record in yearbook.read(yearbook.PARAMS.of({"source": str(source), **extra}), ledger):
        ledger.keep()
        kept.append(record)
    return kept, ledger


def test_a_yearbook_archive_member_over_max_image_bytes_is_quarantined_unread(tmp_path, monkeypatch):
    huge = png_bytes() + b"\0" * (2 << 20)  # 2 MiB: stands for a 3 GiB member, with the limit at 1 MiB
    archive = tmp_path / "yb.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in [("faces/F/1950_a.png", png_bytes()), ("faces/M/1960_b.png", huge)]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    reads = []
    real_read = tarfile.ExFileObject.read
    monkeypatch.setattr(tarfile.ExFileObject, "read", lambda f, *a: reads.append(a) or real_read(f, *a))
    kept, ledger = yearbook_read(archive, max_image_bytes=1 << 20)
    assert [r["id"] for r in kept] == ["1950_a.png"] and len(reads) == 1  # the big member never read
    assert ledger.bad_rows == [
        {
            "where": "yb.tar.gz:faces/M/1960_b.png",
            "reason": "image_too_large",
            "raw": f"{len(huge)} bytes: over yearbook.max_image_bytes (1048576); raise it if the "
            f"image is genuine",
        }
    ]
    assert yearbook.PARAMS.model_fields["max_image_bytes"].default == 64 << 20


def test_a_yearbook_folder_file_over_max_image_bytes_or_no_regular_file_is_quarantined_unread(tmp_path):
    folder = tmp_path / "faces"
    (folder / "F").mkdir(parents=True)
    (folder / "M").mkdir()
    (folder / "F" / "1950_a.png").write_bytes(png_bytes())
    (folder / "M" / "1960_b.png").write_bytes(png_bytes() + b"\0" * (2 << 20))
    os.mkfifo(folder / "M" / "1970_c.png")
    kept, ledger = yearbook_read(folder, max_image_bytes=1 << 20)
    assert [r["id"] for r in kept] == ["1950_a.png"]
    size = (folder / "M" / "1960_b.png").stat().st_size
    assert ledger.bad_rows == [
        {
            "where": str(folder / "M" / "1960_b.png"),
            "reason": "image_too_large",
            "raw": f"{size} bytes: over yearbook.max_image_bytes (1048576); raise it if the image is genuine",
        },
        {"where": str(folder / "M" / "1970_c.png"), "reason": "not_a_file", "raw": None},
    ]


# ---------------------------------------------------------------- 3. only regular files, opened where they were checked


def image_table(tmp_path: Path, cells: list[str]) -> tuple[Path, TableParams]:
    data = tmp_path / "data"
    (data / "img").mkdir(parents=True)
    Image.new("RGB", (32, 32), (200, 10, 10)).save(data / "img" / "good.png")
    pq.write_table(
        pa.table(
            {
                "id": [f"r{i}" for i in range(len(cells))],
                "year": [2000] * len(cells),
                "label": [0, 1] * (len(cells) // 2) + [0] * (len(cells) % 2),
                "image": cells,
            }
        ),
        data / "t.parquet",
    )
    cfg = {
        "source": str(data / "t.parquet"),
        "id": "id",
        "time": "year",
        "time_encoding": "year",
        "image": "image",
        "image_encoding": "path",
        "label": "label",
        "task": "binary",
        "classes": [0, 1],
        "slices": {"unit": "year", "start": 2000, "end": 2001},
    }
    return data, parse(TableParams, cfg, "imgs")


def test_an_image_path_naming_a_fifo_is_quarantined_at_once(tmp_path):
    data, cfg = image_table(tmp_path, ["img/good.png", "img/pipe.png"])
    os.mkfifo(data / "img" / "pipe.png")
    done: dict = {}
    worker = threading.Thread(
        target=lambda: done.update(counts=ingested(tmp_path, cfg, name="imgs")), daemon=True
    )
    worker.start()
    worker.join(timeout=20)
    if worker.is_alive():  # blocked opening the FIFO: a writer releases it, then the test fails
        os.close(os.open(data / "img" / "pipe.png", os.O_WRONLY | os.O_NONBLOCK))
        worker.join(timeout=20)
        pytest.fail("ingest blocked on a FIFO an image path names")
    counts, _, bad = done["counts"]
    assert counts["kept"] == 1 and [(b["where"], b["reason"]) for b in bad] == [("r1", "not_a_file")]
    with pytest.raises(
        NotAFile
    ):  # what the check stage digests skips it too (drift.run.checks.table_image_files)
        image_path("img/pipe.png", data)


def test_a_folder_swapped_for_a_symlink_after_the_check_is_not_followed(tmp_path, monkeypatch):
    data, cfg = image_table(tmp_path, ["img/good.png"])
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    Image.new("RGB", (32, 32), (10, 200, 10)).save(outside / "good.png")
    checked = image_path

    def swapped_after_the_check(value, root, bound=None):
        path = checked(value, root, bound)
        (data / "img").rename(data / "img-before")
        (data / "img").symlink_to(outside, target_is_directory=True)
        return path

    monkeypatch.setattr(table, "image_path", swapped_after_the_check)
    counts, _, bad = ingested(tmp_path, cfg, name="imgs")
    assert counts["kept"] == 0 and [(b["where"], b["reason"]) for b in bad] == [("r0", "path_outside_root")]
    with pytest.raises(OutsideRoot, match="changed into a symlink after it was checked"):
        open_inside(data.resolve() / "img" / "good.png", data.resolve())


# ---------------------------------------------------------------- 4. a JSON line nested 100,000 levels deep


@pytest.mark.parametrize("fast", [True, False])
def test_a_json_line_nested_100000_deep_or_malformed_is_its_rows_quarantine(tmp_path, fast):
    lines = [row("jsonl", i) for i in range(6)]
    deep = b'{"time": "2020-01-01", "text": ' + b"[" * 100_000 + b"]" * 100_000 + b', "label": "a"}\n'
    lines[2], lines[4] = deep, b'{"time": "2020-01-01", "text": "cut\n'
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"".join(lines))
    counts, records, bad = ingested(tmp_path, section(path), fast)
    assert counts["kept"] == 4 and counts["quarantined_by_reason"] == {"unreadable_row": 2}
    assert [(b["where"], b["reason"]) for b in bad] == [
        ("d.jsonl:3", "unreadable_row"),
        ("d.jsonl:5", "unreadable_row"),
    ]
    assert bad[0]["raw"] == deep.decode()[:2000] and bad[1]["raw"] == '{"time": "2020-01-01", "text": "cut'
    assert records["id"].to_pylist() == ["d.jsonl:1", "d.jsonl:2", "d.jsonl:4", "d.jsonl:6"]


# ---------------------------------------------------------------- 5. values that mean "missing" are no labels

MARKERS = ["NaN", "nan", "NA", "N/A", "null", "None", "<NA>", ""]


def test_missing_value_markers_are_missing_labels_and_never_proposed_as_classes(tmp_path):
    labels = ["a", "b"] * 20 + MARKERS
    path = tmp_path / "t.csv"
    path.write_bytes(b"time,text,label\n" + b"".join(row("csv", i, label=v) for i, v in enumerate(labels)))
    assert label_names(section(path)) == ["a", "b"]
    counts, _, _ = ingested(tmp_path, section(path))
    assert counts["kept"] == 40 and counts["quarantined_by_reason"] == {"missing_label": len(MARKERS)}
    proposal = propose("t", str(path))["section"]
    assert (proposal["task"], proposal["classes"]) == ("binary", ["a", "b"])
    # a marker the declared classes name is a class
    counts, _, _ = ingested(tmp_path, section(path, task="multiclass", classes=["a", "b", "None"]))
    assert counts["kept"] == 41 and counts["quarantined_by_reason"] == {"missing_label": len(MARKERS) - 1}


def test_float_nan_is_a_missing_label_in_every_task(tmp_path):
    nan = float("nan")
    path = tmp_path / "t.parquet"
    pq.write_table(
        pa.table(
            {
                "time": ["2020-01-01"] * 6,
                "text": [f"text {i}" for i in range(6)],
                "score": [1.5, nan, 2.0, None, float("inf"), 3.0],
                "label": [0.0, 1.0, nan, 1.0, 0.0, 1.0],
                "tag_a": ["1", "NaN", "0", "", "1", "x"],
                "tag_b": ["0", "1", "1", "0", "1", "0"],
            }
        ),
        path,
    )
    counts, _, _ = ingested(tmp_path, section(path, label="score", task="regression"))
    assert counts["kept"] == 3 and counts["quarantined_by_reason"] == {"missing_label": 2, "bad_label": 1}
    counts, _, _ = ingested(tmp_path, section(path, label=["tag_a", "tag_b"], task="multilabel"))
    assert counts["kept"] == 3 and counts["quarantined_by_reason"] == {"missing_label": 2, "bad_label": 1}
    counts, _, _ = ingested(tmp_path, section(path))
    assert counts["kept"] == 5 and counts["quarantined_by_reason"] == {"missing_label": 1}
    proposal = propose("t", str(path), label=["label"])["section"]
    assert (proposal["task"], proposal["classes"]) == ("binary", ["0", "1"])


# ---------------------------------------------------------------- 6. years no corpus holds


def dated(path: Path, times: list[str]) -> Path:
    path.write_bytes(b"time,text,label\n" + b"".join(row("csv", i, time_=t) for i, t in enumerate(times)))
    return path


def test_times_outside_plausible_years_are_quarantined_and_never_make_slices(tmp_path):
    times = [f"20{10 + i % 10}-06-01" for i in range(100)] + ["0001-01-01", "9999-12-31"]
    path = dated(tmp_path / "t.csv", times)
    counts, _, bad = ingested(tmp_path, section(path, slices={"unit": "year", "start": 2010, "end": 2020}))
    assert counts["kept"] == 100 and counts["quarantined_by_reason"] == {"outside_plausible_years": 2}
    assert [(b["where"], b["reason"]) for b in bad] == [
        ("t.csv:101", "outside_plausible_years"),
        ("t.csv:102", "outside_plausible_years"),
    ]
    proposal = propose("t", str(path))
    assert proposal["section"]["slices"] == {"unit": "year", "start": 2010, "end": 2020}
    assert proposal["implausible_times"] == 2
    # the setting widens the span: the driver's slices then filter them
    counts, _, _ = ingested(
        tmp_path,
        section(path, plausible_years=[1, 10000], slices={"unit": "year", "start": 2010, "end": 2020}),
    )
    assert counts["kept"] == 100 and counts["filtered_by_rule"] == {"time_outside_span": 2}
    with pytest.raises(DriftError) as e:
        section(path, plausible_years=[2000, 1900])
    assert str(e.value) == (
        f"{path}: plausible_years [2000, 1900] is [first year, year after the last]: 1 <= first "
        f"< end <= 10000, e.g. [1000, 3000]"
    )


def test_a_few_rows_years_away_from_the_rest_stay_out_of_the_proposed_slices(tmp_path):
    times = [f"20{15 + i % 6}-03-01" for i in range(300)] + ["1900-01-01", "2999-01-01"]
    proposal = propose("t", str(dated(tmp_path / "t.csv", times)))
    assert proposal["section"]["slices"] == {"unit": "year", "start": 2015, "end": 2021}
    assert proposal["outlying_rows"] == 2 and proposal["span"] == [
        "1900-01-01 00:00:00",
        "2999-01-01 00:00:00",
    ]


def test_slices_past_year_9999_are_one_line_not_a_traceback():
    with pytest.raises(DriftError) as e:
        slice_edges(SliceSpec(unit="year", start=1, end=10000))
    assert str(e.value) == "slices of unit 'year' run from year 1 to 9999: got start 1, end 10000"

"""The real-corpus readers (Yearbook, Amazon Reviews 2023, arXiv) on real samples in their on-disk formats."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from drift.core.dataset_registry import DATASETS
from drift.core.errors import DriftError
from drift.data.datasets import amazon, arxiv, get_dataset, yearbook
from drift.data.ledger import Ledger

FIXTURES = Path(__file__).parents[1] / "fixtures"
AMAZON = FIXTURES / "amazon2023"
ARXIV = FIXTURES / "arxiv" / "arxiv-metadata-sample.json"


def run(module, cfg: dict, strict: bool = False) -> tuple[list[dict], Ledger]:
    """Reads everything the way the ingest driver does: keep() per yielded row."""
    ledger = Ledger(module.__name__.rsplit(".", 1)[-1], strict=strict)
    rows = []
    for row in module.read(module.PARAMS.of(cfg), ledger):  # a reader takes its typed section
        ledger.keep()
        rows.append(row)
    return rows, ledger


def n_lines(path: Path) -> int:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


def corrupt(src: Path, dst: Path, edits: dict[int, str]) -> None:
    """Copies a JSON-lines file with some lines (1-based) replaced."""
    lines = src.read_text(encoding="utf-8").splitlines()
    for lineno, text in edits.items():
        lines[lineno - 1] = text
    dst.write_text("\n".join(lines) + "\n", encoding="utf-8")


def edit(line: str, **changes) -> str:
    row = json.loads(line)
    for k, v in changes.items():
        if v is ...:
            row.pop(k, None)
        else:
            row[k] = v
    return json.dumps(row)


def test_registry_and_contract():
    for name, task, modality in [
        ("yearbook", "binary", "image"),
        ("amazon", "regression", "text"),
        ("arxiv", "multilabel", "text"),
    ]:
        assert DATASETS[name][:2] == (task, modality)
        assert get_dataset(name).__name__ == f"drift.data.datasets.{DATASETS[name].module}"
    assert yearbook.label_names(yearbook.PARAMS(**{})) == ["F", "M"]
    assert amazon.label_names(amazon.PARAMS(**{})) == []
    assert arxiv.label_names(arxiv.PARAMS(**{})) == [
        "cs.LG",
        "hep-ph",
        "cs.CV",
        "cs.AI",
        "hep-th",
        "quant-ph",
        "gr-qc",
    ]
    assert arxiv.label_names(arxiv.PARAMS(**{"categories": ["gr-qc", "cs.LG"]})) == ["gr-qc", "cs.LG"]


# ---------------------------------------------------------------------------------------------- amazon


def test_amazon_reads_jsonl_and_jsonl_gz():
    cats = ["Software", "Gift_Cards", "All_Beauty"]  # Gift_Cards is the .jsonl.gz
    rows, ledger = run(amazon, {"source": str(AMAZON), "categories": cats})
    n = sum(n_lines(AMAZON / f) for f in ("Software.jsonl", "Gift_Cards.jsonl.gz", "All_Beauty.jsonl"))
    assert len(rows) == n == 450 and ledger.read == n and not ledger.quarantined and not ledger.filtered

    # rows come category by category, in cfg order, each line as the file has it
    first = json.loads((AMAZON / "Software.jsonl").read_text().splitlines()[0])
    r = rows[0]
    assert r["id"] == f"{first['user_id']}:{first['parent_asin']}:{first['timestamp']}"
    assert r["label"] == float(first["rating"]) and isinstance(r["label"], float)
    assert r["text"] == first["title"] + "\n" + first["text"]
    assert r["time"] == dt.datetime.fromtimestamp(first["timestamp"] / 1000, dt.timezone.utc).replace(
        tzinfo=None
    )
    assert r["time"].tzinfo is None
    with gzip.open(AMAZON / "Gift_Cards.jsonl.gz", "rt") as f:
        gift = json.loads(f.readline())
    assert rows[150]["id"] == f"{gift['user_id']}:{gift['parent_asin']}:{gift['timestamp']}"

    assert {r["label"] for r in rows} <= {1.0, 2.0, 3.0, 4.0, 5.0}
    assert all(r.keys() == {"id", "time", "label", "text"} for r in rows)
    assert min(r["time"] for r in rows).year >= 2000 and max(r["time"] for r in rows).year <= 2023


def test_amazon_default_is_every_category_in_the_folder():
    rows, _ = run(amazon, {"source": str(AMAZON)})
    assert len(rows) == sum(n_lines(p) for p in AMAZON.iterdir()) == 2400  # 16 categories x 150


def test_amazon_exact_timestamp_conversion(tmp_path):
    # 1586445693499 ms = 2020-04-09 15:21:33.499 UTC; the optional fields of the real files are accepted
    line = json.dumps(
        {
            "rating": 3.0,
            "title": "t",
            "text": "x",
            "parent_asin": "A",
            "user_id": "U",
            "timestamp": 1586445693499,
            "images": [],
            "asin": "B",
            "helpful_vote": 2,
            "verified_purchase": True,
        }
    )
    (tmp_path / "Toys.jsonl").write_text(line + "\n")
    rows, _ = run(amazon, {"source": str(tmp_path), "categories": ["Toys"]})
    assert rows == [
        {
            "id": "U:A:1586445693499",
            "time": dt.datetime(2020, 4, 9, 15, 21, 33, 499000),
            "label": 3.0,
            "text": "t\nx",
        }
    ]


def test_amazon_quarantine_reasons_and_ledger_invariant(tmp_path):
    src = AMAZON / "Software.jsonl"
    lines = src.read_text().splitlines()
    corrupt(
        src,
        tmp_path / "Software.jsonl",
        {
            3: lines[2][:-20],  # cut short
            5: edit(lines[4], timestamp="last tuesday"),
            7: edit(lines[6], timestamp=...),
            9: edit(lines[8], rating=7),
            11: edit(lines[10], rating=...),
            13: edit(lines[12], title="", text="  "),
            15: edit(lines[14], rating="five"),
            17: edit(lines[16], user_id=...),
            19: edit(lines[18], images=["x.jpg"], asin="B0", helpful_vote=3, verified_purchase=False),  # fine
        },
    )
    rows, ledger = run(amazon, {"source": str(tmp_path), "categories": ["Software"]})
    assert ledger.quarantined == {
        "malformed_json": 1,
        "bad_timestamp": 1,
        "missing_timestamp": 1,
        "rating_out_of_range": 1,
        "missing_rating": 1,
        "empty_text": 1,
        "bad_rating": 1,
        "missing_id": 1,
    }
    assert len(rows) == 150 - 8
    assert ledger.kept + sum(ledger.filtered.values()) + sum(ledger.quarantined.values()) == 150
    where = {b["where"]: b["reason"] for b in ledger.bad_rows}
    assert (
        where["Software.jsonl:3"] == "malformed_json" and where["Software.jsonl:9"] == "rating_out_of_range"
    )
    assert '"rating": 7' in next(b["raw"] for b in ledger.bad_rows if b["where"] == "Software.jsonl:9")


def test_amazon_strict_names_the_line(tmp_path):
    src = AMAZON / "Software.jsonl"
    corrupt(src, tmp_path / "Software.jsonl", {17: "{not json"})
    with pytest.raises(DriftError, match=r"Software\.jsonl:17: malformed_json"):
        run(amazon, {"source": str(tmp_path), "categories": ["Software"]}, strict=True)


def test_amazon_gz_corrupt_line(tmp_path):
    with gzip.open(AMAZON / "Gift_Cards.jsonl.gz", "rt") as f:
        lines = f.read().splitlines()
    lines[1] = edit(lines[1], rating=0)
    with gzip.open(tmp_path / "Gift_Cards.jsonl.gz", "wt") as f:
        f.write("\n".join(lines) + "\n")
    rows, ledger = run(amazon, {"source": str(tmp_path), "categories": ["Gift_Cards"]})
    assert len(rows) == 149 and ledger.bad_rows[0]["where"] == "Gift_Cards.jsonl.gz:2"


def test_amazon_unknown_category_lists_what_is_there():
    with pytest.raises(DriftError) as e:
        run(amazon, {"source": str(AMAZON), "categories": ["Software", "Softwear"]})
    msg = str(e.value)
    assert "\n" not in msg and "'Softwear'" in msg
    found = sorted(p.name.split(".")[0] for p in AMAZON.iterdir())  # every category in the folder, sorted
    assert "did you mean Software" in msg and "valid: " + ", ".join(found) in msg and "Gift_Cards" in found


def test_amazon_missing_source(tmp_path):
    with pytest.raises(DriftError) as e:
        run(amazon, {"source": str(tmp_path / "nope"), "categories": ["Software"]})
    assert (
        "\n" not in str(e.value)
        and str(tmp_path / "nope") in str(e.value)
        and "drift fetch amazon" in str(e.value)
    )


def test_json_fallback_reads_the_same(tmp_path, monkeypatch):
    """Without orjson the standard json module parses, with the same rows and the same quarantines."""
    import drift.data.datasets._io as io_mod

    src = AMAZON / "Software.jsonl"
    lines = src.read_text().splitlines()
    corrupt(src, tmp_path / "Software.jsonl", {2: lines[1][:-1], 4: "\xff\xfe not utf-8 either"})
    (tmp_path / "Software.jsonl").write_bytes(
        (tmp_path / "Software.jsonl").read_bytes().replace("\xff\xfe".encode(), b"\xff\xfe")
    )
    cfg = {"source": str(tmp_path), "categories": ["Software"]}
    fast, fast_ledger = run(amazon, cfg)
    monkeypatch.setattr(io_mod, "loads", json.loads)
    slow, slow_ledger = run(amazon, cfg)
    assert fast == slow and len(fast) == 148
    assert fast_ledger.quarantined == slow_ledger.quarantined == {"malformed_json": 2}


# ----------------------------------------------------------------------------------------------- arxiv

LEAF = ["cs.LG", "hep-ph", "cs.CV", "cs.AI", "hep-th", "quant-ph", "gr-qc"]


def test_arxiv_labels_filter_and_first_version_time():
    rows, ledger = run(arxiv, {"source": str(ARXIV)})
    assert ledger.read == n_lines(ARXIV) == 300
    assert ledger.filtered == {"no_kept_category": 99} and not ledger.quarantined and len(rows) == 201

    src = [json.loads(line) for line in ARXIV.read_text().splitlines()]
    by_id = {d["id"]: d for d in src}
    for r in rows:
        d = by_id[r["id"]]
        cats = d["categories"].split()
        assert r["label"] == [int(c in cats) for c in LEAF]
        assert r["text"] == " ".join(d["title"].split()) + "\n" + " ".join(d["abstract"].split())

    r = next(r for r in rows if r["id"] == "0704.0221")  # "astro-ph gr-qc hep-ph hep-th"
    assert r["label"] == [0, 1, 0, 0, 1, 0, 1]
    assert r["time"] == dt.datetime.strptime(
        by_id["0704.0221"]["versions"][0]["created"], "%a, %d %b %Y %H:%M:%S GMT"
    )
    assert sum(1 for r in rows if sum(r["label"]) > 1) == 36
    assert [sum(r["label"][i] for r in rows) for i in range(7)] == [5, 57, 4, 6, 72, 50, 46]


def test_arxiv_update_date_time_field():
    rows, _ = run(arxiv, {"source": str(ARXIV), "time_field": "update_date"})
    by_id = {json.loads(line)["id"]: json.loads(line) for line in ARXIV.read_text().splitlines()}
    assert len(rows) == 201
    for r in rows:
        assert r["time"] == dt.datetime.fromisoformat(by_id[r["id"]]["update_date"])
    # the two fields really differ for papers revised later
    first, _ = run(arxiv, {"source": str(ARXIV)})
    assert any(a["time"].date() != b["time"].date() for a, b in zip(first, rows))


def test_arxiv_custom_categories_order():
    rows, ledger = run(arxiv, {"source": str(ARXIV), "categories": ["gr-qc", "astro-ph"]})
    r = next(r for r in rows if r["id"] == "0704.0221")
    assert r["label"] == [1, 1]
    assert arxiv.label_names(arxiv.PARAMS(**{"categories": ["gr-qc", "astro-ph"]})) == ["gr-qc", "astro-ph"]
    assert ledger.read == 300


def test_arxiv_rfc2822_variants():
    from drift.data.datasets._io import parse_rfc2822

    assert parse_rfc2822("Mon, 2 Apr 2007 19:18:42 GMT") == dt.datetime(2007, 4, 2, 19, 18, 42)
    assert parse_rfc2822("Mon, 2 Apr 2007 21:18:42 +0200") == dt.datetime(2007, 4, 2, 19, 18, 42)
    assert parse_rfc2822("Mon, 31 Feb 2007 19:18:42 GMT") is None
    assert parse_rfc2822("yesterday") is None and parse_rfc2822(None) is None


def test_arxiv_quarantine_reasons_and_ledger_invariant(tmp_path):
    lines = ARXIV.read_text().splitlines()
    kept = [i for i, line in enumerate(lines, 1) if set(json.loads(line)["categories"].split()) & set(LEAF)]
    a, b, c, d, e, f = kept[:6]
    path = tmp_path / "arxiv-metadata-oai-snapshot.json"
    corrupt(
        ARXIV,
        path,
        {
            a: lines[a - 1][:50],
            b: edit(lines[b - 1], versions=[{"version": "v1", "created": "someday"}]),
            c: edit(lines[c - 1], versions=[]),
            d: edit(lines[d - 1], title=" \n ", abstract="\n"),
            e: edit(lines[e - 1], categories=...),
            f: edit(lines[f - 1], update_date="13/11/2008"),  # only bad under time_field update_date
        },
    )
    rows, ledger = run(arxiv, {"source": str(path)})
    assert ledger.quarantined == {
        "malformed_json": 1,
        "bad_timestamp": 1,
        "missing_timestamp": 1,
        "empty_text": 1,
        "missing_categories": 1,
    }
    assert len(rows) == 201 - 5 and ledger.read == 300
    assert {x["where"] for x in ledger.bad_rows} >= {f"arxiv-metadata-oai-snapshot.json:{a}"}

    rows, ledger = run(arxiv, {"source": str(path), "time_field": "update_date"})
    assert ledger.quarantined["bad_timestamp"] == 1 and ledger.read == 300
    assert next(x for x in ledger.bad_rows if x["reason"] == "bad_timestamp")["where"].endswith(f":{f}")

    with pytest.raises(DriftError, match=rf"arxiv-metadata-oai-snapshot\.json:{a}: malformed_json"):
        run(arxiv, {"source": str(path)}, strict=True)


def test_arxiv_blank_lines_are_not_rows(tmp_path):
    path = tmp_path / "snap.json"
    path.write_text(ARXIV.read_text().replace("\n", "\n\n", 3))
    rows, ledger = run(arxiv, {"source": str(path)})
    assert ledger.read == 300 and len(rows) == 201


def test_arxiv_errors(tmp_path):
    with pytest.raises(DriftError, match="time_field"):
        run(arxiv, {"source": str(ARXIV), "time_field": "published"})
    with pytest.raises(DriftError) as e:
        run(arxiv, {"source": str(tmp_path / "arxiv-metadata-oai-snapshot.json")})
    assert "\n" not in str(e.value) and "drift fetch arxiv" in str(e.value)


# -------------------------------------------------------------------------------------------- yearbook


def png_bytes(size=(32, 32), value=100, mode="L") -> bytes:
    import io

    buf = io.BytesIO()
    Image.new(mode, size, value).save(buf, format="PNG")
    return buf.getvalue()


def make_yearbook(root: Path) -> Path:
    """A tiny corpus in the real layout: 4 good portraits, a truncated PNG, a bad name, a stray file."""
    folder = root / "faces_aligned_small_mirrored_co_aligned_cropped_cleaned"
    (folder / "F").mkdir(parents=True)
    (folder / "M").mkdir()
    (folder / "F" / "1950_Ohio_Cleveland_Lincoln_3-4.png").write_bytes(png_bytes(value=10))
    (folder / "F" / "2013_Texas_Austin_High_1-1.png").write_bytes(png_bytes(size=(186, 171), value=200))
    (folder / "M" / "1905_Maine_Bangor_Bangor_0-1.png").write_bytes(png_bytes(value=50))
    # a gradient, to check the resize and the channel replication keep the pixels
    grad = Image.fromarray(np.tile(np.arange(0, 256, 4, dtype=np.uint8), (64, 1)))
    grad.save(folder / "M" / "1970_Iowa_Ames_Ames_2-2.png")
    (folder / "M" / "1980_Ohio_x.png").write_bytes(png_bytes(size=(64, 64))[:60])  # truncated
    (folder / "M" / "unknown_Ohio_x.png").write_bytes(png_bytes())  # no year
    (folder / "F" / "1960_notes.txt").write_bytes(b"hello")  # not a PNG
    return folder


def make_tar(folder: Path) -> Path:
    archive = folder.with_name(folder.name + ".tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return archive


def check_yearbook(rows, ledger):
    by_id = {r["id"]: r for r in rows}
    assert set(by_id) == {
        "1950_Ohio_Cleveland_Lincoln_3-4.png",
        "2013_Texas_Austin_High_1-1.png",
        "1905_Maine_Bangor_Bangor_0-1.png",
        "1970_Iowa_Ames_Ames_2-2.png",
    }
    assert ledger.quarantined == {"undecodable_image": 1, "bad_file_name": 2}
    assert ledger.read == 7  # every file accounted for
    for r in rows:
        assert r["image"].shape == (3, 32, 32) and r["image"].dtype == np.uint8
        assert r["image"].flags["C_CONTIGUOUS"]
        assert r["time"] == dt.datetime(int(r["id"].split("_")[0]), 1, 1)
    assert by_id["1950_Ohio_Cleveland_Lincoln_3-4.png"]["label"] == 0
    assert by_id["1905_Maine_Bangor_Bangor_0-1.png"]["label"] == 1
    assert (by_id["1950_Ohio_Cleveland_Lincoln_3-4.png"]["image"] == 10).all()
    assert (by_id["2013_Texas_Austin_High_1-1.png"]["image"] == 200).all()  # resized from 186x171
    g = by_id["1970_Iowa_Ames_Ames_2-2.png"]["image"]
    assert (g[0] == g[1]).all() and (g[1] == g[2]).all()
    assert g[0, 0, 0] < 10 and g[0, 0, -1] > 240 and (np.diff(g[0, 0].astype(int)) >= 0).all()


def test_yearbook_folder(tmp_path):
    folder = make_yearbook(tmp_path)
    rows, ledger = run(yearbook, {"source": str(folder)})
    check_yearbook(rows, ledger)
    where = {b["reason"]: b["where"] for b in ledger.bad_rows}
    assert where["undecodable_image"] == str(folder / "M" / "1980_Ohio_x.png")


def test_yearbook_tar_gz_streamed(tmp_path):
    archive = make_tar(make_yearbook(tmp_path / "src"))
    rows, ledger = run(yearbook, {"source": str(archive)})
    check_yearbook(rows, ledger)
    assert any(
        b["where"].endswith("M/1980_Ohio_x.png") and b["where"].startswith(archive.name)
        for b in ledger.bad_rows
    )
    # source = a folder that is not there, with its .tar.gz beside it (what `drift fetch yearbook` writes)
    folder = tmp_path / "src" / "faces_aligned_small_mirrored_co_aligned_cropped_cleaned"
    shutil.rmtree(folder)
    rows, ledger = run(yearbook, {"source": str(folder)})
    check_yearbook(rows, ledger)


def test_yearbook_strict_and_errors(tmp_path):
    folder = make_yearbook(tmp_path)
    with pytest.raises(DriftError, match=r"F/1960_notes\.txt: bad_file_name"):
        run(yearbook, {"source": str(folder)}, strict=True)
    with pytest.raises(DriftError) as e:
        run(yearbook, {"source": str(tmp_path / "missing")})
    assert "\n" not in str(e.value) and "drift fetch yearbook" in str(e.value)
    with pytest.raises(DriftError, match="no F/ or M/"):
        run(yearbook, {"source": str(folder / "F")})
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(gzip.compress(b"not a tar at all" * 100))
    with pytest.raises(DriftError, match="cannot read"):
        run(yearbook, {"source": str(bad)})


# ------------------------------------------------------------------------ the authors' reading of the corpora


def fast_records(module, cfg) -> tuple[list[dict], dict]:
    """The fast path's records (as the line-by-line reader yields them) and its filtered counts."""
    rows, filtered = [], {}
    for batch in module.read_batches(module.PARAMS.of(cfg)):
        if batch.records is None:  # a marker: a file starts (or ends damaged)
            continue
        rows += batch.records.to_pylist()
        for rule, n in batch.filtered.items():
            filtered[rule] = filtered.get(rule, 0) + n
    return rows, filtered


def test_arxiv_inclusion_all_keeps_papers_of_the_seven_only():
    """`inclusion: all` (the paper's Section 3.1.3): a paper with any category outside the seven is filtered,
    in both the line-by-line and the fast path; `separator` joins title and abstract."""
    raw = {r["id"]: r for r in map(json.loads, ARXIV.read_text().splitlines())}
    cfg = {"source": str(ARXIV), "inclusion": "all", "separator": "\n\n"}
    rows, ledger = run(arxiv, cfg)
    fast, filtered = fast_records(arxiv, cfg)
    anyone, _ = run(arxiv, {"source": str(ARXIV)})
    assert [r["id"] for r in fast] == [r["id"] for r in rows] and [r["text"] for r in fast] == [
        r["text"] for r in rows
    ]
    assert 0 < len(rows) < len(anyone)
    assert all(set(raw[r["id"]]["categories"].split()) <= set(LEAF) for r in rows)
    dropped = [i for i in {r["id"] for r in anyone} - {r["id"] for r in rows}]
    assert dropped and all(not set(raw[i]["categories"].split()) <= set(LEAF) for i in dropped)
    assert ledger.filtered["other_category"] == filtered["other_category"] == len(dropped)
    assert all("\n\n" in r["text"] for r in rows)


def test_amazon_text_fields_review_text_only():
    raw = [json.loads(line) for line in (AMAZON / "Software.jsonl").read_text().splitlines()]
    cfg = {"source": str(AMAZON), "categories": ["Software"], "text_fields": ["text"]}
    rows, _ = run(amazon, cfg)
    fast, _ = fast_records(amazon, cfg)
    by_id = {f"{r['user_id']}:{r['parent_asin']}:{r['timestamp']}": r for r in raw}
    assert rows and [r["text"] for r in fast] == [r["text"] for r in rows]
    assert all(r["text"] == by_id[r["id"]]["text"] for r in rows)
    both, _ = run(amazon, {"source": str(AMAZON), "categories": ["Software"]})
    assert all(r["text"] == f"{by_id[r['id']]['title']}\n{by_id[r['id']]['text']}" for r in both)


def test_yearbook_area_resize_is_the_block_mean():
    """`resize: area` shrinks a 64x64 portrait to the mean of each 2x2 block (cv2's INTER_AREA, the authors');
    bilinear with antialiasing gives other values."""
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (64, 64), dtype=np.uint8)
    buf = __import__("io").BytesIO()
    Image.fromarray(pixels, "L").save(buf, format="PNG")
    area = yearbook.decode(buf.getvalue(), "area")
    blocks = pixels.reshape(32, 2, 32, 2).astype(np.float64).mean(axis=(1, 3))
    assert area.shape == (3, 32, 32)
    assert np.abs(area[0].astype(np.float64) - blocks).max() <= 0.5 + 1e-9
    assert (area[0] == area[1]).all() and (area[0] == area[2]).all()
    assert not np.array_equal(yearbook.decode(buf.getvalue(), "bilinear"), area)
    # a real portrait's size (186 x 171): every output pixel a weighted mean of the pixels it covers, weights
    # 1
    w = yearbook.area_weights(171, 32)
    assert np.allclose(w.sum(1), 1) and np.allclose(w.sum(0), 32 / 171)
    flat = rng.integers(0, 256, (186, 171, 3), dtype=np.uint8)
    flat[:] = 77
    assert (yearbook.area_resize(flat) == 77).all()


def test_yearbook_pixels_default_is_uint8_and_float32_needs_area():
    """yearbook.pixels defaults to uint8 (the bytes before the knob: decode's output unchanged); float32 keeps
    only area means, so it refuses bilinear in one line naming the fix."""
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, (64, 48), dtype=np.uint8)
    buf = __import__("io").BytesIO()
    Image.fromarray(pixels, "L").save(buf, format="PNG")
    assert yearbook.YearbookParams().pixels == "uint8"
    for resize in ("bilinear", "area"):
        default = yearbook.decode(buf.getvalue(), resize)
        assert default.dtype == np.uint8 and np.array_equal(
            default, yearbook.decode(buf.getvalue(), resize, "uint8")
        )
    floats = yearbook.decode(buf.getvalue(), "area", "float32")
    rounded = yearbook.decode(buf.getvalue(), "area")
    assert floats.dtype == np.float32 and np.abs(floats - rounded).max() <= 0.5 + 1e-4
    assert (floats != rounded).mean() > 0.5  # the means a 1.5-pixel-wide area gives are rarely integers
    with pytest.raises(DriftError, match="yearbook.resize: area"):
        yearbook.YearbookParams(pixels="float32")

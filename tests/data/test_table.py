"""Tables of your own: every source format and shape through the table reader, `drift init`, multiclass, the
peers' summaries against hand computations, and `dvc repro` of a text and an image table end to end."""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from PIL import Image

from drift.core.errors import DriftError
from drift.core.params import load_params, parse
from drift.data.datasets import dataset_cfg
from drift.data.datasets.table import TableParams
from drift.data.ingest import ingest
from drift.protocol.metrics import macro_f1
from drift.protocol.peers import clear, protocol_summary, wild_time
from tests.helpers import drift_cli, run, tiny_params

YEARS = (2019, 2020, 2021)
WORDS = {
    "billing": "invoice refund charge payment card",
    "login": "password account locked reset sign",
    "shipping": "parcel delivery courier tracking late",
}


def ticket_rows(per_year: int = 60, seed: int = 0) -> list[dict]:
    """Support tickets: the category decides most words of the body (a real signal), three years."""
    rng = np.random.default_rng(seed)
    rows, classes = [], list(WORDS)
    for year in YEARS:
        for i in range(per_year):
            c = classes[(i + year) % 3]
            words = rng.choice(WORDS[c].split(), 6).tolist()
            words += rng.choice("the a my please help now".split(), 3).tolist()
            day = dt.datetime(year, 1 + i % 12, 1 + i % 28, 9, i % 60)
            rows.append(
                {
                    "ticket_id": f"T{year}-{i}",
                    "opened": day,
                    "subject": f"issue {year}-{i}",
                    "body": " ".join(rng.permutation(words)),
                    "category": c,
                }
            )
    return rows


def plant_bad(rows: list[dict]) -> list[dict]:
    """Five bad rows: a duplicate id, an unreadable time, no time, an empty input, a label outside the
    classes."""
    good = rows[0]
    return rows + [
        dict(good),
        {**good, "ticket_id": "B1", "opened": "not a time"},
        {**good, "ticket_id": "B2", "opened": None},
        {**good, "ticket_id": "B3", "subject": None, "body": None},
        {**good, "ticket_id": "B4", "category": "refunds??"},
    ]


BAD = {"duplicate_id": 1, "bad_time": 1, "missing_time": 1, "empty_input": 1, "label_not_in_classes": 1}


def encode_time(rows, encoding):
    out = []
    for r in rows:
        t = r["opened"]
        if isinstance(t, dt.datetime):
            t = {
                "timestamp": t.isoformat(),
                "date": t.strftime("%d.%m.%Y"),
                "year": t.year,
                "epoch_s": int(t.replace(tzinfo=dt.timezone.utc).timestamp()),
                "epoch_ms": int(t.replace(tzinfo=dt.timezone.utc).timestamp() * 1000),
            }[encoding]
        out.append({**r, "opened": t})
    return out


def write_csv_gz(path: Path, rows):
    with gzip.open(path, "wt", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def write_jsonl(path: Path, rows):
    path.write_text("".join(json.dumps(r, default=str) + "\n" for r in rows))


def write_parquet_parts(folder: Path, rows, parts: int = 3):
    folder.mkdir(parents=True)
    for k in range(parts):
        chunk = rows[k::parts]
        table = pa.table(
            {key: [str(r[key]) if r[key] is not None else None for r in chunk] for key in rows[0]}
        )
        pq.write_table(table, folder / f"part-{k:05d}.parquet")


def write_save_to_disk(folder: Path, table: pa.Table):
    """The layout `datasets.Dataset.save_to_disk` writes: Arrow IPC stream files, state.json,
    dataset_info.json."""
    folder.mkdir(parents=True)
    with (
        pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "wb") as sink,
        pa.ipc.new_stream(sink, table.schema) as w,
    ):
        w.write_table(table)
    (folder / "state.json").write_text(
        json.dumps(
            {
                "_data_files": [{"filename": "data-00000-of-00001.arrow"}],
                "_fingerprint": "0",
                "_format_type": None,
                "_split": None,
            }
        )
    )
    (folder / "dataset_info.json").write_text(json.dumps({"features": {}}))


def section(source, encoding="timestamp", **extra) -> dict:
    return {
        "kind": "table",
        "source": str(source),
        "id": "ticket_id",
        "time": "opened",
        "time_encoding": encoding,
        "text": ["subject", "body"],
        "label": "category",
        "task": "multiclass",
        "classes": list(WORDS),
        "slices": {"unit": "year", "start": 2019, "end": 2022},
        "min_samples": 10,
        **extra,
    }


def in_params(cfg: dict) -> dict:
    """A section as params.yaml writes it: its files are named once, in datasets.<name>.input."""
    return {k: v for k, v in cfg.items() if k != "source"}


def run_ingest(tmp_path, cfg: dict, fast: bool = True) -> tuple[dict, pa.Table, pa.Table]:
    counts = ingest(
        "tickets",
        parse(TableParams, cfg, "tickets"),
        tmp_path / "r.parquet",
        tmp_path / "q.parquet",
        fast=fast,
    )
    return counts, pq.read_table(tmp_path / "r.parquet"), pq.read_table(tmp_path / "q.parquet")


@pytest.mark.parametrize(
    "encoding, fmt",
    [
        ("timestamp", "csv.gz"),
        ("date", "jsonl"),
        ("year", "parquet-parts"),
        ("epoch_s", "jsonl"),
        ("epoch_ms", "csv.gz"),
    ],
)
def test_every_format_and_time_encoding_accounts_for_every_row(tmp_path, encoding, fmt):
    rows = encode_time(plant_bad(ticket_rows(20)), encoding)
    source = {
        "csv.gz": tmp_path / "t.csv.gz",
        "jsonl": tmp_path / "t.jsonl",
        "parquet-parts": tmp_path / "parts",
    }[fmt]
    {"csv.gz": write_csv_gz, "jsonl": write_jsonl, "parquet-parts": write_parquet_parts}[fmt](source, rows)
    extra = {"time_format": "%d.%m.%Y"} if encoding == "date" else {}
    for fast in (True, False):
        counts, records, bad = run_ingest(tmp_path, section(source, encoding, **extra), fast)
        assert counts["read"] == len(rows) == counts["kept"] + counts["filtered"] + counts["quarantined"]
        assert counts["quarantined_by_reason"] == BAD and counts["kept"] == 60
        assert sorted(set(records["label"].to_pylist())) == [0, 1, 2]
        assert records["text"][0].as_py() == "issue 2019-0\n" + rows[0]["body"]  # joined in the stated order
        assert sorted(bad["reason"].to_pylist()) == sorted(BAD)
    first = records["time"][0].as_py()
    assert first.year == 2019 and (encoding in ("year", "date") or first == ticket_rows(20)[0]["opened"])
    assert json.loads(records.schema.metadata[b"label_names"]) == list(WORDS)


def test_a_save_to_disk_folder_and_a_glob(tmp_path):
    rows = ticket_rows(20)
    table = pa.table(
        {
            "ticket_id": [r["ticket_id"] for r in rows],
            "opened": [r["opened"] for r in rows],
            "subject": [r["subject"] for r in rows],
            "body": [r["body"] for r in rows],
            "category": [r["category"] for r in rows],
        }
    )
    write_save_to_disk(tmp_path / "hf", table)
    counts, records, _ = run_ingest(tmp_path, section(tmp_path / "hf"))
    assert counts["kept"] == 60 and counts["quarantined"] == 0
    assert records["time"].to_pylist() == [r["opened"] for r in rows]  # native timestamps kept as they are
    write_parquet_parts(tmp_path / "parts", rows)
    counts, _, _ = run_ingest(tmp_path, section(str(tmp_path / "parts" / "part-0000[01].parquet")))
    assert counts["read"] == 40  # two of the three parts


def test_strict_stops_at_the_first_bad_row(tmp_path):
    write_jsonl(tmp_path / "t.jsonl", encode_time(plant_bad(ticket_rows(5)), "timestamp"))
    with pytest.raises(DriftError, match=r"bad input at T2019-0: duplicate_id"):
        run_ingest(tmp_path, {**section(tmp_path / "t.jsonl"), "strict": True})
    assert not (tmp_path / "r.parquet").exists()


def test_binary_regression_and_multilabel_labels(tmp_path):
    rows = [
        {
            "when": 2019 + i % 3,
            "text": f"row {i} text",
            "y": "yes" if i % 2 else "no",
            "score": i / 10,
            "a": i % 2,
            "b": 1 - i % 2,
        }
        for i in range(30)
    ]
    rows.append({"when": 2020, "text": "x", "y": None, "score": "NaNx", "a": 3, "b": 1})
    write_jsonl(tmp_path / "t.jsonl", rows)
    base = {
        "source": str(tmp_path / "t.jsonl"),
        "time": "when",
        "time_encoding": "year",
        "text": "text",
        "slices": {"unit": "year", "start": 2019, "end": 2022},
    }
    for task, label, reason, label_of_first in [
        ("binary", "y", "missing_label", 0),
        ("regression", "score", "bad_label", 0.0),
        ("multilabel", ["a", "b"], "bad_label", [0, 1]),
    ]:
        counts, records, _ = run_ingest(tmp_path, {**base, "task": task, "label": label})
        assert counts["kept"] == 30 and counts["quarantined_by_reason"] == {reason: 1}, task
        assert records["label"][0].as_py() == label_of_first
    assert json.loads(records.schema.metadata[b"label_names"]) == ["a", "b"]


def png(color) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), color).save(buffer, "PNG")
    return buffer.getvalue()


def image_rows(per_year=40, seed=0):
    """Red-ish (1) or blue-ish (0) pictures: the colour is the label, a real signal."""
    rng = np.random.default_rng(seed)
    rows = []
    for year in (2000, 2001, 2002):
        for i in range(per_year):
            y = int(rng.integers(0, 2))
            base = np.array([200, 40, 40] if y else [40, 40, 200]) + rng.integers(-30, 30, 3)
            rows.append({"id": f"{year}-{i}", "year": year, "label": y, "color": tuple(int(c) for c in base)})
    return rows


@pytest.mark.parametrize("encoding", ["bytes", "path", "array"])
def test_image_tables(tmp_path, encoding):
    rows = image_rows(5)
    (tmp_path / "img").mkdir()
    cells = []
    for r in rows:
        if encoding == "bytes":
            cells.append(png(r["color"]))
        elif encoding == "path":
            Image.new("RGB", (32, 32), r["color"]).save(tmp_path / "img" / f"{r['id']}.png")
            cells.append(f"img/{r['id']}.png")
        else:
            cells.append(np.full((32, 32, 3), r["color"], np.uint8).tolist())
    cells[1] = (
        b"not an image" if encoding == "bytes" else "img/missing.png" if encoding == "path" else [[[1, 2]]]
    )
    table = pa.table(
        {
            "id": [r["id"] for r in rows],
            "year": [r["year"] for r in rows],
            "label": [r["label"] for r in rows],
            "pixels": cells,
        }
    )
    pq.write_table(table, tmp_path / "images.parquet")
    cfg = {
        "source": str(tmp_path / "images.parquet"),
        "id": "id",
        "time": "year",
        "time_encoding": "year",
        "image": "pixels",
        "image_encoding": encoding,
        "label": "label",
        "task": "binary",
        "slices": {"unit": "year", "start": 2000, "end": 2003},
    }
    counts, records, _ = run_ingest(tmp_path, cfg)
    assert counts["kept"] == 14 and counts["quarantined_by_reason"] == {"unreadable_image": 1}
    pixels = np.asarray(records["image"][0].as_py(), np.uint8).reshape(3, 32, 32)
    assert np.abs(pixels[:, 10, 10].astype(int) - rows[0]["color"]).max() <= 1


def test_configured_dataset_in_params():
    params = tiny_params()
    params["datasets"]["tickets"] = {"input": "t.csv"}
    params["tickets"] = in_params(section("t.csv"))
    params["train"]["models"]["tickets"] = ["ffn-s"]
    typed = load_params(params)
    assert typed.info("tickets").task == "multiclass" and typed.info("tickets").modality == "text"
    assert (
        dataset_cfg(typed, "tickets").classes == list(WORDS)
        and dataset_cfg(typed, "tickets").source == "t.csv"
    )
    params["tickets"]["tim"] = "x"
    with pytest.raises(DriftError, match=r"^unknown parameter tickets\.tim: did you mean tickets\.time\b"):
        dataset_cfg(load_params(params), "tickets")
    del params["tickets"]["tim"]
    params["tickets"]["files"] = "*.csv"  # a glob of the input folder's files
    params["datasets"]["tickets"] = {"input": "data/raw"}
    assert dataset_cfg(load_params(params), "tickets").source == "data/raw/*.csv"
    params["datasets"]["other"] = {"input": "t.csv"}  # a name with no table section: unknown
    with pytest.raises(DriftError, match=r"unknown parameter datasets\.other"):
        load_params(params)
    params["other"] = in_params(section("t.csv"))
    params["other"]["source"] = "t.csv"  # its files named twice: an earlier form
    with pytest.raises(
        DriftError, match=r"`other\.source` is an earlier form: .* `datasets\.other: \{input: t\.csv\}`"
    ):
        load_params(params)


def test_drift_init_asks_when_ambiguous_and_writes_the_section(tmp_path):
    rows = ticket_rows(20)
    rows = [{**r, "closed": r["opened"] + dt.timedelta(days=2)} for r in rows]
    write_jsonl(tmp_path / "t.jsonl", rows)
    (tmp_path / "params.yaml").write_text("# my comment\n" + yaml.safe_dump(tiny_params(), sort_keys=False))
    asked = drift_cli(
        "init", "tickets", tmp_path / "t.jsonl", "--params", tmp_path / "params.yaml", cwd=tmp_path
    )
    assert asked.returncode == 2 and "which column is the time: opened, closed?" in asked.stderr
    assert "tickets" not in (tmp_path / "params.yaml").read_text()  # nothing written on a question
    done = drift_cli(
        "init",
        "tickets",
        tmp_path / "t.jsonl",
        "--time",
        "opened",
        "--params",
        tmp_path / "params.yaml",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "dvc repro" in done.stdout
    written = yaml.safe_load((tmp_path / "params.yaml").read_text())
    assert (tmp_path / "params.yaml").read_text().startswith("# my comment")
    sec = written["tickets"]
    chosen = (sec["time"], sec["label"], sec["task"], sec["text"])
    assert chosen == ("opened", "category", "multiclass", ["subject", "body"])
    assert sec["classes"] == sorted(WORDS) and sec["id"] == "ticket_id"
    assert sec["slices"] == {"unit": "year", "start": 2019, "end": 2022}
    assert written["datasets"]["tickets"] == {"input": str(tmp_path / "t.jsonl")} and "source" not in sec


# ---------------------------------------------------------------- the peers' summaries, by hand

M = np.array([[0.9, 0.7, 0.5, 0.4], [0.8, 0.92, 0.6, 0.5], [0.7, 0.8, 0.95, 0.7], [0.6, 0.7, 0.85, 0.9]])


def test_wild_time_and_clear_against_a_hand_computation():
    w = wild_time(M, higher_is_better=True)
    assert w["eval_fix_split"] == 1  # (4 - 1) // 2: trained through the second period
    assert w["eval_fix_average"] == pytest.approx((0.6 + 0.5) / 2) and w["eval_fix_worst"] == pytest.approx(
        0.5
    )
    assert w["eval_stream_average"] == pytest.approx((0.7 + 0.6 + 0.7) / 3) and w["eval_stream_worst"] == 0.6
    c = clear(M)
    assert c["in_domain"] == pytest.approx((0.9 + 0.92 + 0.95 + 0.9) / 4)
    assert c["next_domain"] == pytest.approx((0.7 + 0.6 + 0.7) / 3)
    assert c["backward_transfer"] == pytest.approx((0.8 + 0.7 + 0.8 + 0.6 + 0.7 + 0.85) / 6)
    assert c["forward_transfer"] == pytest.approx((0.7 + 0.5 + 0.4 + 0.6 + 0.5 + 0.7) / 6)
    lower = wild_time(M, higher_is_better=False)
    assert lower["eval_fix_worst"] == pytest.approx(0.6) and lower["eval_stream_worst"] == pytest.approx(0.7)
    holes = M.copy()
    holes[2, :] = holes[:, 2] = np.nan  # an unusable period: the next scored one follows period 1
    assert clear(holes)["next_domain"] == pytest.approx((0.7 + 0.5) / 2)
    # the split period named by its slice label, counted over the scored periods only
    assert wild_time(M, True, labels=["2000", "2001", "2002", "2003"])["eval_fix_split_label"] == "2001"
    empty_first = np.full((5, 5), np.nan)
    empty_first[1:, 1:] = M
    assert (
        wild_time(empty_first, True, labels=["1999", "2000", "2001", "2002", "2003"])["eval_fix_split_label"]
        == "2001"
    )
    assert protocol_summary(M, True)["id"] == pytest.approx(c["in_domain"])


def test_macro_f1_by_hand():
    y = np.array([0, 0, 1, 1, 2, 2])
    pred = np.eye(3)[[0, 1, 1, 1, 2, 0]]
    # class 0: tp 1 fp 1 fn 1 -> 0.5; class 1: tp 2 fp 1 fn 0 -> 0.8; class 2: tp 1 fp 0 fn 1 -> 2/3
    assert macro_f1(y, pred) == pytest.approx((0.5 + 0.8 + 2 / 3) / 3)


# ---------------------------------------------------------------- end to end with dvc repro


@pytest.mark.compute
@pytest.mark.pipeline
def test_dvc_repro_runs_a_multiclass_text_table_and_an_image_table(project):
    params = tiny_params()
    params["datasets"] = {"tickets": {"input": "data/tickets.csv.gz"}, "swatches": {"input": "data/swatches"}}
    params["tickets"] = in_params(section("data/tickets.csv.gz"))
    params["swatches"] = {
        "kind": "table",
        "id": "id",
        "time": "year",
        "time_encoding": "year",
        "image": "png",
        "label": "label",
        "task": "binary",
        "slices": {"unit": "year", "start": 2000, "end": 2003},
        "min_samples": 10,
    }
    params["train"].update(epochs=2, models={"tickets": ["ffn-s"], "swatches": ["mlp-s"]})
    params["report"]["saliency"] = {}
    # baseline-tfidf: read by no assertion here
    params["train"]["baselines"] = ["baseline-prior", "baseline-linear"]
    repo = project(params)
    (repo / "data").mkdir()
    write_csv_gz(repo / "data/tickets.csv.gz", encode_time(plant_bad(ticket_rows()), "timestamp"))
    rows = image_rows()
    write_save_to_disk(
        repo / "data/swatches",
        pa.table(
            {
                "id": [r["id"] for r in rows],
                "year": [r["year"] for r in rows],
                "label": [r["label"] for r in rows],
                "png": pa.array(
                    [{"bytes": png(r["color"]), "path": None} for r in rows],
                    pa.struct([("bytes", pa.binary()), ("path", pa.string())]),
                ),
            }
        ),
    )
    run(["dvc", "repro"], repo)
    ingest_counts = json.loads((repo / "metrics/ingest/tickets.json").read_text())
    assert ingest_counts["quarantined_by_reason"] == BAD and ingest_counts["kept"] == 180
    for name, head in (("tickets", "ffn-s"), ("swatches", "mlp-s")):
        metrics = {p.stem: json.loads(p.read_text()) for p in (repo / "metrics" / name).glob("*.json")}
        assert metrics[head]["metric"] == "accuracy"
        assert metrics[head]["id"] > metrics["baseline-prior"]["id"] + 0.2, (name, metrics[head]["id"])
        assert set(metrics[head]["protocols"]) == {"wild-time", "clear"}
        assert "Other protocols" in (repo / "reports" / f"{name}.html").read_text()
    assert metrics_of(repo, "tickets")["also"]["macro_f1"]["id"] > 0.5
    evaluation = json.loads((repo / "data/eval/tickets/ffn-s.json").read_text())
    assert set(evaluation["estimated"]) == {"atc", "doc"}
    for protocol, column in (("wild-time", "Eval-Fix"), ("clear", "in-domain")):
        shown = drift_cli("summary", "tickets", "--protocol", protocol, cwd=repo)
        assert shown.returncode == 0 and column in shown.stdout, shown.stdout + shown.stderr
    assert "Decay" in drift_cli("summary", "tickets", cwd=repo).stdout


def metrics_of(repo: Path, name: str) -> dict:
    return json.loads((repo / "metrics" / name / "ffn-s.json").read_text())


def test_an_empty_time_is_missing_and_every_quarantined_row_keeps_its_raw_value(tmp_path):
    rows = ticket_rows(5)
    rows = rows + [
        {**rows[0], "ticket_id": "E1", "opened": ""},
        {**rows[0], "ticket_id": "E2", "opened": "  "},
        dict(rows[1]),
    ]
    write_csv_gz(
        tmp_path / "t.csv.gz",
        [
            {**r, "opened": r["opened"] if isinstance(r["opened"], str) else r["opened"].isoformat()}
            for r in rows
        ],
    )
    counts, records, bad = run_ingest(tmp_path, section(tmp_path / "t.csv.gz"))
    assert counts["quarantined_by_reason"] == {"missing_time": 2, "duplicate_id": 1}
    assert all(raw for raw in bad["raw"].to_pylist()), bad.to_pylist()  # the duplicate too
    times = sorted(records["time"].to_pylist())
    assert counts["data_span"] == [str(times[0]), str(times[-1])] and counts["span"] == [
        "2019-01-01",
        "2022-01-01",
    ]


def test_drift_init_takes_ids_by_uniqueness_never_a_hash_as_text_and_asks_between_two_ids(tmp_path):
    import hashlib

    day = dt.date(2018, 1, 1)
    rows = [
        {
            "sha": hashlib.sha1(str(i).encode()).hexdigest(),
            "date": str(day + dt.timedelta(days=5 * i)),
            "subject": f"{['fix', 'feat', 'docs'][i % 3]}: change {i} in the parser module",
            "kind": ["fix", "feat", "docs"][i % 3],
        }
        for i in range(300)
    ]
    write_jsonl(tmp_path / "c.jsonl", rows)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(tiny_params(), sort_keys=False))
    done = drift_cli(
        "init",
        "commits",
        tmp_path / "c.jsonl",
        "--label",
        "kind",
        "--slices",
        "half-year",
        "--params",
        params,
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    section = yaml.safe_load(params.read_text())["commits"]
    assert section["text"] == ["subject"] and section["id"] == "sha"  # the hash: the id, never the text
    assert section["slices"] == {"unit": "half-year", "start": 2018, "end": 2023}
    # two unique key-like columns: a question naming both, exit 2, nothing written
    write_jsonl(tmp_path / "d.jsonl", [{**r, "url": f"https://example.org/c/{r['sha']}"} for r in rows])
    before = params.read_text()
    asked = drift_cli(
        "init", "more", tmp_path / "d.jsonl", "--label", "kind", "--params", params, cwd=tmp_path
    )
    assert asked.returncode == 2 and "which column is the id: sha, url?" in asked.stderr, asked.stderr
    assert params.read_text() == before
    named = drift_cli(
        "init",
        "more",
        tmp_path / "d.jsonl",
        "--label",
        "kind",
        "--id",
        "url",
        "--slices",
        "decade:2010:2030",
        "--params",
        params,
        cwd=tmp_path,
    )
    assert named.returncode == 0, named.stderr
    more = yaml.safe_load(params.read_text())["more"]
    assert more["id"] == "url" and more["text"] == ["subject"] and more["slices"]["unit"] == "decade"
    bad = drift_cli(
        "init",
        "other",
        tmp_path / "d.jsonl",
        "--label",
        "kind",
        "--id",
        "none",
        "--slices",
        "weeks",
        "--params",
        params,
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and "unknown slice unit 'weeks'" in bad.stderr, bad.stderr

"""`drift cache`, `drift cache compact`, `drift cache gc`: --json on each (only JSON on stdout), and the table
of `drift cache` on an 80-column terminal with no cell cut. A tiny real Lance store, no encoder."""

from __future__ import annotations

import json
import os
import time
from collections import Counter

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from drift.cli.cache import _size, cache_app, cache_table
from drift.store.embeddings import EmbeddingStore, table_info

LIST_KEYS = {
    "table",
    "path",
    "encoder",
    "fingerprint",
    "fingerprint_fields",
    "committed",
    "rows",
    "unique",
    "dim",
    "tokens",
    "fragments",
    "version",
    "bytes",
    "updated",
    "datasets",
}
COMPACT_KEYS = {
    "table",
    "duplicates_removed",
    "fragments_before",
    "fragments_after",
    "bytes_before",
    "bytes_after",
    "skipped",
}


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A repository whose manifest uses one table (`used`, 2 fragments, 1 duplicate key), one table no
    manifest uses (`unused`, written an hour ago), and one a killed first write left incomplete."""
    cache, repo = tmp_path / "cache", tmp_path / "repo"
    (repo / "data/embeddings").mkdir(parents=True)
    used = EmbeddingStore(cache, "minilm-l6", "a" * 64, dim=4, with_tokens=False)
    used.append(["k0", "k1"], np.zeros((2, 4), np.float32))
    used.append(["k1", "k2"], np.ones((2, 4), np.float32))
    unused = EmbeddingStore(cache, "vit-s16-in21k", "b" * 64, dim=8, with_tokens=False)
    unused.append(["k0"], np.zeros((1, 8), np.float32))
    hour_ago = time.time() - 3600
    for f in unused.path.rglob("*"):
        os.utime(f, (hour_ago, hour_ago))
    incomplete = cache / "modernbert-cccccccccccccccc.lance"
    (incomplete / "data").mkdir(parents=True)
    (incomplete / "data" / "part.lance").write_bytes(b"\0" * 100)
    for dataset in ("sotu", "synth-portraits"):
        (repo / f"data/embeddings/{dataset}.json").write_text(
            json.dumps({"encoders": {"minilm-l6": {"store": used.path.name}}})
        )
    monkeypatch.chdir(repo)
    return {"cache": cache, "used": used.path, "unused": unused.path, "incomplete": incomplete}


def invoke(args, columns=80):
    result = CliRunner().invoke(cache_app, args, env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result


def as_json(args) -> object:
    result = invoke(args)
    return json.loads(result.stdout)  # nothing but the JSON document on stdout


def test_list_json_is_one_object_per_table(store):
    cache = str(store["cache"])
    tables = as_json(["list", "--json", "--cache-dir", cache])
    assert as_json(["--json", "--cache-dir", cache]) == tables  # bare `drift cache --json`
    assert isinstance(tables, list) and [t["table"] for t in tables] == sorted(t["table"] for t in tables)
    assert all(set(t) == LIST_KEYS for t in tables)
    by_name = {t["table"]: t for t in tables}
    used = by_name[store["used"].name]
    assert (
        used["encoder"],
        used["fingerprint"],
        used["rows"],
        used["unique"],
        used["dim"],
        used["fragments"],
        used["committed"],
        used["datasets"],
    ) == ("minilm-l6", "a" * 64, 4, 3, 4, 2, True, ["sotu", "synth-portraits"])
    assert isinstance(used["bytes"], int) and used["bytes"] > 0 and isinstance(used["version"], int)
    assert by_name[store["unused"].name]["datasets"] == []
    incomplete = by_name[store["incomplete"].name]
    assert incomplete["committed"] is False and incomplete["rows"] == 0 and incomplete["bytes"] == 100
    assert as_json(["list", "--json", "--cache-dir", str(store["cache"] / "none")]) == []


def test_compact_json(store):
    report = as_json(["compact", "--json", "--cache-dir", str(store["cache"])])
    assert set(report) == {"cache_dir", "tables"} and report["cache_dir"] == str(store["cache"])
    by_name = {t["table"]: t for t in report["tables"]}
    assert set(by_name) == {store["used"].name, store["unused"].name, store["incomplete"].name}
    assert by_name[store["incomplete"].name] == {"table": store["incomplete"].name, "skipped": "incomplete"}
    used = by_name[store["used"].name]
    assert set(used) == COMPACT_KEYS and used["skipped"] is None
    assert (used["duplicates_removed"], used["fragments_before"], used["fragments_after"]) == (1, 2, 1)
    assert table_info(store["used"])["rows"] == 3
    # one table by name, group-level --json
    one = as_json(["--json", "compact", store["unused"].stem, "--cache-dir", str(store["cache"])])
    assert [t["table"] for t in one["tables"]] == [store["unused"].name]


def test_gc_json_dry_run_then_for_real(store):
    cache = str(store["cache"])
    dry = as_json(["gc", "--dry-run", "--json", "--cache-dir", cache])
    assert set(dry) == {
        "cache_dir",
        "dry_run",
        "deleted",
        "freed_bytes",
        "kept_recent",
        "in_use",
        "checkpoints",
    }
    assert dry["dry_run"] is True and dry["in_use"] == [store["used"].name]
    assert [d["table"] for d in dry["deleted"]] == [store["unused"].name]  # an hour old, unused
    assert [k["table"] for k in dry["kept_recent"]] == [store["incomplete"].name]  # just written
    assert (
        set(dry["kept_recent"][0]) == {"table", "bytes", "age_minutes"}
        and dry["kept_recent"][0]["bytes"] == 100
    )
    assert dry["freed_bytes"] == dry["deleted"][0]["bytes"] > 0 and store["unused"].exists()

    done = as_json(["gc", "--json", "--grace-minutes", "0", "--cache-dir", cache])
    assert done["dry_run"] is False
    assert {d["table"] for d in done["deleted"]} == {store["unused"].name, store["incomplete"].name}
    assert done["kept_recent"] == [] and done["freed_bytes"] == sum(d["bytes"] for d in done["deleted"])
    assert not store["unused"].exists() and not store["incomplete"].exists() and store["used"].exists()


def test_errors_stay_off_stdout_with_json(store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no data/embeddings here: gc refuses
    for args in (
        ["gc", "--json", "--cache-dir", str(store["cache"])],
        ["compact", "nope", "--json", "--cache-dir", str(store["cache"])],
    ):
        result = CliRunner().invoke(cache_app, args)
        assert result.exit_code == 2 and result.stdout == "" and "error:" in result.stderr


# ---------------------------------------------------------------- 80 columns


def table_rows(text: str) -> list[str]:
    """The body lines of the rendered table (after the header rule)."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if set(line.strip()) <= {"─", "━"} and line.strip())
    return lines[rule - 1 : rule] + lines[rule + 1 :]


HEADER = ["encoder", "fingerprint", "rows", "dim", "size", "frags", "datasets"]


def assert_fits(table_text: str, width: int, cells: list[str]):
    """Every line fits, nothing ends in an ellipsis, and not one character of the header or of any cell is
    lost: a cell may fold onto more lines, never be cut."""
    assert "…" not in table_text and "..." not in table_text
    assert max(len(line) for line in table_text.splitlines()) <= width
    shown = Counter(c for c in table_text if not c.isspace() and c not in "─━")
    assert shown == Counter(c for c in "".join(HEADER + cells) if not c.isspace()), table_text


def test_drift_cache_fits_80_columns(store):
    result = invoke(["--cache-dir", str(store["cache"])], columns=80)  # bare `drift cache`
    lines = result.stdout.splitlines()
    assert lines[0].startswith("embedding store ")
    table_text = "\n".join(lines[next(i for i, line in enumerate(lines) if line.split() == HEADER) :])
    header, *body = table_rows(table_text)
    assert header.split() == HEADER  # not one header folded
    sizes = {name: _size(table_info(store[name])["bytes"]) for name in ("used", "unused", "incomplete")}
    assert_fits(
        table_text,
        80,
        [
            "minilm-l6",
            "aaaaaaaa",
            "4",
            "+1 dup",
            "4",
            sizes["used"],
            "2",
            "sotu, synth-portraits",
            "modernbert",
            "cccccccc",
            "—",
            "—",
            sizes["incomplete"],
            "—",
            "incomplete (killed first write): `drift cache gc` removes it",
            "vit-s16-in21k",
            "bbbbbbbb",
            "1",
            "8",
            sizes["unused"],
            "1",
            "—",
        ],
    )
    # every row's last column is there: each table row's first line has its datasets cell under the header
    column = header.index("datasets")
    starts = [line for line in body if line[:1].strip()]
    # sorted by table
    cells = ["sotu, synth-portraits", "incomplete (killed first write): `drift cache gc` removes it", "—"]
    assert len(starts) == 3
    for line, cell in zip(starts, cells):
        assert line[column:].strip() and cell.startswith(line[column:].strip()), (line, cell)


def test_worst_case_rows_fold_and_are_never_cut():
    rows = [
        {
            "encoder": "vit-s16-in21k",
            "fingerprint": "f" * 64,
            "committed": True,
            "rows": 12_345_678,
            "unique": 12_340_000,
            "dim": 1024,
            "bytes": 12_345_678_901,
            "fragments": 12345,
            "datasets": ["synth-portraits", "yearbook", "amazon", "arxiv", "sotu"],
        },
        {
            "encoder": "modernbert",
            "fingerprint": "c" * 16,
            "committed": False,
            "rows": 0,
            "unique": 0,
            "dim": None,
            "bytes": 1000,
            "fragments": 0,
            "datasets": [],
        },
    ]
    cells = [
        "vit-s16-in21k",
        "ffffffff",
        "12,345,678",
        "+5,678 dup",
        "1024",
        "11.5 GiB",
        "12345",
        "synth-portraits, yearbook, amazon, arxiv, sotu",
        "modernbert",
        "cccccccc",
        "—",
        "—",
        "1000 B",
        "—",
        "incomplete (killed first write): `drift cache gc` removes it",
    ]
    for width in (80, 60, 40):
        console = Console(width=width, record=True, file=open(os.devnull, "w"))
        console.print(cache_table(rows))
        text = console.export_text()
        assert_fits(text, width, cells)
        if width == 80:
            assert table_rows(text)[0].split() == HEADER  # not one header folded at 80

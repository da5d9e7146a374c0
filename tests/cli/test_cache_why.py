"""`drift cache why`: the real MiniLM embeds a few rows at max_length 64; the same params find the table ("in
the store"), max_length 128 names the nearest table and `max_length 64 → 128`, a library's version shows as a
flattened field; the embed stage says the same in its progress when a new table computes rows the old one
holds."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
import yaml
from typer.testing import CliRunner

from drift.cli.cache import cache_app
from drift.core.params import EmbedParams
from drift.data.records import payload_key
from drift.encoders.embed import embed_dataset
from drift.store.slices import hand_manifest, write_slice_table

TEXTS = [
    "The state of the Union is strong.",
    "We must balance the budget and reduce the debt.",
    "Our farmers feed the nation and the world.",
    "Peace abroad begins with prosperity at home.",
    "The railroads now reach every corner of the land.",
]
EMBED = {"text_encoder": "minilm-l6", "max_length": 64, "batch_size": 16, "chunk_rows": 32}


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A workspace whose params.yaml runs sotu and keeps its store in tmp_path/cache (every other setting its
    default), and the sotu slice table of TEXTS; `write(max_length)` rewrites the params' embed.max_length."""
    cache, root = tmp_path / "cache", tmp_path / "repo"
    root.mkdir()

    def write(max_length: int) -> None:
        params = {
            "datasets": {"sotu": {"input": "data/raw/sotu"}},
            "embed": {"cache_dir": str(cache), "max_length": max_length},
        }
        (root / "params.yaml").write_text(yaml.safe_dump(params))

    write(64)
    slices = tmp_path / "sotu.lance"
    n = len(TEXTS)
    write_slice_table(
        pa.table(
            {
                "id": [str(i) for i in range(n)],
                "key": [payload_key(t) for t in TEXTS],
                "slice": pa.array([0] * n, pa.int32()),
                "split": ["train"] * n,
                "label": [i % 2 for i in range(n)],
                "text": TEXTS,
            }
        ),
        slices,
        hand_manifest("sotu"),
    )
    monkeypatch.chdir(root)
    return {"cache": cache, "slices": slices, "write": write}


def why(*args: str, code: int = 0):
    result = CliRunner().invoke(cache_app, ["why", *args], env={"COLUMNS": "200"})
    assert result.exit_code == code, result.output
    return result


@pytest.mark.compute
def test_unchanged_params_find_the_table_and_a_new_length_names_the_field(repo, capsys):
    embed_dataset(repo["slices"], EmbedParams(**EMBED), repo["cache"])
    found = why("sotu").stdout
    assert "sotu with minilm-l6: in the store (5 rows)" in found
    report = json.loads(why("sotu", "minilm-l6", "--json").stdout)
    (entry,) = report["encoders"]
    assert (entry["in_store"], entry["rows"], entry["nearest"]) == (True, 5, None)
    old_table = entry["table"]

    repo["write"](128)
    said = why("sotu").stdout
    assert "not in the store" in said and f"the nearest table, {old_table} (5 rows), differs in" in said
    assert "  max_length 64 → 128" in said.splitlines()
    (entry,) = json.loads(why("sotu", "--json").stdout)["encoders"]
    assert entry["in_store"] is False and entry["table"] != old_table
    assert entry["nearest"] == {
        "table": old_table,
        "rows": 5,
        "changes": [{"field": "max_length", "old": 64, "new": 128}],
    }

    # the embed stage computes the rows anew under the new key, and says why once
    capsys.readouterr()
    _, run = embed_dataset(repo["slices"], EmbedParams(**{**EMBED, "max_length": 128}), repo["cache"])
    assert run.computed == 5
    assert (
        "embed sotu with minilm-l6: a table under another key holds 5 of these 5 rows (max_length 64 → 128): "
        "computing anew"
    ) in capsys.readouterr().err
    assert "sotu with minilm-l6: in the store (5 rows)" in why("sotu").stdout
    _, run = embed_dataset(repo["slices"], EmbedParams(**{**EMBED, "max_length": 128}), repo["cache"])
    assert run.computed == 0 and "another key" not in capsys.readouterr().err


@pytest.mark.compute
def test_a_library_version_is_a_flattened_field(repo, monkeypatch):
    import drift.core.environment as environment

    embed_dataset(repo["slices"], EmbedParams(**EMBED), repo["cache"])
    real = environment.package_version
    monkeypatch.setattr(environment, "package_version", lambda d: "99.0" if d == "torch" else real(d))
    lines = why("sotu").stdout.splitlines()
    assert f"  libraries.torch {real('torch')} → 99.0" in lines
    code = [line for line in lines if line.startswith("  code_sha256 ")]
    assert len(code) == 1 and code[0].count("…") == 2  # the digests, cut to their first characters
    # a library that computes nothing is no field of the key
    monkeypatch.setattr(
        environment, "package_version", lambda d: "99.0" if d in ("click", "tqdm") else real(d)
    )
    assert "in the store (5 rows)" in why("sotu").stdout


def test_an_empty_store_and_an_unknown_encoder(repo):
    assert (
        "not in the store" in why("sotu").stdout and "no table there records its fields" in why("sotu").stdout
    )
    said = why("sotu", "minilm", code=2).output
    assert "runs no encoder 'minilm'" in said and "minilm-l6" in said and len(said.strip().splitlines()) == 1

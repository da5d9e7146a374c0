"""The embedding store and the text encoder: real Lance tables, the real MiniLM weights."""

from __future__ import annotations

import numpy as np
import pytest

from drift.core.errors import DriftError
from drift.core.params import EmbedParams
from drift.store.embeddings import EmbeddingStore


def test_append_and_read_back_bit_for_bit(tmp_path):
    rng = np.random.default_rng(0)
    store = EmbeddingStore(tmp_path, "enc", "f" * 64, dim=8, with_tokens=True)
    keys = [f"k{i}" for i in range(5)]
    pooled = rng.standard_normal((5, 8)).astype(np.float32)
    tokens = [rng.standard_normal((n, 8)).astype(np.float16) for n in (3, 1, 7, 2, 4)]
    store.append(keys[:2], pooled[:2], tokens[:2])
    store.append(keys[2:], pooled[2:], tokens[2:])
    assert store.missing(["k4", "k9", "k0", "k9"]) == ["k9"]
    order = ["k3", "k0", "k4", "k0"]
    idx = [3, 0, 4, 0]
    np.testing.assert_array_equal(store.read_pooled(order), pooled[idx])
    flat, offsets = store.read_tokens(order)
    assert offsets.tolist() == [0, 2, 5, 9, 12]
    for i, j in enumerate(idx):
        assert flat[offsets[i] : offsets[i + 1]].tobytes() == tokens[j].tobytes()  # float16, bit for bit
    assert store.stats()["rows"] == 5


def test_missing_rows_are_a_clear_error(tmp_path):
    store = EmbeddingStore(tmp_path, "enc", "a" * 64, dim=4, with_tokens=False)
    store.append(["a"], np.zeros((1, 4), np.float32))
    with pytest.raises(DriftError, match="1 rows have no embedding"):
        store.read_pooled(["a", "b"])


@pytest.mark.compute
def test_minilm_matches_sentence_transformers_and_caches(tmp_path):
    from sentence_transformers import SentenceTransformer

    from drift.core.encoder_registry import get_encoder_spec
    from drift.encoders.text import TextEncoder, resolve_weights

    texts = [
        "The Congress shall have power to lay and collect taxes.",
        "Peace.",
        "We must balance the budget and reduce the national debt over the coming years.",
    ]
    encoder = TextEncoder("minilm-l6", max_length=64, batch_size=2)
    pooled, tokens = encoder.encode_batch(texts)
    reference = SentenceTransformer(str(resolve_weights(get_encoder_spec("minilm-l6"))), device="cpu")
    reference.max_seq_length = 64
    np.testing.assert_allclose(pooled, reference.encode(texts), atol=1e-5)
    # token states are the real tokens only, [CLS] ... [SEP]
    assert [len(t) for t in tokens] == [len(encoder.tokenizer(t)["input_ids"]) for t in texts]
    assert all(t.dtype == np.float16 and t.shape[1] == 384 for t in tokens)


@pytest.mark.compute
def test_fingerprint_changes_with_every_field():
    from drift.encoders.text import TextEncoder

    base = TextEncoder("minilm-l6", max_length=64)
    assert base.fingerprint_hash() == TextEncoder("minilm-l6", max_length=64, batch_size=7).fingerprint_hash()
    assert base.fingerprint_hash() != TextEncoder("minilm-l6", max_length=32).fingerprint_hash()
    assert (
        base.fingerprint_hash()
        != TextEncoder("minilm-l6", max_length=64, dtype="bfloat16").fingerprint_hash()
    )


@pytest.mark.compute
def test_embed_computes_only_missing_keys(tmp_path):
    import pyarrow as pa

    from drift.encoders.embed import embed_dataset
    from drift.store.slices import hand_manifest, write_slice_table

    def table(texts):
        from drift.data.records import payload_key

        return pa.table(
            {
                "id": [str(i) for i in range(len(texts))],
                "key": [payload_key(t) for t in texts],
                "slice": pa.array([0] * len(texts), pa.int32()),
                "split": ["train"] * len(texts),
                "label": [0] * len(texts),
                "text": texts,
            }
        )

    cfg = EmbedParams(text_encoder="minilm-l6", max_length=32, batch_size=4)
    path = tmp_path / "d.lance"
    write_slice_table(table(["one fish", "two fish", "red fish", "two fish"]), path, hand_manifest("t"))
    manifest, metrics = embed_dataset(path, cfg, tmp_path / "cache")
    assert (metrics.rows, metrics.unique, metrics.computed, metrics.cache_hits) == (4, 3, 3, 0)
    write_slice_table(table(["one fish", "two fish", "red fish", "blue fish"]), path, hand_manifest("t"))
    again, metrics = embed_dataset(path, cfg, tmp_path / "cache")
    assert (metrics.computed, metrics.cache_hits) == (1, 3)  # only the appended row runs the encoder
    assert again.fingerprint == manifest.fingerprint and again.keys_sha256 != manifest.keys_sha256


def three_fragments(tmp_path) -> EmbeddingStore:
    rng = np.random.default_rng(1)
    store = EmbeddingStore(tmp_path, "enc", "c" * 64, dim=8, with_tokens=True)
    for chunk in range(3):
        lengths = rng.integers(1, 30, 40)
        store.append(
            [f"k{chunk}-{i:02d}" for i in range(40)],
            rng.standard_normal((40, 8)).astype(np.float32),
            rng.standard_normal((int(lengths.sum()), 8)).astype(np.float16),
            lengths,
        )
    return store


def test_damaged_rows_are_never_served_and_named(tmp_path):
    """Bytes flipped in one data file: the rows they hit fail their CRC-32 on read (DamagedRows names the keys
    and fragment), scan_damage names fragment and key range, and discarding the fragment makes them missing.
    """
    import lance

    from drift.store.embeddings import DamagedRows, discard_fragments, scan_damage

    store = three_fragments(tmp_path)
    assert scan_damage(store.path) == []
    files = sorted((store.path / "data").iterdir(), key=lambda p: p.stat().st_mtime)
    data = bytearray(files[1].read_bytes())
    middle = len(data) // 3
    data[middle : middle + 64] = bytes(b ^ 0x55 for b in data[middle : middle + 64])
    files[1].write_bytes(bytes(data))
    damage = scan_damage(store.path)
    assert len(damage) == 1 and damage[0]["first_key"].startswith("k1-") and damage[0]["rows"] >= 1
    reader = EmbeddingStore(tmp_path, "enc", "c" * 64, dim=8, with_tokens=True)
    keys = [f"k{c}-{i:02d}" for c in range(3) for i in range(40)]
    with pytest.raises(DamagedRows) as raised:
        reader.read_tokens(keys)
    assert set(raised.value.damaged.values()) == {damage[0]["fragment"]}
    assert damage[0]["first_key"] in raised.value.damaged
    flat, offsets = reader.read_tokens(keys[:40] + keys[80:])  # the other fragments are served
    assert discard_fragments(store.path, {damage[0]["fragment"]}) == 40
    assert lance.dataset(str(store.path)).count_rows() == 80 and scan_damage(store.path) == []
    assert store.missing(keys) == keys[40:80]


@pytest.mark.parametrize("where", ["pooled", "tokens"])
def test_non_finite_values_are_never_stored(tmp_path, where):
    store = EmbeddingStore(tmp_path, "enc", "d" * 64, dim=4, with_tokens=True)
    pooled, tokens = np.zeros((2, 4), np.float32), np.zeros((3, 4), np.float16)
    (pooled if where == "pooled" else tokens)[-1, 2] = np.nan if where == "pooled" else np.inf
    with pytest.raises(DriftError, match=r"enc gave NaN or inf for 1 of 2 rows \(first key b\)"):
        store.append(["a", "b"], pooled, tokens, [1, 2])
    assert store.missing(["a", "b"]) == ["a", "b"]


def test_a_table_written_before_checksums_is_read_and_appended_to(tmp_path):
    """A table without the checksum columns keeps its schema; its rows are checked for finite values only."""
    import lance
    import pyarrow as pa

    from drift.store.embeddings import legacy_schema, scan_damage, store_schema

    schema = legacy_schema(store_schema(4, with_tokens=False))
    path = tmp_path / "enc-eeeeeeeeeeeeeeee.lance"
    lance.write_dataset(
        pa.table(
            {
                "key": ["a", "b"],
                "pooled": pa.FixedSizeListArray.from_arrays(
                    pa.array(np.array([0, 1, 2, 3, np.nan, 0, 0, 0], np.float32)), 4
                ),
            },
            schema=schema,
        ),
        str(path),
        data_storage_version="2.0",
    )
    store = EmbeddingStore(tmp_path, "enc", "e" * 64, dim=4, with_tokens=False)
    store.append(["c"], np.ones((1, 4), np.float32))
    assert lance.dataset(str(path)).schema.names == ["key", "pooled"]
    np.testing.assert_array_equal(store.read_pooled(["c", "a"]), [[1, 1, 1, 1], [0, 1, 2, 3]])
    from drift.store.embeddings import DamagedRows

    with pytest.raises(DamagedRows):
        store.read_pooled(["b"])
    assert [d["first_key"] for d in scan_damage(path)] == ["b"]


def test_the_slice_table_is_the_same_bytes_every_write(tmp_path):
    """Lance writes a metadata map in hash order and its 2.1 format picks encodings from samples: the slice
    table is written so that the same records always give the same file (dvc.lock unchanged on a re-run)."""
    import pyarrow as pa

    from drift.store.slices import hand_manifest, read_slice_table, write_slice_table

    table = pa.table(
        {
            "id": [str(i) for i in range(500)],
            "key": [f"k{i}" for i in range(500)],
            "slice": [i % 5 for i in range(500)],
            "split": ["train", "test"] * 250,
            "label": [i % 2 for i in range(500)],
            "text": [f"words {i} " * (i % 40) for i in range(500)],
        }
    )
    table = table.replace_schema_metadata({f"m{i}".encode(): str(i).encode() for i in range(8)})
    written = set()
    for n in range(4):
        path = tmp_path / f"t{n}.lance"
        write_slice_table(table, path, hand_manifest("t"))
        written.add(path.read_bytes())
    assert len(written) == 1
    back = read_slice_table(tmp_path / "t0.lance", columns=["key", "text"])
    assert back.column("text").to_pylist() == table.column("text").to_pylist()
    # the metadata folded into one entry comes back whole
    assert back.schema.metadata == table.schema.metadata


def test_run_records_stay_in_the_main_repository(tmp_path, monkeypatch):
    """A stage's record of what it did lands under the main repository's .drift/runs, and an experiment's also
    under its (sanitised) name: a --temp workspace's record outlives it, a hostile name cannot leave the
    folder."""
    from drift.core.paths import run_records

    monkeypatch.setenv("DVC_ROOT", str(tmp_path))
    monkeypatch.delenv("DVC_EXP_NAME", raising=False)
    assert run_records("train", "sotu.json") == [tmp_path / ".drift/runs/train/sotu.json"]
    monkeypatch.setenv("DVC_EXP_NAME", "../../etc/x y")
    latest, experiment = run_records("train", "sotu.json")
    assert latest == tmp_path / ".drift/runs/train/sotu.json"
    assert experiment == tmp_path / ".drift/runs/exps/_.._etc_x_y/train/sotu.json"
    assert experiment.resolve().is_relative_to(tmp_path / ".drift/runs/exps")

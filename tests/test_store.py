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
        assert flat[offsets[i]:offsets[i + 1]].tobytes() == tokens[j].tobytes()  # float16, bit for bit
    assert store.stats()["rows"] == 5


def test_missing_rows_are_a_clear_error(tmp_path):
    store = EmbeddingStore(tmp_path, "enc", "a" * 64, dim=4, with_tokens=False)
    store.append(["a"], np.zeros((1, 4), np.float32))
    with pytest.raises(DriftError, match="1 rows have no embedding"):
        store.read_pooled(["a", "b"])


def test_minilm_matches_sentence_transformers_and_caches(tmp_path):
    from sentence_transformers import SentenceTransformer

    from drift.core.encoder_registry import get_encoder_spec
    from drift.encoders.text import TextEncoder, resolve_weights

    texts = ["The Congress shall have power to lay and collect taxes.", "Peace.",
             "We must balance the budget and reduce the national debt over the coming years."]
    encoder = TextEncoder("minilm-l6", max_length=64, batch_size=2)
    pooled, tokens = encoder.encode_batch(texts)
    reference = SentenceTransformer(str(resolve_weights(get_encoder_spec("minilm-l6"))), device="cpu")
    reference.max_seq_length = 64
    np.testing.assert_allclose(pooled, reference.encode(texts), atol=1e-5)
    # token states are the real tokens only, [CLS] ... [SEP]
    assert [len(t) for t in tokens] == [len(encoder.tokenizer(t)["input_ids"]) for t in texts]
    assert all(t.dtype == np.float16 and t.shape[1] == 384 for t in tokens)


def test_fingerprint_changes_with_every_field():
    from drift.encoders.text import TextEncoder

    base = TextEncoder("minilm-l6", max_length=64)
    assert base.fingerprint_hash() == TextEncoder("minilm-l6", max_length=64, batch_size=7).fingerprint_hash()
    assert base.fingerprint_hash() != TextEncoder("minilm-l6", max_length=32).fingerprint_hash()
    assert base.fingerprint_hash() != TextEncoder("minilm-l6", max_length=64, dtype="bfloat16").fingerprint_hash()


def test_embed_computes_only_missing_keys(tmp_path):
    import pyarrow as pa

    from drift.encoders.embed import embed_dataset
    from drift.store.slices import write_slice_table

    def table(texts):
        from drift.data.records import payload_key
        return pa.table({"id": [str(i) for i in range(len(texts))], "key": [payload_key(t) for t in texts],
                         "slice": pa.array([0] * len(texts), pa.int32()), "split": ["train"] * len(texts),
                         "label": [0] * len(texts), "text": texts})

    cfg = EmbedParams(text_encoder="minilm-l6", max_length=32, batch_size=4)
    path = tmp_path / "d.lance"
    write_slice_table(table(["one fish", "two fish", "red fish", "two fish"]), path, {})
    manifest, metrics = embed_dataset(path, cfg, tmp_path / "cache")
    assert (metrics["rows"], metrics["unique"], metrics["computed"], metrics["cache_hits"]) == (4, 3, 3, 0)
    write_slice_table(table(["one fish", "two fish", "red fish", "blue fish"]), path, {})
    again, metrics = embed_dataset(path, cfg, tmp_path / "cache")
    assert (metrics["computed"], metrics["cache_hits"]) == (1, 3)  # only the appended row runs the encoder
    assert again["fingerprint"] == manifest["fingerprint"] and again["keys_sha256"] != manifest["keys_sha256"]

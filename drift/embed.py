"""Embed: run a frozen encoder once per content and encoder fingerprint, into the shared embedding store.

Only keys missing from the store are computed, in chunks, each appended (and committed) as it finishes, so
a killed run resumes where it stopped. The stage's DVC output is a small deterministic manifest (encoder,
fingerprint, store table, digest of the keys): an identical re-embedding changes nothing downstream.
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np

from drift.progress import progress
from drift.store import EmbeddingStore, read_slice_table

CHUNK_ROWS = 512  # rows per commit to the store: the most a killed run can lose


def embed_dataset(slice_path: Path, cfg: dict, cache_dir: Path) -> tuple[dict, dict]:
    """Embed a text dataset's rows with cfg['text_encoder']; returns (manifest, metrics)."""
    from drift.encoders.text import TextEncoder

    started = time.perf_counter()
    table = read_slice_table(slice_path, columns=["key", "text"])
    keys = table.column("key").to_pylist()
    encoder = TextEncoder(cfg["text_encoder"], max_length=cfg.get("max_length", 128),
                          batch_size=cfg.get("batch_size", 32), dtype=cfg.get("dtype", "float32"),
                          device=cfg.get("device") or None, weights=(cfg.get("weights") or {}).get(cfg["text_encoder"]))
    fingerprint = encoder.fingerprint_hash()
    store = EmbeddingStore(cache_dir, encoder.spec.name, fingerprint, encoder.dim, with_tokens=True)
    missing = set(store.missing(keys))
    text_of = dict(zip(keys, table.column("text").to_pylist()))
    todo = [k for k in dict.fromkeys(keys) if k in missing]
    texts = [text_of[k] for k in todo]
    order = encoder.length_order(texts)
    with progress(f"embed {slice_path.stem} with {encoder.spec.name}", total=len(todo)) as bar:
        for start in range(0, len(order), CHUNK_ROWS):
            chunk = order[start:start + CHUNK_ROWS]
            pooled, tokens = [], []
            for b in range(0, len(chunk), encoder.batch_size):
                p, t = encoder.encode_batch([texts[i] for i in chunk[b:b + encoder.batch_size]])
                pooled.append(p)
                tokens.extend(t)
                bar.advance(len(t))
            store.append([todo[i] for i in chunk], np.concatenate(pooled), tokens)
    unique = len(set(keys))
    manifest = {
        "encoder": encoder.spec.name, "fingerprint": fingerprint, "fingerprint_fields": encoder.fingerprint(),
        "store": store.path.name, "dim": encoder.dim, "rows": len(keys),
        "keys_sha256": hashlib.sha256("\n".join(sorted(set(keys))).encode()).hexdigest(),
    }
    metrics = {"rows": len(keys), "unique": unique, "computed": len(todo), "cache_hits": unique - len(todo),
               "seconds": round(time.perf_counter() - started, 3), "encoder": encoder.spec.name,
               "fingerprint": fingerprint[:16]}
    return manifest, metrics


def open_store(manifest: dict, cache_dir: Path) -> EmbeddingStore:
    return EmbeddingStore(cache_dir, manifest["encoder"], manifest["fingerprint"], manifest["dim"], with_tokens=True)


"""Embed: run a frozen encoder once per content and encoder fingerprint, into the shared embedding store.

Only keys missing from the store are computed, longest text first, in chunks of whole batches; each chunk is
appended (one Lance commit) on a background thread while the encoder runs the next, so a killed run keeps
every finished chunk and resumes with the rest. The stage's DVC output is a small deterministic manifest
(encoder, fingerprint, store table, digest of the keys): an identical re-embedding changes nothing downstream.
"""
from __future__ import annotations

import hashlib
import queue
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from drift.ingest import table_images
from drift.params import EmbedParams
from drift.progress import progress
from drift.store import EmbeddingStore, open_store, read_slice_table  # noqa: F401 (open_store: re-exported)

CHUNK_ROWS = EmbedParams.model_fields["chunk_rows"].default  # rows per commit: the most a killed run can lose


def encoder_kwargs(name: str, cfg: EmbedParams | dict) -> dict:
    """The constructor arguments the `embed` params (drift.params.EmbedParams, or its mapping) give encoder `name`:
    batch size, dtype, device, weights, and for a text encoder max_length and pooling (embed.pooling: null keeps
    the encoder's own; vision encoders pool as their timm head does)."""
    from drift.encoders import get_encoder_spec

    cfg = EmbedParams.of(cfg)
    kwargs = {"batch_size": cfg.batch_size, "dtype": cfg.dtype, "device": cfg.device,
              "weights": cfg.weights.get(name)}  # an encoder without local weights: the Hugging Face cache
    if get_encoder_spec(name).modality == "text":
        kwargs["max_length"] = cfg.max_length
        if cfg.pooling is not None:
            kwargs["pooling"] = cfg.pooling
    return kwargs


def text_encoder(cfg: EmbedParams | dict):
    """The TextEncoder the `embed` params describe (embed.text_encoder, its token states and pooled vector)."""
    from drift.encoders.text import TextEncoder

    cfg = EmbedParams.of(cfg)
    kwargs = encoder_kwargs(cfg.text_encoder, cfg)
    if "max_length" not in kwargs:  # a vision encoder named here: TextEncoder says so in one line
        kwargs["max_length"] = cfg.max_length
    return TextEncoder(cfg.text_encoder, **kwargs)


def embed_encoder(name: str, cfg: EmbedParams | dict):
    """Encoder `name` (text or vision, for its probe) as the `embed` params describe it."""
    from drift.encoders import make_encoder

    return make_encoder(name, **encoder_kwargs(name, cfg))


def store_manifest(encoder, store: EmbeddingStore, keys: pa.Array) -> dict:
    """What downstream stages depend on: encoder, fingerprint, store table, and a digest of the keys."""
    return {"encoder": encoder.spec.name, "fingerprint": store.fingerprint, "fingerprint_fields": encoder.fingerprint(),
            "store": store.path.name, "dim": encoder.dim, "rows": len(keys),
            "keys_sha256": hashlib.sha256("\n".join(sorted(pc.unique(keys).to_pylist())).encode()).hexdigest()}


def embed_dataset(slice_path: Path, cfg: EmbedParams | dict, cache_dir: Path, encoder=None) -> tuple[dict, dict]:
    """Embed a text dataset's rows with embed.text_encoder; returns (manifest, metrics)."""
    started = time.perf_counter()
    cfg = EmbedParams.of(cfg)
    table = read_slice_table(slice_path, columns=["key", "text"])
    keys = table.column("key").combine_chunks()
    encoder = encoder or text_encoder(cfg)
    fingerprint = encoder.fingerprint_hash()
    store = EmbeddingStore(cache_dir, encoder.spec.name, fingerprint, encoder.dim, with_tokens=True,
                           fields=encoder.fingerprint())
    todo = store.missing(keys)
    texts = table.column("text").take(pc.index_in(pa.array(todo, pa.string()), value_set=keys)).to_pylist()
    computed, tokens = compute_missing(encoder, store, todo, texts, cfg.chunk_rows,
                                       f"embed {Path(slice_path).stem} with {encoder.spec.name}")
    compacted = store.maybe_compact() if computed else None
    unique = len(pc.unique(keys))
    manifest = store_manifest(encoder, store, keys)
    metrics = {"rows": len(keys), "unique": unique, "computed": computed, "cache_hits": unique - computed,
               "tokens": tokens, "batch_size": encoder.batch_size, "compacted": compacted is not None,
               "seconds": round(time.perf_counter() - started, 3), "encoder": encoder.spec.name,
               "fingerprint": fingerprint[:16]}
    return manifest, metrics


def embed_pooled(slice_path: Path, encoder, cache_dir: Path, modality: str,
                 chunk_rows: int = CHUNK_ROWS) -> tuple[dict, dict]:
    """Pooled vectors only, for an encoder that feeds probes (any text encoder, or a vision encoder on the
    portraits); same store rules: content key + fingerprint, only missing keys, one commit per chunk."""
    started = time.perf_counter()
    payload = "text" if modality == "text" else "image"
    table = read_slice_table(slice_path, columns=["key", payload])
    keys = table.column("key").combine_chunks()
    fingerprint = encoder.fingerprint_hash()
    store = EmbeddingStore(cache_dir, encoder.spec.name, fingerprint, encoder.dim, with_tokens=False,
                           fields=encoder.fingerprint())
    todo = store.missing(keys)
    rows = table.take(pc.index_in(pa.array(todo, pa.string()), value_set=keys))
    with progress(f"embed {Path(slice_path).stem} with {encoder.spec.name}", total=len(todo)) as bar:
        for start in range(0, len(todo), chunk_rows):
            part = rows.slice(start, chunk_rows)
            if payload == "text":
                pooled = encoder.encode(part.column("text").to_pylist(), on_batch=bar.advance)[0]
            else:
                pooled = encoder.encode(np.ascontiguousarray(table_images(part)), on_batch=bar.advance)
            store.append(part.column("key").to_pylist(), pooled)
    compacted = store.maybe_compact() if todo else None
    unique = len(pc.unique(keys))
    manifest = {**store_manifest(encoder, store, keys), "with_tokens": False}
    metrics = {"rows": len(keys), "unique": unique, "computed": len(todo), "cache_hits": unique - len(todo),
               "batch_size": encoder.batch_size, "compacted": compacted is not None,
               "seconds": round(time.perf_counter() - started, 3), "encoder": encoder.spec.name,
               "fingerprint": fingerprint[:16]}
    return manifest, metrics


def compute_missing(encoder, store: EmbeddingStore, keys: list[str], texts: list[str], chunk_rows: int = CHUNK_ROWS,
                    label: str = "embed") -> tuple[int, int]:
    """Encode the texts of keys not yet stored and append them chunk by chunk; returns (rows, tokens) computed.

    The order (longest first, ties in the given order) and the chunks (whole batches) are fixed, so after a
    kill the rows still missing are the tail of that order, and the resumed run encodes exactly the batches
    the killed one would have: the same vectors, bit for bit. Before each chunk, keys another process
    committed meanwhile are skipped (reading only the fragments added since)."""
    order = encoder.length_order(texts)
    step = max(1, chunk_rows // encoder.batch_size) * encoder.batch_size
    computed = tokens = 0
    store.refresh()
    with progress(label, total=len(order)) as bar, Committer(store) as commit:
        for start in range(0, len(order), step):
            chunk = order[start:start + step]
            added = store.refresh()
            if len(added):
                done = pc.is_in(pa.array([keys[i] for i in chunk], pa.large_string()), value_set=added)
                done = done.to_numpy(zero_copy_only=False)
                bar.advance(int(done.sum()))
                chunk = chunk[~done]
            if not len(chunk):
                continue
            pooled, flat, lengths = encoder.encode([texts[i] for i in chunk], on_batch=bar.advance)
            commit([keys[i] for i in chunk], pooled, flat, lengths)
            computed += len(chunk)
            tokens += int(lengths.sum())
    return computed, tokens


class Committer:
    """Appends chunks to the store on a background thread, so the encoder computes the next chunk while this
    one is written; at most one chunk waits. On exit (even on an exception) what was handed over is committed."""

    def __init__(self, store: EmbeddingStore):
        self.store, self.error = store, None
        self.queue: queue.Queue = queue.Queue(maxsize=1)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while (item := self.queue.get()) is not None:
            if self.error is None:
                try:
                    self.store.append(*item)
                except BaseException as e:  # raised again in the caller's thread
                    self.error = e

    def __call__(self, *item):
        if self.error is not None:
            raise self.error
        self.queue.put(item)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, exc_type, *_):
        self.queue.put(None)
        self.thread.join()
        if self.error is not None and exc_type is None:
            raise self.error

"""Embed: run a frozen encoder once per content and encoder fingerprint, into the shared embedding store.

Only keys missing from the store are computed, longest text first, in chunks of whole batches; each chunk is
appended (one Lance commit) on a background thread while the encoder runs the next, so a killed run keeps
every finished chunk and resumes with the rest. The stage's DVC output is a small deterministic manifest
(encoder, fingerprint, store table, digest of the keys): an identical re-embedding changes nothing downstream.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from drift.core.artefact import Artefact, Executor, Number
from drift.core.encoder_registry import EncoderSpec, get_encoder_spec, register
from drift.core.errors import DriftError
from drift.core.executor import check_reachable, map_actors
from drift.core.objectstore import ObjectPath
from drift.core.params import ComputeParams, EmbedParams
from drift.core.progress import progress
from drift.data.records import table_images
from drift.store.embeddings import EmbeddingStore, StoreManifest, find_table
from drift.store.features import seed_store
from drift.store.location import cache_dir, local_cache_dir
from drift.store.slices import read_slice_table

CHUNK_ROWS = EmbedParams.model_fields["chunk_rows"].default  # rows per commit: the most a killed run can lose


def encoder_kwargs(name: str, cfg: EmbedParams) -> dict:
    """The constructor arguments the `embed` params give encoder `name`: batch size, dtype, compute dtype,
    device, weights, and for a text encoder max_length and pooling (embed.pooling: null keeps the encoder's
    own, and a declared encoder pools as its declaration says; vision encoders pool as their timm head does,
    or as embed.image_pooling says, read pixels as embed.image_input says, come from the library
    embed.image_source names and resample their position table as embed.image_pos_embed says). A text encoder
    gets embed.backend, embed.quantize and its export folder only when the backend is not torch."""
    kwargs = {
        "batch_size": cfg.batch_size,
        "dtype": cfg.dtype,
        "device": cfg.device,
        "weights": cfg.weights.get(name),
    }  # an encoder without local weights: the Hugging Face cache
    if cfg.compute_dtype is not None:  # left out by default, so a default run's encoders are built as before
        kwargs["compute_dtype"] = cfg.compute_dtype
    spec = get_encoder_spec(name)
    if spec.modality == "text":
        kwargs["max_length"] = cfg.max_length
        if cfg.pooling is not None and not spec.declared:
            kwargs["pooling"] = cfg.pooling
        if not cfg.normalize:
            kwargs["normalize"] = False
        if cfg.backend != "torch":  # left out by default: a default run's text encoders are built as before
            kwargs.update(backend=cfg.backend, quantize=cfg.quantize, export_dir=exports_dir(cfg))
    else:  # the defaults are left out, so a default run's encoders are built as before
        if cfg.image_input != "normalised":
            kwargs["image_input"] = cfg.image_input
        if name in cfg.image_pooling:
            kwargs["global_pool"] = cfg.image_pooling[name]
        if name in cfg.image_activation:
            kwargs["activation"] = cfg.image_activation[name]
        if cfg.image_source.get(name, "timm") != "timm":
            kwargs["source"] = cfg.image_source[name]
        if cfg.image_pos_embed.get(name, "timm") != "timm":
            kwargs["pos_embed"] = cfg.image_pos_embed[name]
    return kwargs


def text_encoder(cfg: EmbedParams):
    """The TextEncoder the `embed` params describe (embed.text_encoder, its token states and pooled vector)."""
    from drift.encoders.text import (
        TextEncoder,  # lazy: torch, only when rows are missing from the store
    )

    kwargs = encoder_kwargs(cfg.text_encoder, cfg)
    if "max_length" not in kwargs:  # a vision encoder named here: TextEncoder says so in one line
        kwargs["max_length"] = cfg.max_length
    if "backend" in kwargs:
        return runtime_encoder(cfg.text_encoder, kwargs)
    return TextEncoder(cfg.text_encoder, **kwargs)


def runtime_encoder(name: str, kwargs: dict):
    """A text encoder on embed.backend's runtime (drift/encoders/backends.py): ONNX Runtime or OpenVINO."""
    from drift.encoders.backends import (
        RuntimeTextEncoder,  # lazy: the runtimes, only when embed.backend names one
    )

    return RuntimeTextEncoder(name, **kwargs)


def exports_dir(cfg: EmbedParams) -> Path:
    """Where the text encoders' exported models are built and kept: <cache_dir>/exports beside the store, or
    this machine's cache when the store is on object storage (a runtime loads local files)."""
    where = cache_dir(cfg)
    return (where if isinstance(where, Path) else local_cache_dir()) / "exports"


def embed_encoder(name: str, cfg: EmbedParams):
    """Encoder `name` (text or vision, for its probe) as the `embed` params describe it."""
    from drift.encoders.load import (
        make_encoder,  # lazy: torch, only when rows are missing from the store
    )

    kwargs = encoder_kwargs(name, cfg)
    return runtime_encoder(name, kwargs) if "backend" in kwargs else make_encoder(name, **kwargs)


class EmbedRun(Artefact):
    """.drift/runs/embed/<dataset>-<encoder>.json: what one encoder's embedding run did. `tokens` (token
    states written) only for the text encoder; `corrupt` (store rows discarded and computed again) is the
    stage's."""

    WRITER = "embed"
    WHAT = "embed run record"

    rows: int
    unique: int
    computed: int
    cache_hits: int
    seeded: int
    tokens: int | None = None
    batch_size: int
    compacted: bool
    seconds: Number
    encoder: str
    fingerprint: str  # its first 16 hex digits
    executor: Executor
    workers: int
    corrupt: int | None = None


def weights_revision(path: Path, declared: str = "") -> str | None:
    """The Hugging Face commit of the weights at `path`: the snapshot folder they lie in when they come from
    the Hugging Face cache (<cache>/models--<org>--<name>/snapshots/<commit>/...), else the declaration's
    `revision`, else None (a local folder, a torchvision file)."""
    path = Path(path).absolute()
    for candidate in (path, path.resolve()):
        for folder in (candidate, *candidate.parents):
            if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
                return folder.name
    return declared or None


def store_fields(encoder, pooled_dtype: str = "float32") -> dict:
    """What keys an encoder's store table: its fingerprint (drift.encoders.fingerprint), plus `pooled_dtype`
    when the pooled vectors are stored in another dtype than float32 (embed.pooled_dtype), plus `hf_revision`,
    the Hugging Face commit its weights were loaded from (weights_revision), when there is one. A default
    run's MiniLM (a local folder, float32) adds neither: its key is the encoder's own fingerprint hash."""
    fields = dict(encoder.fingerprint())
    if pooled_dtype != "float32":
        fields["pooled_dtype"] = pooled_dtype
    revision = weights_revision(encoder.path, encoder.spec.revision)
    if revision:
        fields["hf_revision"] = revision
    return fields


def store_key(fields: dict) -> str:
    """The store table's fingerprint: sha256 of its fields (store_fields), as Fingerprinted.fingerprint_hash."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def encoder_store(
    encoder, cache_dir: Path | ObjectPath, with_tokens: bool, pooled_dtype: str = "float32"
) -> EmbeddingStore:
    """The store table of the encoder's fingerprint and pooled dtype (store_fields; whichever encoder name
    computed it first: find_table)."""
    fields = store_fields(encoder, pooled_dtype)
    fingerprint = store_key(fields)
    return EmbeddingStore(
        cache_dir,
        encoder.spec.name,
        fingerprint,
        encoder.dim,
        with_tokens=with_tokens,
        fields=fields,
        table=find_table(cache_dir, encoder.spec.name, fingerprint),
        pooled_dtype=pooled_dtype,
    )


def store_manifest(encoder, store: EmbeddingStore, keys: pa.Array, **extra) -> StoreManifest:
    """What downstream stages depend on: encoder, fingerprint, store table, and a digest of the keys."""
    return StoreManifest(
        encoder=encoder.spec.name,
        fingerprint=store.fingerprint,
        fingerprint_fields=store_fields(encoder, store.pooled_dtype),
        store=store.path.name,
        dim=encoder.dim,
        rows=len(keys),
        keys_sha256=hashlib.sha256("\n".join(sorted(pc.unique(keys).to_pylist())).encode()).hexdigest(),
        **extra,
    )


def embed_dataset(
    slice_path: Path,
    cfg: EmbedParams,
    cache_dir: Path | ObjectPath,
    encoder=None,
    compute: ComputeParams | None = None,
    seed_from: Path | None = None,
) -> tuple[StoreManifest, EmbedRun]:
    """Embed a text dataset's rows with embed.text_encoder; returns (manifest, metrics). On the Ray executor
    (params `compute`; None: this process) the missing rows are encoded by a pool of actors
    (`compute_on_ray`). seed_from: the dataset's feature directory; rows the store lacks that its verified
    files hold under the same fingerprint (pulled with `dvc pull`) are copied into the store first, not
    computed."""
    started = time.perf_counter()
    compute = compute or ComputeParams()
    table = read_slice_table(slice_path, columns=["key", "text"])
    keys = table.column("key").combine_chunks()
    encoder = encoder or text_encoder(cfg)
    store = encoder_store(encoder, cache_dir, with_tokens=True, pooled_dtype=cfg.pooled_dtype)
    seeded = seed_store(store, seed_from, keys) if seed_from is not None else 0
    todo = store.missing(keys)
    texts = table.column("text").take(pc.index_in(pa.array(todo, pa.string()), value_set=keys)).to_pylist()
    label = f"embed {Path(slice_path).stem} with {encoder.spec.name}"
    if line := neighbour_line(encoder, store, todo, label):
        print(line, file=sys.stderr)
    if compute.executor == "ray" and todo:
        computed, tokens = compute_on_ray(encoder, store, todo, texts, cfg, compute, label)
    else:
        computed, tokens = compute_missing(encoder, store, todo, texts, cfg.chunk_rows, label)
    compacted = store.maybe_compact() if computed else None
    unique = len(pc.unique(keys))
    manifest = store_manifest(encoder, store, keys)
    metrics = EmbedRun(
        rows=len(keys),
        unique=unique,
        computed=computed,
        cache_hits=unique - computed,
        seeded=seeded,
        tokens=tokens,
        batch_size=encoder.batch_size,
        compacted=compacted is not None,
        seconds=round(time.perf_counter() - started, 3),
        encoder=encoder.spec.name,
        fingerprint=store.fingerprint[:16],
        **executor_metrics(compute, todo),
    )
    return manifest, metrics


def neighbour_line(encoder, store: EmbeddingStore, todo: list[str], label: str) -> str | None:
    """One progress line when the encoder's table is new (or empty) and the nearest table under another key of
    the same encoder (its hub_id or weights; drift.store.neighbours) holds some of the rows about to be
    computed: how many, and the fields that differ. None otherwise; a table that holds rows costs nothing
    more."""
    if not todo or len(store.keys()):
        return None
    from drift.store.neighbours import changes_text, nearest_table, rows_held  # lazy: only for a new table

    near = nearest_table(store.path.parent, store_fields(encoder, store.pooled_dtype), skip=store.path.name)
    if near is None or {"hub_id", "weights_sha256"} <= {c["field"] for c in near["changes"]}:
        return None  # no table, or only other encoders' tables
    if not (held := rows_held(near["path"], todo)):
        return None
    return (
        f"{label}: a table under another key holds {held:,} of these {len(todo):,} rows "
        f"({changes_text(near['changes'], most=4)}): computing anew"
    )


def executor_metrics(compute: ComputeParams, todo) -> dict:
    """Which executor computed the rows, and how many encoders ran at once (0: nothing was computed)."""
    actors = compute.embed_actors if compute.executor == "ray" else 1
    return {"executor": compute.executor, "workers": actors if todo else 0}


def embed_pooled(
    slice_path: Path,
    encoder,
    cache_dir: Path | ObjectPath,
    modality: str,
    cfg: EmbedParams,
    compute: ComputeParams | None = None,
    seed_from: Path | None = None,
) -> tuple[StoreManifest, EmbedRun]:
    """Pooled vectors only, for an encoder that feeds probes (any text encoder, or a vision encoder on the
    portraits); same store rules: content key + fingerprint, only missing keys, one commit per chunk of
    embed.chunk_rows. On the Ray executor the chunks go to a pool of actors, each building the encoder from
    `cfg` once."""
    started = time.perf_counter()
    compute, chunk_rows = compute or ComputeParams(), cfg.chunk_rows
    payload = "text" if modality == "text" else "image"
    table = read_slice_table(slice_path, columns=["key", payload])
    keys = table.column("key").combine_chunks()
    store = encoder_store(encoder, cache_dir, with_tokens=False, pooled_dtype=cfg.pooled_dtype)
    seeded = seed_store(store, seed_from, keys) if seed_from is not None else 0
    todo = store.missing(keys)
    rows = table.take(pc.index_in(pa.array(todo, pa.string()), value_set=keys))
    label = f"embed {Path(slice_path).stem} with {encoder.spec.name}"
    if line := neighbour_line(encoder, store, todo, label):
        print(line, file=sys.stderr)
    if compute.executor == "ray" and todo:
        parts = [rows.slice(start, chunk_rows) for start in range(0, len(todo), chunk_rows)]
        chunks = [(part.column("key").to_pylist(), payload_of(part, payload)) for part in parts]
        on_actors(encoder, store, chunks, cfg, compute, label)
    else:
        encode_chunks(encoder, store, rows, payload, chunk_rows, label)
    compacted = store.maybe_compact() if todo else None
    unique = len(pc.unique(keys))
    manifest = store_manifest(encoder, store, keys, with_tokens=False)
    metrics = EmbedRun(
        rows=len(keys),
        unique=unique,
        computed=len(todo),
        cache_hits=unique - len(todo),
        seeded=seeded,
        batch_size=encoder.batch_size,
        compacted=compacted is not None,
        seconds=round(time.perf_counter() - started, 3),
        encoder=encoder.spec.name,
        fingerprint=store.fingerprint[:16],
        **executor_metrics(compute, todo),
    )
    return manifest, metrics


def payload_of(part: pa.Table, payload: str):
    """What an encoder takes: the texts, or the images as stored (uint8 or float32) [n, C, H, W]."""
    if payload == "text":
        return part.column("text").to_pylist()
    return np.ascontiguousarray(table_images(part))


def encode_chunks(
    encoder, store: EmbeddingStore, rows: pa.Table, payload: str, chunk_rows: int, label: str
) -> None:
    """Pooled vectors of `rows` in this process, one commit per chunk."""
    with progress(label, total=rows.num_rows) as bar:
        for start in range(0, rows.num_rows, chunk_rows):
            part = rows.slice(start, chunk_rows)
            pooled = encoder.encode(payload_of(part, payload), on_batch=bar.advance)
            pooled = (
                pooled[0] if isinstance(pooled, tuple) else pooled
            )  # a text encoder: (pooled, tokens, lengths)
            store.append(part.column("key").to_pylist(), pooled)


def compute_missing(
    encoder,
    store: EmbeddingStore,
    keys: list[str],
    texts: list[str],
    chunk_rows: int = CHUNK_ROWS,
    label: str = "embed",
) -> tuple[int, int]:
    """Encode the texts of keys not yet stored and append them chunk by chunk; returns (rows, tokens)
    computed.

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
            chunk = order[start : start + step]
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


class EmbedActor:
    """A Ray actor of the embed stage: its encoder is built once from the `embed` params, then each chunk it
    is handed is encoded and committed to the store by the actor itself (one Lance commit per chunk;
    concurrent appends are safe, the table is created under a file lock)."""

    def __init__(
        self,
        spec: EncoderSpec,
        cfg: EmbedParams,
        cache_dir: Path,
        fingerprint: str,
        dim: int,
        with_tokens: bool,
        table: str,
    ):
        register(spec)  # a declared encoder, as load_params declared it in the stage's process
        name = spec.name
        self.encoder = text_encoder(cfg) if with_tokens else embed_encoder(name, cfg)
        fields = store_fields(self.encoder, cfg.pooled_dtype)
        if store_key(fields) != fingerprint:  # other weights on this node: never mix them in a table
            raise DriftError(
                f"{name} on Ray node {os.uname().nodename} has fingerprint "
                f"{store_key(fields)[:16]}, the stage's is {fingerprint[:16]}: give every "
                "node the same weights (embed.weights on the shared filesystem, or the same HF cache)"
            )
        self.store = EmbeddingStore(
            cache_dir,
            name,
            fingerprint,
            dim,
            with_tokens,
            fields=fields,
            table=table,
            pooled_dtype=cfg.pooled_dtype,
        )
        self.with_tokens = with_tokens

    def run(self, keys: list[str], payload) -> tuple[int, int]:
        """Encode and commit one chunk, minus the keys another writer committed meanwhile; (rows, tokens)."""
        missing = set(self.store.missing(keys))
        if len(missing) < len(keys):
            keep = [i for i, key in enumerate(keys) if key in missing]
            keys = [keys[i] for i in keep]
            payload = [payload[i] for i in keep] if isinstance(payload, list) else payload[keep]
        if not keys:
            return 0, 0
        if self.with_tokens:
            pooled, flat, lengths = self.encoder.encode(payload)
            self.store.append(keys, pooled, flat, lengths)
            return len(keys), int(lengths.sum())
        pooled = self.encoder.encode(payload)
        self.store.append(keys, pooled[0] if isinstance(pooled, tuple) else pooled)
        return len(keys), 0


def on_actors(
    encoder,
    store: EmbeddingStore,
    chunks: list[tuple[list, object]],
    cfg: EmbedParams,
    compute: ComputeParams,
    label: str,
) -> tuple[int, int]:
    """Chunks [(keys, payload)] encoded and committed by compute.embed_actors Ray actors
    (drift/core/executor.py); returns (rows, tokens) computed. The store's directory must be visible from
    every node."""
    store.path.parent.mkdir(parents=True, exist_ok=True)
    check_reachable([store.path.parent], compute)
    args = (
        encoder.spec,
        cfg,
        store.path.parent.resolve(),
        store.fingerprint,
        store.dim,
        store.with_tokens,
        store.path.name,
    )
    sizes = iter([len(keys) for keys, _ in chunks])  # results come in the chunks' order
    with progress(label, total=sum(len(keys) for keys, _ in chunks)) as bar:
        done = map_actors(
            EmbedActor,
            args,
            chunks,
            compute,
            compute.embed_actors,
            on_result=lambda _: bar.advance(next(sizes)),
        )
    store.refresh()
    return sum(n for n, _ in done), sum(t for _, t in done)


def compute_on_ray(
    encoder,
    store: EmbeddingStore,
    keys: list[str],
    texts: list[str],
    cfg: EmbedParams,
    compute: ComputeParams,
    label: str,
) -> tuple[int, int]:
    """compute_missing's chunks (the same order, longest first, and the same whole batches: the same vectors
    bit for bit) encoded by a pool of Ray actors, each committing its own chunks. After a kill the missing
    rows are whole chunks of that order, so a resumed run encodes exactly the batches the killed one would
    have."""
    order = encoder.length_order(texts)
    step = max(1, cfg.chunk_rows // encoder.batch_size) * encoder.batch_size
    chunks: list[tuple[list, object]] = [  # on_actors' (keys, payload): the payload here a list of texts
        ([keys[i] for i in order[start : start + step]], [texts[i] for i in order[start : start + step]])
        for start in range(0, len(order), step)
    ]
    return on_actors(encoder, store, chunks, cfg, compute, label)


class Committer:
    """Appends chunks to the store on a background thread, so the encoder computes the next chunk while this
    one is written; at most one chunk waits. On exit (even on an exception) what was handed over is committed.
    """

    def __init__(self, store: EmbeddingStore):
        self.store = store
        self.error: BaseException | None = None
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


def embed_all(
    slice_path: Path,
    modality: str,
    cfg: EmbedParams,
    cache_dir: Path | ObjectPath,
    compute: ComputeParams | None = None,
    seed_from: Path | None = None,
) -> dict[str, tuple[StoreManifest, EmbedRun]]:
    """Every encoder a dataset's run needs, {encoder: (manifest, metrics)}: for a text dataset the text
    encoder (token states for the heads, pooled vectors), and every encoder in `embed.encoders` of the
    dataset's modality (pooled vectors for its probe). An image dataset with no encoder gets none. seed_from:
    as embed_dataset's."""
    results = {}
    if modality == "text":
        results[cfg.text_encoder] = embed_dataset(
            slice_path, cfg, cache_dir, compute=compute, seed_from=seed_from
        )
    for name in cfg.encoders:
        if get_encoder_spec(name).modality != modality or name in results:
            continue
        results[name] = embed_pooled(
            slice_path, embed_encoder(name, cfg), cache_dir, modality, cfg, compute, seed_from
        )
    return results

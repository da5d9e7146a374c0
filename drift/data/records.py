"""Canonical records: the table every dataset reader's rows become (ingest) and every later stage reads.

One row per example: id (the source's), key (sha256 of the payload: the embedding store's key), time (UTC,
naive), label (binary int, regression float, multilabel fixed-size int8 list), and the payload: `text`, or
`image` (uint8, flattened; the schema's metadata holds its shape). The schema's metadata also names the task
and modality.
"""
from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def payload_key(payload) -> str:
    """The embedding-cache key: sha256 of the payload's bytes (text as UTF-8, images as raw uint8 + shape)."""
    if isinstance(payload, str):
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()
    array = np.ascontiguousarray(payload, dtype=np.uint8)
    return hashlib.sha256(repr(array.shape).encode() + array.tobytes()).hexdigest()


def record_schema(task: str, modality: str, n_labels: int, image_shape=(3, 32, 32)) -> pa.Schema:
    label = {"binary": pa.int64(), "regression": pa.float64(),
             "multilabel": pa.list_(pa.int8(), n_labels)}[task]
    payload = (pa.field("text", pa.string()) if modality == "text"
               else pa.field("image", pa.list_(pa.uint8(), int(np.prod(image_shape)))))
    meta = {"task": task, "modality": modality, "image_shape": ",".join(map(str, image_shape))}
    return pa.schema([pa.field("id", pa.string()), pa.field("key", pa.string()),
                      pa.field("time", pa.timestamp("us")), pa.field("label", label), payload], metadata=meta)


def table_images(table: pa.Table) -> np.ndarray:
    """The `image` column as uint8 [n, C, H, W], shaped by the schema's `image_shape` (record_schema)."""
    shape = tuple(int(x) for x in (table.schema.metadata or {}).get(b"image_shape", b"3,32,32").decode().split(","))
    return table.column("image").combine_chunks().flatten().to_numpy().reshape(table.num_rows, *shape)


def read_records(path: Path) -> pa.Table:
    return pq.read_table(path)


def as_utc_naive(value: dt.datetime) -> dt.datetime:
    """Readers hand over naive UTC datetimes; this converts an aware one."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value

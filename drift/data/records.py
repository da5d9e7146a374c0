"""Canonical records: the table every dataset reader's rows become (ingest) and every later stage reads.

One row per example: id (the source's), key (sha256 of the payload: the embedding store's key), time (UTC,
naive), label (binary or multiclass int, regression float, multilabel fixed-size int8 list), and the payload:
`text`, or `image` (uint8, or float32 where the reader keeps unrounded 0-255 values; flattened; the schema's
metadata holds its shape). The schema's metadata also names the task, the modality, the label names and the
dataset's slicing keys (records_manifest): the slice stage reads them there, so it needs no dataset reader.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from drift.core.errors import DriftError


def payload_key(payload) -> str:
    """The embedding-cache key: sha256 of the payload's bytes (text as UTF-8, images as raw uint8 + shape; a
    float32 image as its float32 bytes + shape + the dtype's name, so it never shares a uint8 image's key)."""
    if isinstance(payload, str):
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()
    if isinstance(payload, np.ndarray) and payload.dtype == np.float32:
        array = np.ascontiguousarray(payload)
        return hashlib.sha256(repr(array.shape).encode() + b"float32" + array.tobytes()).hexdigest()
    array = np.ascontiguousarray(payload, dtype=np.uint8)
    return hashlib.sha256(repr(array.shape).encode() + array.tobytes()).hexdigest()


IMAGE_DTYPES = {"uint8": pa.uint8(), "float32": pa.float32()}  # what an image column may hold


def record_schema(
    task: str,
    modality: str,
    n_labels: int,
    image_shape=(3, 32, 32),
    label_names=None,
    slicing: dict | None = None,
    image_dtype: str = "uint8",
) -> pa.Schema:
    """`label_names` and `slicing` (the dataset section's DatasetParams keys, every default filled) travel in
    the metadata as JSON; `image_dtype` (uint8 or float32) is the image column's value type."""
    label = {
        "binary": pa.int64(),
        "multiclass": pa.int64(),
        "regression": pa.float64(),
        "multilabel": pa.list_(pa.int8(), n_labels),
    }[task]
    payload = (
        pa.field("text", pa.string())
        if modality == "text"
        else pa.field("image", pa.list_(IMAGE_DTYPES[image_dtype], int(np.prod(image_shape))))
    )
    meta = {"task": task, "modality": modality, "image_shape": ",".join(map(str, image_shape))}
    if label_names is not None:
        meta["label_names"] = json.dumps(list(label_names))
    if slicing is not None:
        meta["slicing"] = json.dumps(slicing, default=str)
    return pa.schema(
        [
            pa.field("id", pa.string()),
            pa.field("key", pa.string()),
            pa.field("time", pa.timestamp("us")),
            pa.field("label", label),
            payload,
        ],
        metadata=meta,
    )


def table_images(table: pa.Table) -> np.ndarray:
    """The `image` column as [n, C, H, W] of its stored dtype (uint8 or float32), shaped by the schema's
    `image_shape` (record_schema)."""
    shape = tuple(
        int(x) for x in (table.schema.metadata or {}).get(b"image_shape", b"3,32,32").decode().split(",")
    )
    return table.column("image").combine_chunks().flatten().to_numpy().reshape(table.num_rows, *shape)


def read_records(path: Path) -> pa.Table:
    return pq.read_table(path)


def records_manifest(table: pa.Table) -> dict:
    """What ingest wrote in the records' metadata: task, modality, label_names, slicing."""
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    if "slicing" not in meta:
        raise DriftError(
            "these records carry no label names or slicing keys (written before they did): "
            "run `dvc repro ingest@<dataset>` again"
        )
    return {
        "task": meta["task"],
        "modality": meta["modality"],
        "label_names": json.loads(meta["label_names"]),
        "slicing": json.loads(meta["slicing"]),
    }


def as_utc_naive(value: dt.datetime) -> dt.datetime:
    """Readers hand over naive UTC datetimes; this converts an aware one."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value

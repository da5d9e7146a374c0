"""Ingest: a dataset's source → canonical records (docs/architecture.md), every input row accounted for.

Streams the dataset reader into a Parquet file in batches, so memory stays flat whatever the corpus size.
Rows outside the dataset's time span are filtered here ("time_outside_span"), for every dataset alike.
Writes records, the quarantine table beside them, and the counts (kept + filtered + quarantined = read).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from drift.datasets import get_dataset
from drift.ledger import Ledger
from drift.params import DatasetParams, dataset_params
from drift.progress import progress
from drift.records import as_utc_naive, payload_key, record_schema
from drift.slicing import slice_edges

BATCH_ROWS = 4096


def _batch(rows: list[dict], schema: pa.Schema, modality: str) -> pa.RecordBatch:
    columns = {
        "id": [r["id"] for r in rows],
        "key": [payload_key(r[modality]) for r in rows],
        "time": [r["time"] for r in rows],
        "label": [r["label"] for r in rows],
    }
    if modality == "text":
        columns["text"] = [r["text"] for r in rows]
    else:
        flat = np.stack([np.asarray(r["image"], dtype=np.uint8).reshape(-1) for r in rows])
        columns["image"] = pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), flat.shape[1])
    return pa.RecordBatch.from_pydict(columns, schema=schema)


def ingest(name: str, cfg: DatasetParams | dict, records_path: Path, quarantine_path: Path) -> dict:
    """Run one dataset's ingest (`cfg`: its section of params.yaml, drift.params or the mapping); returns the
    counts written to metrics/ingest/<name>.json."""
    dataset = get_dataset(name)
    cfg = dataset_params(name, cfg)
    edges, _ = slice_edges(cfg.slices)  # bad slice spec: fail before any work
    start, end = edges[0], edges[-1]
    ledger = Ledger(name, strict=cfg.strict)
    schema = record_schema(dataset.TASK, dataset.MODALITY, len(dataset.label_names(cfg)))
    records_path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = records_path.with_suffix(".partial")
    seen_ids: set[str] = set()
    buffer: list[dict] = []
    try:
        with pq.ParquetWriter(tmp_path, schema) as writer, progress(f"ingest {name}") as bar:
            for row in dataset.read(cfg, ledger):
                bar.advance()
                time = row["time"] = as_utc_naive(row["time"]) if row["time"] is not None else None
                if time is None or not (start <= time < end):
                    ledger.filter("time_outside_span")
                    continue
                if row["id"] in seen_ids:
                    ledger.quarantine(row["id"], "duplicate_id")
                    continue
                seen_ids.add(row["id"])
                ledger.keep()
                buffer.append(row)
                if len(buffer) >= BATCH_ROWS:
                    writer.write_batch(_batch(buffer, schema, dataset.MODALITY))
                    buffer = []
            if buffer:
                writer.write_batch(_batch(buffer, schema, dataset.MODALITY))
    except BaseException:
        tmp_path.unlink(missing_ok=True)  # strict mode or a crash: no half-written file left behind
        raise
    tmp_path.replace(records_path)  # a killed ingest never leaves a half-written records file behind
    bad = pa.table({"where": [r["where"] for r in ledger.bad_rows], "reason": [r["reason"] for r in ledger.bad_rows],
                    "raw": [r["raw"] for r in ledger.bad_rows]},
                   schema=pa.schema([("where", pa.string()), ("reason", pa.string()), ("raw", pa.string())]))
    pq.write_table(bad, quarantine_path)
    return {"dataset": name, **ledger.counts(), "span": [str(start.date()), str(end.date())]}

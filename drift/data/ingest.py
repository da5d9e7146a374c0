"""Ingest: a dataset's source → canonical records (docs/architecture.md), every input row accounted for.

Streams the dataset reader into a Parquet file in batches, so memory stays flat whatever the corpus size. Rows
outside the dataset's time span are filtered here ("time_outside_span"), for every dataset alike. Writes
records, the quarantine table beside them, and the counts (kept + filtered + quarantined = read), per file
too, with a warning for each file whose rows vanished (drift.data.ledger); a full disk leaves neither file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from drift.core.dataset_registry import dataset_info
from drift.core.errors import disk_full, is_disk_full
from drift.core.params import DatasetParams
from drift.core.progress import progress
from drift.data.datasets import get_dataset
from drift.data.datasets._fast import prefetched
from drift.data.ledger import Ledger
from drift.data.records import as_utc_naive, payload_key, record_schema
from drift.protocol.slicing import slice_edges

BATCH_ROWS = 4096
EPOCH = dt.datetime(1970, 1, 1)
# epoch seconds of 2001-2128 read as milliseconds land before this: such times outside a later span are
# counted
SECONDS_END = dt.datetime(1970, 3, 1)


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
        dtype = schema.field("image").type.value_type.to_pandas_dtype()  # uint8, or float32 (record_schema)
        flat = np.stack([np.asarray(r["image"], dtype=dtype).reshape(-1) for r in rows])
        columns["image"] = pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), flat.shape[1])
    return pa.RecordBatch.from_pydict(columns, schema=schema)


def fast_default() -> bool:
    """The fast path unless DRIFT_INGEST_FAST=0 (the line-by-line baseline)."""
    return os.environ.get("DRIFT_INGEST_FAST", "1") != "0"


def ingest(
    name: str, cfg: DatasetParams, records_path: Path, quarantine_path: Path, fast: bool | None = None
) -> dict:
    """Run one dataset's ingest (`cfg`: its section of params.yaml as its module's PARAMS); returns the
    counts written to metrics/ingest/<name>.json.

    `fast` (default: fast_default()) reads a dataset that has `read_batches` with Arrow's JSON reader in large
    chunks (drift.data.datasets._fast); the records, the quarantine and the counts are the line-by-line
    path's."""
    dataset, info = get_dataset(name, cfg), dataset_info(name, cfg)
    fast = fast_default() if fast is None else fast
    edges, _ = slice_edges(cfg.slices)  # bad slice spec: fail before any work
    start, end = edges[0], edges[-1]
    ledger = Ledger(name, strict=cfg.strict)
    label_names = dataset.label_names(cfg)
    slicing = cfg.model_dump(include=set(DatasetParams.model_fields))  # what the slice stage reads
    schema = record_schema(
        info.task,
        info.modality,
        len(label_names),
        label_names=label_names,
        slicing=slicing,
        image_dtype=getattr(cfg, "pixels", "uint8"),
    )  # yearbook.pixels, synth-portraits.pixels
    records_path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = records_path.with_suffix(".partial")
    seen_ids: set[str] = set()
    keep_duplicates = getattr(cfg, "keep_duplicates", False)  # a dataset that keeps repeated rows (amazon)
    buffer: list[dict] = []
    data_span: list = [None, None]  # the kept rows' first and last time
    try:
        with pq.ParquetWriter(tmp_path, schema) as writer, progress(f"ingest {name}") as bar:
            rows: Iterable[dict]
            if fast and hasattr(dataset, "read_batches") and info.modality == "text":  # Batches hold text
                data_span = _ingest_batches(
                    dataset.read_batches(cfg),
                    (start, end),
                    ledger,
                    seen_ids,
                    writer,
                    schema,
                    bar,
                    keep_duplicates,
                )
                rows = ()
            else:
                rows = dataset.read(cfg, ledger)
            for row in rows:
                bar.advance()
                time = row["time"] = as_utc_naive(row["time"]) if row["time"] is not None else None
                if time is None or not (start <= time < end):
                    seconds_like = time is not None and start > SECONDS_END and EPOCH <= time < SECONDS_END
                    ledger.filter("time_outside_span", seconds_like=int(seconds_like))
                    continue
                if row["id"] in seen_ids:
                    if not keep_duplicates:
                        ledger.quarantine(row["id"], "duplicate_id", duplicate_raw(row.get("text"), time))
                        continue
                    row["id"] = repeat_id(row["id"], seen_ids)
                seen_ids.add(row["id"])
                ledger.keep()
                data_span = [min(data_span[0] or time, time), max(data_span[1] or time, time)]
                buffer.append(row)
                if len(buffer) >= BATCH_ROWS:
                    writer.write_batch(_batch(buffer, schema, info.modality))
                    buffer = []
            if buffer:
                writer.write_batch(_batch(buffer, schema, info.modality))
    except BaseException as e:
        tmp_path.unlink(missing_ok=True)  # strict mode or a crash: no half-written file left behind
        if isinstance(e, OSError) and is_disk_full(e):
            raise disk_full(records_path) from None
        raise
    bad = pa.table(
        {
            "where": [r["where"] for r in ledger.bad_rows],
            "reason": [r["reason"] for r in ledger.bad_rows],
            "raw": [r["raw"] for r in ledger.bad_rows],
        },
        schema=pa.schema([("where", pa.string()), ("reason", pa.string()), ("raw", pa.string())]),
    )
    bad_tmp = quarantine_path.with_name(quarantine_path.name + ".partial")
    try:
        pq.write_table(bad, bad_tmp)
    except BaseException as e:
        bad_tmp.unlink(missing_ok=True)
        tmp_path.unlink(missing_ok=True)
        if isinstance(e, OSError) and is_disk_full(e):
            raise disk_full(quarantine_path, needed=bad.nbytes) from None
        raise
    tmp_path.replace(records_path)  # a killed ingest never leaves a half-written records file behind
    bad_tmp.replace(quarantine_path)
    # span: the configured one (slices' edges); data_span: the first and last time of the rows kept
    return {
        "dataset": name,
        **ledger.counts(),
        "span": [str(start.date()), str(end.date())],
        "data_span": [None if t is None else str(t) for t in data_span],
    }


def repeat_id(row_id: str, seen_ids: set[str]) -> str:
    """The id a kept repeat of `row_id` gets: "<id>#<n>" with the smallest n >= 2 not yet seen."""
    n = 2
    while f"{row_id}#{n}" in seen_ids:
        n += 1
    return f"{row_id}#{n}"


def duplicate_raw(text, time) -> str:
    """What the quarantine keeps of a duplicate row: its text (an image row: its time), so the user sees what
    was dropped."""
    return text if isinstance(text, str) else f"time {time}"


def _ingest_batches(
    batches,
    span,
    ledger: Ledger,
    seen_ids: set[str],
    writer,
    schema: pa.Schema,
    bar,
    keep_duplicates: bool = False,
) -> list:
    """The driver's loop above on drift.data.datasets._fast Batches: the same span filter, duplicate check and
    BATCH_ROWS-row batches written, with the reader's bad rows and the duplicates quarantined in line order.
    Returns the kept rows' [first, last] time."""
    data_span: list = [None, None]
    start, end = (pa.scalar(t, pa.timestamp("us")) for t in span)
    pending: list[pa.Table] = []  # kept rows not yet written, fewer than BATCH_ROWS
    n_pending = 0
    # Arrow parses the next chunk and Parquet compresses the last batch while this thread hashes: one core
    # each; pyarrow releases the GIL. One write in flight and one chunk ahead keep memory bounded.
    write_thread, last_write = ThreadPoolExecutor(max_workers=1), None
    epoch, seconds_end = (pa.scalar(t, pa.timestamp("us")) for t in (EPOCH, SECONDS_END))
    for batch in prefetched(batches):
        # a damaged file's Batch comes after its rows (which counted the file, for a reader that counts files)
        if batch.damaged is not None:
            ledger.damaged(batch.source, batch.damaged)
        elif batch.source:
            ledger.file(batch.source)
        if batch.records is None:
            continue
        table = batch.records
        bar.advance(table.num_rows + len(batch.bad) + sum(batch.filtered.values()))
        for rule, n in batch.filtered.items():
            ledger.filter(rule, n)
        in_span = pc.and_(pc.greater_equal(table["time"], start), pc.less(table["time"], end))
        in_span = pc.fill_null(in_span, False)
        n_out = table.num_rows - (pc.sum(in_span).as_py() or 0)
        if n_out:
            seconds_like = 0
            if span[0] > SECONDS_END:
                in_1970 = pc.and_(pc.greater_equal(table["time"], epoch), pc.less(table["time"], seconds_end))
                seconds_like = pc.sum(pc.fill_null(in_1970, False)).as_py() or 0
            ledger.filter("time_outside_span", n_out, seconds_like)
            table = table.filter(in_span)
        duplicate, ids = [], table["id"].to_pylist()
        for i, row_id in enumerate(ids):
            repeat = row_id in seen_ids
            if repeat and keep_duplicates:
                ids[i] = row_id = repeat_id(row_id, seen_ids)
                repeat = False
            duplicate.append(repeat)
            seen_ids.add(row_id)
        if keep_duplicates:
            table = table.set_column(table.schema.get_field_index("id"), "id", pa.array(ids, pa.string()))
        bad = batch.bad
        if any(duplicate):
            dup_lines = pc.filter(table["line"], pa.array(duplicate)).to_pylist()
            dup_ids = pc.filter(table["id"], pa.array(duplicate)).to_pylist()
            dup_raw = [
                duplicate_raw(text, time)
                for text, time in zip(
                    pc.filter(table["text"], pa.array(duplicate)).to_pylist()
                    if "text" in table.column_names
                    else [None] * len(dup_ids),
                    pc.filter(table["time"], pa.array(duplicate)).to_pylist(),
                )
            ]
            bad = sorted(
                bad
                + [
                    (line, row_id, "duplicate_id", raw)
                    for line, row_id, raw in zip(dup_lines, dup_ids, dup_raw)
                ],
                key=lambda b: b[0],
            )  # stable: one line has one row
            table = table.filter(pc.invert(pa.array(duplicate)))
        for _, where, reason, raw in bad:  # in line order, as the line-by-line path quarantines them
            ledger.quarantine(where, reason, raw)
        ledger.keep(table.num_rows)
        if table.num_rows:
            first, last = (v.as_py() for v in pc.min_max(table["time"]).values())
            data_span = [min(data_span[0] or first, first), max(data_span[1] or last, last)]
        pending.append(table.drop_columns(["line"]))
        n_pending += table.num_rows
        while n_pending >= BATCH_ROWS:
            ready = pa.concat_tables(pending)
            record_batch = _arrow_batch(ready.slice(0, BATCH_ROWS), schema)
            if last_write is not None:
                last_write.result()
            last_write = write_thread.submit(writer.write_batch, record_batch)
            pending, n_pending = [ready.slice(BATCH_ROWS)], n_pending - BATCH_ROWS
    if last_write is not None:
        last_write.result()
    write_thread.shutdown()
    if n_pending:
        writer.write_batch(_arrow_batch(pa.concat_tables(pending), schema))
    return data_span


def _arrow_batch(table: pa.Table, schema: pa.Schema) -> pa.RecordBatch:
    """Records of the fast path as the Parquet batch _batch writes: `key` from the text, the record schema."""
    text = table["text"].combine_chunks()
    # payload_key on the UTF-8 bytes Arrow already holds: no Python strings made, no encode
    offsets = np.frombuffer(text.buffers()[1], np.int32)[text.offset : text.offset + len(text) + 1].tolist()
    data, sha256 = memoryview(text.buffers()[2] or b""), hashlib.sha256
    keys = [sha256(data[offsets[i] : offsets[i + 1]]).hexdigest() for i in range(len(text))]
    columns = {
        "id": table["id"],
        "key": pa.array(keys, pa.string()),
        "time": table["time"],
        "label": table["label"],
        "text": text,
    }
    return pa.Table.from_pydict(columns, schema=schema).combine_chunks().to_batches()[0]

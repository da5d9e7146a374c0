"""The fast path of the JSON-lines readers (amazon, arxiv): Arrow's multi-threaded JSON parser on large byte
chunks, the checks and field extraction as column operations, the line-by-line reader only for rows it must
see.

A reader with a fast path defines SCHEMA (the Arrow schema of its fields: a wrong type, a duplicate key or
broken JSON fails the chunk's parse), `vectorise` (table -> records kept, keep and fallback masks, {rule: n}
filtered) and `record` (the line reader's per-row function). Fallback rows go through `record`, so their
quarantine reason, `where` and raw text are the line reader's; a chunk that does not parse is halved until it
does, and a piece of LEAF_LINES or fewer is read line by line. Batches come in file order and
drift.data.ingest merges their bad rows by line, so the quarantine order and strict mode's stopping row are
the line reader's."""

from __future__ import annotations

import io
import os
import queue
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from drift.data.datasets._io import (
    DamagedFile,
    damage,
    loads,
    open_binary,
    raise_damage,
)

CHUNK_BYTES = 32 << 20  # bytes parsed at a time: memory stays bounded whatever the file size
BLOCK_BYTES = 1 << 20  # Arrow's unit of work per thread inside a chunk
LEAF_LINES = 64  # a failing piece this small is read line by line

# Python's str.isspace() characters: str.split() and str.strip() use these, so regexes built from them decide
# "empty" and collapse whitespace exactly as normalize_ws and the old checks do (tests check the list).
PY_WHITESPACE = [
    0x09,
    0x0A,
    0x0B,
    0x0C,
    0x0D,
    0x1C,
    0x1D,
    0x1E,
    0x1F,
    0x20,
    0x85,
    0xA0,
    0x1680,
    *range(0x2000, 0x200B),
    0x2028,
    0x2029,
    0x202F,
    0x205F,
    0x3000,
]
WS_CLASS = "".join(f"\\x{{{c:x}}}" for c in PY_WHITESPACE)  # RE2 escapes, for inside [...]
NON_WHITESPACE = f"[^{WS_CLASS}]"
# Python whitespace that Arrow's ascii_split_whitespace does not split at: a row holding one is row_record's
ASCII_WHITESPACE = (0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20)
RARE_WHITESPACE = "[" + "".join(f"\\x{{{c:x}}}" for c in PY_WHITESPACE if c not in ASCII_WHITESPACE) + "]"
TOP_LEVEL_NULL = re.compile(rb"\n[ \t\r\x0b\x0c]*null")


def or_empty(text: pa.ChunkedArray) -> pa.ChunkedArray:
    """Nulls as "" (a missing title is an empty one); fill_null copies a whole string column, so only if
    needed."""
    return pc.fill_null(text, "") if text.null_count else text


@dataclass
class Batch:
    """One piece of a file: its kept records (columns id, time, label, text and `line`, ascending), the bad
    rows as (line, where, reason, raw), and the rows filtered by each rule."""

    records: pa.Table | None  # None: a marker (a file starts, or ends damaged)
    bad: list[tuple[int, str, str, str | None]]
    filtered: Counter = field(default_factory=Counter)
    source: str = ""  # the file's name: the ledger counts per file
    damaged: str | None = None  # a damaged file's reason (no records then): drift.data.ingest quarantines it


class Collector:
    """Stands in for the Ledger when `record` runs on a fallback row: keeps the bad rows with their line."""

    def __init__(self):
        self.line = 0
        self.bad: list[tuple[int, str, str, str | None]] = []
        self.filtered: Counter = Counter()

    def filter(self, rule: str) -> None:
        self.filtered[rule] += 1

    def quarantine(self, where: str, reason: str, raw: str | None = None) -> None:
        self.bad.append((self.line, where, reason, raw))


def iter_chunks(path: Path, chunk_bytes: int | None = None) -> Iterator[tuple[int, bytes]]:
    """(number of the chunk's first line, bytes of whole lines), streamed; a .gz is decompressed as it goes."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES  # read at call time, so a test can make chunks small
    first_line = 1
    with open_binary(path) as f:
        while True:
            chunk = f.read(chunk_bytes)
            if not chunk:
                raise_damage(f, path)  # a damaged .gz: every chunk before the damage served, then DamagedFile
                return
            if not chunk.endswith(b"\n"):
                chunk += f.readline()  # finish the last line; at the end of the file this adds nothing
                if not chunk.endswith(b"\n") and damage(f):  # the cut end of a damaged stream: no row
                    chunk = chunk[: chunk.rfind(b"\n") + 1]
                    if not chunk:
                        continue
            yield first_line, chunk
            first_line += chunk.count(b"\n")


def split_lines(chunk: bytes) -> list[bytes]:
    """The chunk's lines with their newline, as iter_json_lines sees them."""
    return chunk.splitlines(keepends=True) if b"\r" not in chunk else _lines_on_newline(chunk)


def _lines_on_newline(chunk: bytes) -> list[bytes]:
    # bytes.splitlines also cuts at a lone \r; a file object (the old path) cuts only at \n
    lines = [line + b"\n" for line in chunk.split(b"\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def is_utf8(chunk: bytes) -> bool:
    if chunk.isascii():
        return True
    offsets = pa.py_buffer(np.array([0, len(chunk)], np.int64))
    try:  # the chunk as one Arrow string, not copied; Arrow's check is ten times faster than bytes.decode
        pa.Array.from_buffers(pa.large_string(), 1, [None, offsets, pa.py_buffer(chunk)]).validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def parse(chunk: bytes, schema: pa.Schema) -> pa.Table | None:
    """The chunk as a table of `schema`'s fields, or None if Arrow refuses it (bad JSON or a wrong type)."""
    if chunk.lstrip(b" \t\r\n\x0b\x0c").startswith(b"null") or TOP_LEVEL_NULL.search(chunk):
        return None  # pyarrow 26's reader crashes (SIGSEGV) on a `null` line at the start of a block
    if not is_utf8(chunk):
        return None  # Arrow checks the encoding of the fields it reads only; orjson refuses the whole line
    try:
        return pj.read_json(
            io.BytesIO(chunk),
            read_options=pj.ReadOptions(use_threads=True, block_size=BLOCK_BYTES),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
    except (
        pa.ArrowException,
        ValueError,
    ):  # ArrowInvalid, and UnicodeDecodeError for bytes that are not UTF-8
        return None


def parser_threads() -> int:
    """Arrow's threads for parsing: DRIFT_INGEST_THREADS, else every core. Arrow would otherwise take
    OMP_NUM_THREADS, which the training side sets to 1; the records do not depend on the thread count."""
    return int(os.environ.get("DRIFT_INGEST_THREADS") or os.cpu_count() or 1)


def fast_batches(
    path: Path,
    schema: pa.Schema,
    vectorise: Callable,
    record: Callable,
    records_schema: pa.Schema,
    chunk_bytes: int | None = None,
) -> Iterator[Batch]:
    """Batches of one JSON-lines file, in file order (see the module doc); a damaged .gz ends with a Batch
    that says so (`damaged`), after the batches of the rows before the damage."""
    if pa.cpu_count() != parser_threads():
        pa.set_cpu_count(parser_threads())
    yield Batch(None, [], source=path.name)  # the file starts: counted even if it holds no rows
    try:
        for first_line, chunk in iter_chunks(path, chunk_bytes):
            for batch in _pieces(path, first_line, chunk, None, schema, vectorise, record, records_schema):
                batch.source = path.name
                yield batch
    except DamagedFile as e:  # the rows before the damage are in the batches above
        yield Batch(None, [], source=path.name, damaged=e.reason)


def _pieces(path, first_line, chunk, lines, schema, vectorise, record, records_schema):
    """Parses a piece; on failure cuts it in two at a line boundary and tries each half.

    `lines` is the piece cut into lines, or None until needed (most chunks never need it)."""
    table = parse(chunk, schema)
    row_lines = None
    if table is not None:
        if table.num_rows == chunk.count(b"\n") + (not chunk.endswith(b"\n")):
            row_lines = pa.array(range(first_line, first_line + table.num_rows), pa.int64())
        else:  # Arrow skips blank lines too: number the rows by the non-blank lines, if that accounts for all
            lines = lines if lines is not None else split_lines(chunk)
            numbers = [first_line + i for i, line in enumerate(lines) if line.strip()]
            if len(numbers) == table.num_rows:
                row_lines = pa.array(numbers, pa.int64())
    if row_lines is not None:
        yield _batch(path, first_line, chunk, lines, table, row_lines, vectorise, record, records_schema)
        return
    lines = lines if lines is not None else split_lines(chunk)
    if len(lines) <= LEAF_LINES:
        yield _line_by_line(path, first_line, lines, record, records_schema)
        return
    half = len(lines) // 2
    for start, part in ((first_line, lines[:half]), (first_line + half, lines[half:])):
        yield from _pieces(path, start, b"".join(part), part, schema, vectorise, record, records_schema)


def _batch(path, first_line, chunk, lines, table, row_lines, vectorise, record, records_schema) -> Batch:
    """Vectorised records for the rows the columns decide, `record` for the others, merged in line order."""
    records, keep, fallback, filtered = vectorise(table)
    records = records.append_column("line", row_lines.filter(keep))
    collector = Collector()
    collector.filtered.update(filtered)
    if pc.any(fallback).as_py():  # the rows row_record must see
        lines = lines if lines is not None else split_lines(chunk)
        by_line = {first_line + i: line for i, line in enumerate(lines)}
        others = pc.filter(row_lines, fallback).to_pylist()
        records = pa.concat_tables(
            [records, _rows_one_by_one(path, others, by_line, record, collector, records_schema)]
        )
        records = records.take(pc.sort_indices(records["line"]))
    return Batch(records, collector.bad, +collector.filtered)


def _line_by_line(path, first_line, lines, record, records_schema) -> Batch:
    collector = Collector()
    numbers = [first_line + i for i, line in enumerate(lines) if line.strip()]
    by_line = {first_line + i: line for i, line in enumerate(lines)}
    records = _rows_one_by_one(path, numbers, by_line, record, collector, records_schema)
    return Batch(records, collector.bad, +collector.filtered)


def _rows_one_by_one(path, numbers, by_line, record, collector, records_schema) -> pa.Table:
    """The old path's per-row function on the given lines; its records as a table with `line`."""
    rows, kept_lines = [], []
    for lineno in numbers:
        raw = by_line[lineno]
        try:
            value = loads(raw)
        except ValueError:  # as iter_json_lines
            value = None
        collector.line = lineno
        row = record(value, f"{path.name}:{lineno}", raw, collector)
        if row is not None:
            rows.append(row)
            kept_lines.append(lineno)
    columns = {name: [r[name] for r in rows] for name in records_schema.names}
    columns["line"] = kept_lines
    return pa.Table.from_pydict(columns, schema=records_schema.append(pa.field("line", pa.int64())))


def prefetched(items: Iterator, depth: int = 1) -> Iterator:
    """The items of an iterator computed in a thread, `depth` ahead of the consumer; its errors re-raised
    here. Stops the thread when the consumer stops (strict mode, an error downstream)."""
    box: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def produce():
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        box.put((item, None), timeout=0.1)
                        break
                    except queue.Full:
                        pass
                if stop.is_set():
                    return
            box.put((done, None))
        except BaseException as error:  # handed to the consumer
            box.put((done, error))

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        while True:
            item, error = box.get()
            if item is done:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        thread.join()

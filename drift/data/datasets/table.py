"""A dataset of your own, configured in params.yaml, not coded: any time-stamped table read with polars.

`datasets.<name>: {input: <file or folder>}` and a section `<name>:` (TableParams, `kind: table`; `drift init`
writes both): a Parquet, CSV or JSON-lines file (gzip too), a folder of them (`files`: a glob), or a
`save_to_disk` folder. The section names the time column and its encoding, the input (text columns joined in
order, or an image column of bytes, paths relative to the source, or arrays), the label column(s) and the
task. Each file is scanned lazily with an explicit schema and streamed in CHUNK_ROWS-row batches, so memory
stays bounded, and a .gz expands to at most `max_expanded_bytes` with at most `max_blank_lines` blank lines in
a row (else the file is damaged_file from there). A bad row is quarantined with one reason, the first met
(docs/how-to/tables.md lists them); image paths stay inside their root and are opened without following a
symlink that appears after the check, regular files only; blank lines are no rows. Images become 3x32x32 RGB
(resized), as the built-in image datasets.
"""

from __future__ import annotations

import codecs
import glob as globbing
import io
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, ClassVar, cast

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image
from pydantic import Field, model_validator

from drift.core.errors import DriftError
from drift.core.params import DatasetParams, Label, Names, PositiveInt, choice
from drift.data.datasets._fast import Batch
from drift.data.datasets._io import (
    NotAFile,
    OutsideRoot,
    damage,
    loads,
    open_binary,
    open_inside,
    raw_text,
)

CHUNK_ROWS = 50_000  # rows per streamed batch: what bounds the reader's memory
IMAGE_SHAPE = (3, 32, 32)
TASKS = ("binary", "multiclass", "regression", "multilabel")
TIME_ENCODINGS = ("timestamp", "date", "year", "epoch_s", "epoch_ms")
IMAGE_ENCODINGS = ("bytes", "path", "array")
FORMATS = ("parquet", "csv", "jsonl", "arrow")
SUFFIXES = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".tsv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".arrow": "arrow",
}
HF_MARKERS = ("state.json", "dataset_info.json")  # what `Dataset.save_to_disk` writes beside its Arrow files
# what one file may cost, whoever wrote it (max_expanded_bytes, max_blank_lines): a .gz of 10 GiB expanded is
# a large table, one of more a decompression bomb or a file to split; 10,000 blank lines in a row are no
# table's
MAX_EXPANDED_BYTES = 10 << 30
MAX_BLANK_LINES = 10_000
# plausible_years: [first, end) of the years a time may fall in; beyond them a time is a sentinel (0001-01-01,
# 9999-12-31) or a unit error, never a moment of a corpus: quarantined, so no span or slice reaches them
PLAUSIBLE_YEARS = [1000, 3000]
# label values that mean "missing": pandas' default na_values (what to_csv / read_csv write and read as
# missing)
NA_LABELS = frozenset(["#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN"])
NA_LABELS |= {"<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}
TEXT_CHUNK = 1 << 20  # bytes of a text file checked at a time


class TableParams(DatasetParams):
    """params.yaml `<name>:` of a configured table (`kind: table`)."""

    SECTION: ClassVar[str] = "<table>"
    kind: Annotated[str, choice("table")] = "table"
    source: str  # what the reader reads: datasets.<name>.input (joined with files); never written here
    files: str | None = None  # a glob of the input folder's files; null: every table file
    format: Annotated[str, choice(*FORMATS)] | None = None  # null: each file's suffix (.gz stripped)
    csv_separator: str = ","
    id: str | None = None  # the id column; null: <file>:<row>
    time: str  # the time column
    time_encoding: Annotated[str, choice(*TIME_ENCODINGS)] = "timestamp"
    time_format: str | None = None  # strptime format of a date or timestamp held as text
    text: Names | None = None  # text columns, joined in this order
    text_separator: str = "\n"
    image: str | None = None  # the image column
    image_encoding: Annotated[str, choice(*IMAGE_ENCODINGS)] = "bytes"
    image_root: str | None = (
        None  # paths: the folder they must stay in (symlinks resolved); null: the source's
    )
    label: Names  # the label column; multilabel: one 0/1 column per label
    task: Annotated[str, choice(*TASKS)]
    # the declared label set; null: every value found, but for missing-value markers (NA_LABELS: NaN, N/A,
    # ...)
    classes: list[Label] | None = None
    # what one file may cost: the bytes a .gz expands to (10 GiB), blank lines in a row (10,000); past either,
    # the file's rows stop there and the file is quarantined as damaged (damaged_file)
    max_expanded_bytes: PositiveInt = MAX_EXPANDED_BYTES
    max_blank_lines: PositiveInt = MAX_BLANK_LINES
    # [first year, year after the last] of a time: outside them a row is quarantined (outside_plausible_years)
    plausible_years: Annotated[list[int], Field(min_length=2, max_length=2)] = PLAUSIBLE_YEARS

    @model_validator(mode="after")
    def _years(self):
        first, end = self.plausible_years
        if not 1 <= first < end <= 10_000:
            raise DriftError(
                f"{self.source}: plausible_years [{first}, {end}] is [first year, year after the last]: "
                f"1 <= first < end <= 10000, e.g. [1000, 3000]"
            )
        return self

    @model_validator(mode="after")
    def _input(self):
        if (self.text is None) == (self.image is None):
            raise DriftError(
                f"{self.source}: a table's section names its input: `text: [columns]` or `image: column`"
                f" (one of them), got {'both' if self.text else 'neither'}"
            )
        if self.task == "multilabel" and len(self.label) < 2:
            raise DriftError("a multilabel table names one 0/1 column per label: `label: [a, b, ...]`")
        if self.task != "multilabel" and len(self.label) != 1:
            raise DriftError(f"a {self.task} table names one label column, got {self.label}")
        if self.classes is not None and self.task == "binary" and len(self.classes) != 2:
            raise DriftError(
                f"a binary table declares 2 classes, got {self.classes}: or set task: multiclass"
            )
        if self.classes is not None and self.task == "multiclass" and len(self.classes) < 3:
            raise DriftError(
                f"a multiclass table declares at least 3 classes, got {self.classes}: or task: binary"
            )
        return self


PARAMS = TableParams
TASK = None  # from the section (drift.core.dataset_registry.dataset_info)
MODALITY = None


# ---------------------------------------------------------------- the source's files


def _format(path: Path, cfg_format: str | None) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    found = SUFFIXES.get(suffixes[-1] if suffixes else "")
    if cfg_format is not None:
        return cfg_format
    if found is None:
        raise DriftError(
            f"{path}: no table format from its suffix: use .parquet, .csv, .jsonl (.gz) or .arrow, "
            f"or set `format:` in its section"
        )
    return found


def source_files(source: str | Path, cfg_format: str | None = None) -> list[tuple[Path, str]]:
    """(file, format) of a source in order: one file, the table files of a folder (recursively, sorted), those
    a glob matches, or a save_to_disk folder's Arrow files in its state.json order."""
    source = str(source)
    if any(ch in source for ch in "*?["):
        paths = sorted(Path(p) for p in globbing.glob(source, recursive=True) if Path(p).is_file())
    elif Path(source).is_dir():
        folder = Path(source)
        if any((folder / m).is_file() for m in HF_MARKERS):
            state = folder / "state.json"
            listed = json.loads(state.read_text()).get("_data_files", []) if state.is_file() else []
            paths = [folder / f["filename"] for f in listed] or sorted(folder.glob("*.arrow"))
            return [(p, "arrow") for p in paths]
        paths = sorted(
            p
            for p in folder.rglob("*")
            if p.is_file()
            and not p.name.startswith((".", "_"))
            and (
                cfg_format
                or SUFFIXES.get(
                    (p.suffixes[-2] if p.suffix == ".gz" and len(p.suffixes) > 1 else p.suffix).lower()
                )
            )
        )
    elif Path(source).is_file():
        paths = [Path(source)]
    else:
        raise DriftError(
            f"no table at {source}: put the file (or folder) there, or point the section's `source` "
            f"(and datasets.<name>.input) at it"
        )
    if not paths:
        raise DriftError(
            f"no table files in {source}: Parquet, CSV or JSON-lines files (gzip too), or Arrow files"
        )
    return [(p, _format(p, cfg_format)) for p in paths]


def source_root(source: str | Path) -> Path:
    """Where relative image paths start: the source folder, a file's folder, a glob's fixed part."""
    source = str(source)
    fixed = Path(source.split("*")[0].split("?")[0].split("[")[0])
    if any(ch in source for ch in "*?["):
        return fixed if source.endswith(("/", "*")) and fixed.is_dir() else fixed.parent
    return fixed if fixed.is_dir() else fixed.parent


BAD_BYTES = "\ufffd"  # what an invalid UTF-8 sequence becomes in a clean copy


@dataclass
class FileNotes:
    """What reading one file found besides its rows: its lines that were not UTF-8 (their rows: invalid_utf8),
    its JSON lines no parser reads (row in the file -> raw line: unreadable_row), and why its rows stop early
    (`damage`: a limit met, a cut or corrupt .gz; the file is quarantined as damaged_file)."""

    invalid_utf8: int = 0
    unreadable: dict[int, str] = field(default_factory=dict)
    damage: str | None = None


@dataclass
class _Scan:
    """What the streamed check of a file saw (text_source): the file to read, and whether it needs a clean
    copy."""

    path: Path
    utf8: bool = True
    blank: bool = False  # a blank line somewhere
    long_run: bool = False  # more than max_blank_lines blank lines in a row: the read stops there


def _expanded_past(path: Path, limit: int) -> str:
    return (
        f"expands past max_expanded_bytes ({limit} bytes): a decompression bomb? its rows after that point are not "
        f"read; raise max_expanded_bytes in its section if {path.name} is genuine"
    )


def _blank_run(limit: int, line: int) -> str:
    return (
        f"more than max_blank_lines ({limit}) blank lines in a row from line {line}: its rows after them are not "
        f"read; raise max_blank_lines in its section if they are genuine"
    )


def text_source(path: Path, fmt: str, cfg: TableParams, tmp: Path, notes: FileNotes) -> Path | None:
    """The file polars reads for `path`, streamed through once (memory stays flat): a .gz expanded into `tmp`,
    at most cfg.max_expanded_bytes; a CSV or JSON-lines file that holds bytes that are not UTF-8, blank lines
    (CSV) or more than cfg.max_blank_lines of them in a row, as its clean_copy. `notes` gets the lines
    repaired and why the file's rows stop early; None when nothing of it can be read (a Parquet or Arrow .gz
    cut short)."""
    text = fmt in ("csv", "jsonl")
    if not text and path.suffix.lower() != ".gz":
        return path
    scan = _scan(path, text, cfg, tmp, notes)
    if notes.damage and (not text or not scan.path.stat().st_size):
        return None
    if scan.utf8 and not scan.long_run and not (scan.blank and fmt == "csv"):
        return scan.path
    return clean_copy(scan.path, fmt, cfg.max_blank_lines, tmp, notes)


def _scan(path: Path, text: bool, cfg: TableParams, tmp: Path, notes: FileNotes) -> _Scan:
    """One streamed pass over the file (a .gz expanded into `tmp`, cut at the limit and at the line end before
    any damage): whether it is UTF-8, holds a blank line, or a run of more than max_blank_lines of them."""
    gz = path.suffix.lower() == ".gz"
    scan = _Scan(temp_file(tmp, "expanded-", Path(path.stem).suffix) if gz else path)
    decoder = codecs.getincrementaldecoder("utf-8")()
    runs = (b"\n" * (cfg.max_blank_lines + 2), b"\r\n" * (cfg.max_blank_lines + 2))
    tail, size, line_end = b"\n", 0, 0  # a line end before the first line: blank lines at the start count
    with open_binary(path) as src, open(scan.path, "wb") if gz else nullcontext() as dst:
        while chunk := src.read(TEXT_CHUNK):
            if gz and size + len(chunk) > cfg.max_expanded_bytes:
                chunk = chunk[: cfg.max_expanded_bytes - size]
                notes.damage = _expanded_past(path, cfg.max_expanded_bytes)
            if text:
                window = tail + chunk
                scan.blank = scan.blank or b"\n\n" in window or b"\n\r\n" in window
                scan.long_run = any(run in window for run in runs)
                tail = window[-len(runs[1]) :]
                scan.utf8 = scan.utf8 and _decodes(decoder, chunk)
            if dst is not None:
                dst.write(chunk)
            if (cut := chunk.rfind(b"\n")) >= 0:
                line_end = size + cut + 1
            size += len(chunk)
            if notes.damage or scan.long_run:
                break
        if notes.damage is None and not scan.long_run:
            notes.damage = damage(src)
            scan.utf8 = scan.utf8 and _decodes(decoder, b"", final=True)
        if dst is not None and text and notes.damage:
            dst.truncate(line_end)  # the cut last line is no row
    return scan


def _decodes(decoder, chunk: bytes, final: bool = False) -> bool:
    try:
        decoder.decode(chunk, final=final)
        return True
    except UnicodeDecodeError:
        return False


def clean_copy(
    path: Path, fmt: str, max_blank_lines: int, tmp: Path, notes: FileNotes, json_rows: str | None = None
) -> Path:
    """A copy of a CSV or JSON-lines file in `tmp`, line by line: blank lines dropped (CSV: outside quoted
    fields), each invalid UTF-8 sequence as U+FFFD (BAD_BYTES; notes.invalid_utf8 counts the lines), up to a
    run of more than `max_blank_lines` blank lines (notes.damage says where). `json_rows`: "mark" replaces
    each line no JSON parser reads by an empty object and keeps it in notes.unreadable by its row; "drop"
    leaves it out."""
    copy = temp_file(tmp, "utf8-", f".{fmt}")
    quoted, run, row = False, 0, 0
    with open(path, "rb") as src, open(copy, "wb") as dst:
        for number, line in enumerate(src, start=1):
            empty = not line.rstrip(b"\r\n")  # what counts in a run (_scan's too)
            if not quoted and (empty if fmt == "csv" else not line.strip()):  # a blank line: no row
                run = run + 1 if empty else 0
                if run > max_blank_lines:
                    notes.damage = _blank_run(max_blank_lines, number - max_blank_lines)
                    break
                continue
            run = 0
            if fmt == "csv" and line.count(b'"') % 2:
                quoted = not quoted
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                line = line.decode("utf-8", errors="replace").encode("utf-8")
                notes.invalid_utf8 += 1
            if json_rows is not None and not _parses(line):
                if json_rows == "drop":
                    continue
                notes.unreadable[row + 1] = raw_text(line)[:2000]
                line = b"{}\n"
            row += 1
            dst.write(line)
    return copy


def _parses(line: bytes) -> bool:
    try:
        loads(line)
        return True
    except ValueError:  # orjson's and json's JSONDecodeError: malformed, or nested deeper than 1024 levels
        return False


def temp_file(tmp: Path, prefix: str, suffix: str) -> Path:
    """A new empty file in `tmp` (removed with it)."""
    handle, name = tempfile.mkstemp(dir=tmp, prefix=prefix, suffix=suffix)
    os.close(handle)
    return Path(name)


def utf8_checked(batch: pa.RecordBatch) -> tuple[pa.RecordBatch, int]:
    """(the batch with each string column that holds invalid UTF-8 as binary, the number of rows with such a
    cell): Parquet does not promise valid strings, and polars refuses a whole file over one bad cell. A valid
    column costs one C++ validation; only an invalid one is checked cell by cell."""
    bad = np.zeros(batch.num_rows, dtype=bool)
    columns = []
    for spec, column in zip(batch.schema, batch.columns):
        if pa.types.is_string(spec.type) or pa.types.is_large_string(spec.type):
            try:
                column.validate(full=True)
            except pa.ArrowInvalid:
                column = column.cast(
                    pa.large_binary() if pa.types.is_large_string(spec.type) else pa.binary()
                )
                for i, value in enumerate(column.to_pylist()):
                    if value is not None and not _is_utf8(value):
                        bad[i] = True
        columns.append(column)
    if not bad.any():
        return batch, 0
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names), int(bad.sum())


def arrow_frame(data: pa.RecordBatch | pa.Table) -> pl.DataFrame:
    """polars' frame of an Arrow batch or table (from_arrow is typed DataFrame | Series; these are frames)."""
    return cast(pl.DataFrame, pl.from_arrow(data))


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def scan_batches(
    path: Path,
    fmt: str,
    columns: list[str],
    cfg: TableParams,
    tmp: Path,
    chunk_rows: int = CHUNK_ROWS,
    notes: FileNotes | None = None,
) -> Iterator[pl.DataFrame]:
    """The file's `columns` in batches of at most chunk_rows rows: a lazy scan with an explicit schema (text
    files: every column a string, parsed here; Parquet and Arrow: their own types), streamed, from its
    text_source. A Parquet string column holding bytes that are not UTF-8 comes as binary (utf8_checked); a
    JSON-lines file polars refuses (a line malformed or nested too deep: it is parsed once before a row is
    served) is read from its clean_copy with such lines as empty rows. `notes` (when given) gets what the read
    found besides the rows: the lines (Parquet: rows of `columns`) that were not UTF-8, the unreadable JSON
    lines, why the rows stop early."""
    notes = FileNotes() if notes is None else notes
    plain = text_source(path, fmt, cfg, tmp, notes)
    if plain is None:
        return
    if fmt in ("arrow", "parquet"):
        yield from _columnar_batches(path, plain, fmt, columns, chunk_rows, notes)
        return
    if fmt == "csv":
        lazy = pl.scan_csv(plain, infer_schema=False, separator=cfg.csv_separator, truncate_ragged_lines=True)
        _check_columns(path, _names(path, lazy), columns)
        yield from _polars_batches(path, lazy.select(columns), chunk_rows)
        return
    schema = {
        c: (pl.List(pl.Int64) if c == cfg.image and cfg.image_encoding == "array" else pl.String)
        for c in columns
    }
    lazy = pl.scan_ndjson(plain, schema=schema, ignore_errors=True)
    try:  # polars refuses a whole file for one line, after serving rows it may have misplaced: parse it first
        lazy.select(pl.all().null_count()).collect()
    except pl.exceptions.PolarsError:
        plain = clean_copy(plain, fmt, cfg.max_blank_lines, tmp, notes, json_rows="mark")
        lazy = pl.scan_ndjson(plain, schema=schema, ignore_errors=True)
    yield from _polars_batches(path, lazy, chunk_rows)


def _columnar_batches(
    path: Path, plain: Path, fmt: str, columns: list[str], chunk_rows: int, notes: FileNotes
) -> Iterator[pl.DataFrame]:
    """A Parquet or Arrow file's batches with utf8_checked's binary columns; notes count their bad rows."""
    if fmt == "arrow":  # save_to_disk writes the Arrow IPC stream format
        with pa.memory_map(str(plain)) as f:
            reader = pa.ipc.open_stream(f)
            _check_columns(path, reader.schema.names, columns)
            for batch in reader:
                batch, bad = utf8_checked(batch.select(columns))
                notes.invalid_utf8 += bad
                if batch.num_rows:
                    yield from arrow_frame(batch).iter_slices(chunk_rows)
        return
    file = pq.ParquetFile(
        plain
    )  # pyarrow's reader, which leaves strings unchecked: utf8_checked finds the bad cells
    _check_columns(path, file.schema_arrow.names, columns)
    for batch in file.iter_batches(batch_size=chunk_rows, columns=columns):
        batch, bad = utf8_checked(batch)
        notes.invalid_utf8 += bad
        if batch.num_rows:
            yield arrow_frame(batch)


def _polars_batches(path: Path, lazy: pl.LazyFrame, chunk_rows: int) -> Iterator[pl.DataFrame]:
    """A lazy text scan's batches; what polars still cannot read stops with one line naming the file."""
    try:
        for frame in lazy.collect_batches(chunk_size=chunk_rows):
            if frame.height:
                yield frame
    except pl.exceptions.PolarsError as e:
        raise _unreadable(path, e) from None


def _names(path: Path, lazy: pl.LazyFrame) -> list[str]:
    try:
        return lazy.collect_schema().names()
    except pl.exceptions.PolarsError as e:
        raise _unreadable(path, e) from None


def _unreadable(path: Path, error: Exception) -> DriftError:
    reason = " ".join(str(error).split("\n")[0].split())
    return DriftError(
        f"{path}: polars cannot read it ({reason}): fix the file, or set `format:` or `csv_separator:` in its "
        f"section if they are wrong"
    )


def _check_columns(path: Path, names: list[str], columns: list[str]) -> None:
    missing = [c for c in columns if c not in names]
    if missing:
        raise DriftError(
            f"{path} has no column {', '.join(map(repr, missing))}: its columns are {', '.join(names)}"
            f" (fix the section's column names, or run `drift init` again)"
        )


# ---------------------------------------------------------------- parsing one batch


def _utc_naive(s: pl.Series) -> pl.Series:
    if isinstance(s.dtype, pl.Datetime) and s.dtype.time_zone is not None:
        s = s.dt.convert_time_zone("UTC").dt.replace_time_zone(None)
    return s.cast(pl.Datetime("us"))


def parse_time(s: pl.Series, encoding: str, fmt: str | None) -> pl.Series:
    """The time column as naive UTC Datetime("us"); null where it cannot be read."""
    dtype = s.dtype
    if encoding in ("timestamp", "date") and (isinstance(dtype, pl.Datetime) or dtype == pl.Date):
        return _utc_naive(s)
    if encoding == "year":
        number = s.cast(pl.String).str.strip_chars().cast(pl.Float64, strict=False)
        whole = (number >= 1) & (number <= 9999) & (number == number.floor())
        year = pl.select(pl.when(whole).then(number).otherwise(None).cast(pl.Int32)).to_series()
        return pl.select(pl.datetime(year, 1, 1, time_unit="us")).to_series()
    if encoding in ("epoch_s", "epoch_ms"):
        value = s.cast(pl.String).str.strip_chars().cast(pl.Float64, strict=False)
        micros = value * (1e6 if encoding == "epoch_s" else 1e3)
        ok = micros.is_finite() & (micros.abs() < 2.5e17)  # within years 1 .. 9999
        micros = pl.select(pl.when(ok).then(micros.round()).otherwise(None).cast(pl.Int64)).to_series()
        return micros.cast(pl.Datetime("us"))
    text = s.cast(pl.String).str.strip_chars()
    if encoding == "date":
        return text.str.to_date(fmt, strict=False).cast(pl.Datetime("us"))
    parsed = _timestamps(text, fmt)
    if fmt is None:  # the format is inferred from the first value: read the others that differ in rounds
        for _ in range(MIXED_FORMATS):
            rest = parsed.is_null() & text.is_not_null() & (text != "")
            if not rest.any():
                break
            index = np.flatnonzero(rest.to_numpy())
            again = _timestamps(text.gather(index), None)
            if not again.is_not_null().any():
                break
            parsed = parsed.scatter(index, again)
    return parsed


MIXED_FORMATS = 4  # timestamp formats one column may mix (naive, with an offset, with Z, ...)


def _timestamps(text: pl.Series, fmt: str | None) -> pl.Series:
    """Text timestamps as naive UTC Datetime("us"): an offset or `Z` converted to UTC; null where unreadable."""
    try:
        return _utc_naive(text.str.to_datetime(fmt, strict=False, time_unit="us"))
    except (
        pl.exceptions.ComputeError
    ):  # a format inferred from the first value fits none: read each on its own
        return pl.Series([_one_timestamp(v) for v in text.to_list()], dtype=pl.Datetime("us"))


def _one_timestamp(value):
    try:
        return _utc_naive(pl.Series([value]).str.to_datetime(strict=True, time_unit="us"))[0]
    except Exception:  # noqa: BLE001 (any unreadable value is a bad time)
        return None


def _class_text(s: pl.Series) -> pl.Series:
    """Label values as the text classes are compared by: integral floats as integers, booleans as true/false."""
    if s.dtype.is_float():
        integral = s.is_not_null() & (s == s.floor())
        return pl.select(
            pl.when(integral)
            .then(s.cast(pl.Int64, strict=False).cast(pl.String))
            .otherwise(s.cast(pl.String))
        ).to_series()
    return s.cast(pl.String).str.strip_chars()


def missing_label(text: pl.Series, declared: list[str] | None = None) -> pl.Series:
    """Whether each label value (as text) is missing: null, empty, or a missing-value marker (NA_LABELS: NaN,
    N/A, None, ...) that the `declared` classes do not name."""
    markers = sorted(NA_LABELS - set(declared or []))
    return (text.is_null() | (text == "") | text.is_in(markers)).fill_null(True)


def parse_label(frame: pl.DataFrame, cfg: TableParams, classes: list[str]) -> tuple[pl.Series, pl.Series]:
    """(label, reason): the label as the records hold it (class index, rating, or list of 0/1) and why a row
    has none (null where it has one): missing_label where a value is missing (missing_label: NaN too, float or
    text), bad_label or label_not_in_classes where it is not one."""
    if cfg.task == "multilabel":
        values, reasons = [], pl.Series([None] * frame.height, dtype=pl.String)
        for column in cfg.label:
            text = _class_text(frame[column])
            bit = text.str.to_lowercase().replace_strict(
                {"0": 0, "1": 1, "false": 0, "true": 1}, default=None, return_dtype=pl.Int8
            )
            why = (
                pl.when(missing_label(text))
                .then(pl.lit("missing_label"))
                .when(bit.is_null())
                .then(pl.lit("bad_label"))
                .otherwise(None)
            )
            reasons = pl.select(pl.coalesce(reasons, why)).to_series()
            values.append(bit)
        label = pl.select(pl.concat_list(values)).to_series()
        return label, reasons
    raw = frame[cfg.label[0]]
    if cfg.task == "regression":
        text = raw.cast(pl.String).str.strip_chars()
        value = text.cast(pl.Float64, strict=False)
        reason = pl.select(
            pl.when(missing_label(text))
            .then(pl.lit("missing_label"))
            .when(value.is_null() | ~value.is_finite())
            .then(pl.lit("bad_label"))
            .otherwise(None)
        ).to_series()
        return value, reason
    text = _class_text(raw)
    index = text.replace_strict({c: i for i, c in enumerate(classes)}, default=None, return_dtype=pl.Int64)
    reason = pl.select(
        pl.when(missing_label(text, classes))
        .then(pl.lit("missing_label"))
        .when(index.is_null())
        .then(pl.lit("label_not_in_classes"))
        .otherwise(None)
    ).to_series()
    return index, reason


def image_path(value, root: Path, bound: Path | None = None) -> Path:
    """The file an image path names: relative to `root`, or absolute; resolved (symlinks followed), it must
    lie inside `bound` (default `root`; resolved too), else OutsideRoot, and be a regular file if it exists,
    else NotAFile (a FIFO, a device, a folder); nothing is opened."""
    path = Path(value)
    resolved = (path if path.is_absolute() else root / path).resolve()
    base = Path(bound or root).resolve()
    if base not in resolved.parents:
        raise OutsideRoot(f"{value} resolves outside {base}")
    try:
        mode = os.stat(resolved).st_mode
    except OSError:  # missing: opening it says so (unreadable_image)
        return resolved
    if not stat.S_ISREG(mode):
        raise NotAFile(f"{value} is no regular file")
    return resolved


def read_image(value, encoding: str, root: Path, bound: Path | None = None) -> np.ndarray:
    """One image cell as uint8 (3, 32, 32) RGB; raises on anything unreadable, OutsideRoot for a path that
    leaves `bound` (image_path: relative to `root`, inside `bound`, default `root`), NotAFile for one that
    names no regular file."""
    if encoding == "array":
        array = np.asarray(value, dtype=np.float64)
        if array.size == int(np.prod(IMAGE_SHAPE)) and array.ndim in (1, 3) and array.shape[0] in (3, 3072):
            return np.clip(array, 0, 255).astype(np.uint8).reshape(IMAGE_SHAPE)
        if array.ndim == 3 and array.shape[0] in (1, 3) and array.shape[-1] not in (1, 3):
            array = array.transpose(1, 2, 0)  # CHW -> HWC
        if array.ndim == 3 and array.shape[-1] == 1:
            array = array[..., 0]
        if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[-1] != 3) or min(array.shape[:2]) < 4:
            raise ValueError(
                f"an image array of shape {array.shape}: expected H x W, H x W x 3 or 3 x 32 x 32"
            )
        image = Image.fromarray(np.clip(array, 0, 255).astype(np.uint8))
    else:
        if isinstance(value, dict):  # a Hugging Face Image feature: {bytes, path}
            value = value.get("bytes") or value.get("path")
            encoding = "bytes" if isinstance(value, (bytes, bytearray)) else "path"
        if encoding == "bytes":
            image = Image.open(io.BytesIO(value))
        else:  # opened where it was checked: a folder swapped for a symlink since is refused (open_inside)
            with open_inside(image_path(value, root, bound), Path(bound or root).resolve()) as file:
                image = Image.open(file).convert("RGB")
    image = image.convert("RGB").resize(IMAGE_SHAPE[1:], Image.Resampling.BILINEAR)
    return np.asarray(image, dtype=np.uint8).transpose(2, 0, 1).copy()


def _raw(frame: pl.DataFrame, i: int) -> str:
    row = frame.row(i, named=True)
    return json.dumps(
        {k: (f"<{len(v)} bytes>" if isinstance(v, (bytes, bytearray)) else v) for k, v in row.items()},
        default=str,
    )[:2000]


def _decoded(cells: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(a column of bytes as text, U+FFFD for each invalid sequence; whether each cell was not UTF-8)."""
    text, invalid = [], []
    for value in cells.to_list():
        try:
            text.append(None if value is None else value.decode("utf-8"))
            invalid.append(False)
        except UnicodeDecodeError:
            text.append(value.decode("utf-8", errors="replace"))
            invalid.append(True)
    return pl.Series(cells.name, text, dtype=pl.String), pl.Series(invalid, dtype=pl.Boolean)


def invalid_cells(cells: pl.Series) -> pl.Series:
    """Whether each cell of a column of bytes is not UTF-8."""
    return _decoded(cells)[1]


def text_cells(cells: pl.Series) -> pl.Series:
    """A column as it is read for times and labels: bytes decoded as UTF-8, null where they are not (those
    rows are quarantined as invalid_utf8); any other column as it is."""
    if cells.dtype != pl.Binary:
        return cells
    text, invalid = _decoded(cells)
    return pl.select(pl.when(invalid).then(None).otherwise(text)).to_series().alias(cells.name)


def image_column(cfg: TableParams) -> str:
    """The image column of a table without text columns."""
    if cfg.image is None:
        raise DriftError(
            f"{cfg.source}: a table's section names its input: `text: [columns]` or `image: column`"
        )
    return cfg.image


def columns_of(cfg: TableParams) -> list[str]:
    names = ([cfg.id] if cfg.id else []) + [cfg.time] + (cfg.text or [image_column(cfg)]) + list(cfg.label)
    return list(dict.fromkeys(names))


def parsed_batches(
    cfg: TableParams, chunk_rows: int = CHUNK_ROWS
) -> Iterator[tuple[pl.DataFrame | None, list]]:
    """(kept rows: line, id, time, label and text or image, their bad rows as (line, where, reason, raw)) per
    batch, every file of the source in order; `line` counts rows over the whole source from 1. A file whose
    rows stop early (FileNotes.damage) then gives (None, [(its name, why)])."""
    classes = [str(c) for c in label_names(cfg)] if cfg.task in ("binary", "multiclass") else []
    root, bound = source_root(cfg.source), Path(cfg.image_root) if cfg.image_root else None
    columns, line = columns_of(cfg), 0
    with tempfile.TemporaryDirectory(prefix="drift-table-") as tmp:
        for path, fmt in source_files(cfg.source, cfg.format):
            name, first, notes = path.name, line, FileNotes()
            for frame in scan_batches(path, fmt, columns, cfg, Path(tmp), chunk_rows, notes):
                n = frame.height
                lines = pl.Series("line", np.arange(line + 1, line + n + 1, dtype=np.int64))
                in_file = lines - first
                if cfg.id:
                    ids = frame[cfg.id].cast(pl.String).str.strip_chars()
                    reason = pl.select(
                        pl.when(ids.is_null() | (ids == "")).then(pl.lit("missing_id")).otherwise(None)
                    ).to_series()
                else:
                    ids = pl.select(pl.format(f"{name}:{{}}", in_file)).to_series()
                    reason = pl.Series([None] * n, dtype=pl.String)
                frame, reason = _byte_reasons(frame, cfg, fmt, notes, in_file, reason)
                time = parse_time(frame[cfg.time], cfg.time_encoding, cfg.time_format)
                label, label_reason = parse_label(frame, cfg, classes)
                if cfg.text:
                    payload, input_reason = _text_payload(frame, cfg)
                    images = None
                else:
                    images, input_reason = _images(frame[image_column(cfg)].to_list(), cfg, root, bound)
                reasons = (reason, time_reason(frame[cfg.time], time, cfg), label_reason, input_reason)
                reason = pl.select(pl.coalesce(reasons)).to_series()
                good = reason.is_null()
                bad = [
                    (
                        lines[i],
                        f"{name}:{in_file[i]}" if reason[i] in BY_ROW or not ids[i] else ids[i],
                        reason[i],
                        notes.unreadable[in_file[i]] if reason[i] == "unreadable_row" else _raw(frame, i),
                    )
                    for i in np.flatnonzero(~good.to_numpy()).tolist()
                ]
                kept = pl.DataFrame({"line": lines, "id": ids, "time": time, "label": label}).filter(good)
                if images is None:
                    kept = kept.with_columns(text=payload.filter(good))
                else:
                    kept_images = [images[i] for i in np.flatnonzero(good.to_numpy()).tolist()]
                    kept = kept.with_columns(image=pl.Series(kept_images, dtype=pl.Object))
                line += n
                yield kept, bad
            if notes.damage:
                yield None, [(name, notes.damage)]


BY_ROW = ("invalid_utf8", "unreadable_row")  # reasons whose `where` is <file>:<row>, never the id read


def _byte_reasons(
    frame: pl.DataFrame, cfg: TableParams, fmt: str, notes: FileNotes, in_file: pl.Series, reason: pl.Series
) -> tuple[pl.DataFrame, pl.Series]:
    """(the frame with Parquet or Arrow columns of bytes decoded, the reasons with those of the rows whose
    bytes are bad put first: unreadable_row, a JSON line no parser reads; invalid_utf8, bytes that were not
    UTF-8)."""
    flags = []
    if notes.invalid_utf8 and fmt in ("csv", "jsonl"):  # read from its clean_copy
        flags += [
            frame[c].str.contains(BAD_BYTES, literal=True).fill_null(False)
            for c in frame.columns
            if frame[c].dtype == pl.String
        ]
    for column in frame.columns:  # a Parquet or Arrow column of raw bytes (an image's aside): decoded here
        if column != cfg.image and frame[column].dtype == pl.Binary:
            text, invalid = _decoded(frame[column])
            frame = frame.with_columns(text)
            flags.append(invalid)
    if flags:
        invalid = pl.select(pl.any_horizontal(flags)).to_series()
        reason = pl.select(pl.when(invalid).then(pl.lit("invalid_utf8")).otherwise(reason)).to_series()
    if notes.unreadable:
        unreadable = in_file.is_in(list(notes.unreadable))
        reason = pl.select(pl.when(unreadable).then(pl.lit("unreadable_row")).otherwise(reason)).to_series()
    return frame, reason


def in_plausible_years(time: pl.Series, cfg: TableParams) -> pl.Series:
    """Whether each time falls in the section's plausible_years (null where it is null)."""
    first, end = cfg.plausible_years
    year = time.dt.year()
    return (year >= first) & (year < end)


def time_reason(raw: pl.Series, time: pl.Series, cfg: TableParams) -> pl.Series:
    """Why a row has no time: missing_time (null or empty), bad_time (unreadable), outside_plausible_years."""
    empty = raw.is_null() | (raw.cast(pl.String, strict=False).str.strip_chars() == "")
    return pl.select(
        pl.when(empty)
        .then(pl.lit("missing_time"))
        .when(time.is_null())
        .then(pl.lit("bad_time"))
        .when(~in_plausible_years(time, cfg))
        .then(pl.lit("outside_plausible_years"))
        .otherwise(None)
    ).to_series()


def _text_payload(frame: pl.DataFrame, cfg: TableParams) -> tuple[pl.Series, pl.Series]:
    """(the text columns joined, stripped; empty_input where that leaves nothing)."""
    parts = [frame[c].cast(pl.String, strict=False) for c in cfg.text or []]
    payload = pl.select(
        pl.concat_str(parts, separator=cfg.text_separator, ignore_nulls=True).str.strip_chars()
    ).to_series()
    reason = pl.select(
        pl.when(payload.is_null() | (payload == "")).then(pl.lit("empty_input")).otherwise(None)
    ).to_series()
    return payload, reason


def _images(cells: list, cfg: TableParams, root: Path, bound: Path | None) -> tuple[list, pl.Series]:
    """(each image cell read, None where it cannot be; why not: empty_input, path_outside_root, not_a_file,
    unreadable_image)."""
    images, reasons = [], []
    for cell in cells:
        try:
            images.append(None if cell is None else read_image(cell, cfg.image_encoding, root, bound))
            reasons.append("empty_input" if cell is None else None)
        except OutsideRoot:
            images.append(None)
            reasons.append("path_outside_root")
        except NotAFile:
            images.append(None)
            reasons.append("not_a_file")
        except Exception:  # noqa: BLE001 (PIL raises many kinds: each an unreadable image)
            images.append(None)
            reasons.append("unreadable_image")
    return images, pl.Series(reasons, dtype=pl.String)


# ---------------------------------------------------------------- the reader's contract


def label_names(cfg: TableParams) -> list[str]:
    """binary / multiclass: the declared classes, else every distinct value found (numbers in numeric order),
    never a missing-value marker (NA_LABELS); multilabel: the label columns (or the declared names);
    regression: none."""
    if cfg.task == "regression":
        return []
    if cfg.task == "multilabel":
        return [str(c) for c in cfg.classes] if cfg.classes else list(cfg.label)
    if cfg.classes is not None:
        return [str(c) for c in cfg.classes]
    found: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="drift-table-") as tmp:
        for path, fmt in source_files(cfg.source, cfg.format):
            for frame in scan_batches(path, fmt, [cfg.label[0]], cfg, Path(tmp)):
                values = _class_text(text_cells(frame[cfg.label[0]])).drop_nulls().unique().to_list()
                found |= set(values) - {""} - NA_LABELS
    classes = sorted(found, key=lambda v: (0, float(v), v) if _is_number(v) else (1, 0.0, v))
    want = "exactly 2" if cfg.task == "binary" else "at least 3"
    if (cfg.task == "binary") != (len(classes) == 2) or len(classes) < 2:
        raise DriftError(
            f"{cfg.source}: a {cfg.task} task needs {want} classes, found {len(classes)} in column "
            f"{cfg.label[0]!r} ({', '.join(classes[:10])}): declare `classes:` or change `task:`"
        )
    return classes


def _is_number(value: str) -> bool:
    try:
        float(value)
        return True
    except ValueError:
        return False


def _label_arrow(label: pl.Series, cfg: TableParams, n_labels: int) -> pa.Array:
    if cfg.task == "multilabel":
        flat = pa.array(label.explode().to_numpy().astype(np.int8))
        return pa.FixedSizeListArray.from_arrays(flat, n_labels)
    return label.to_arrow()


def read_batches(cfg: TableParams) -> Iterator[Batch]:
    """The fast path of a text table (drift.data.datasets._fast.Batch): kept records as Arrow, bad rows in
    order; a file whose rows stop early, a Batch that says so (`damaged`) after them."""
    n_labels = len(label_names(cfg))
    for kept, bad in parsed_batches(cfg):
        if kept is None:
            name, why = bad[0]
            yield Batch(None, [], source=name, damaged=why)
            continue
        records = pa.table(
            {
                "line": kept["line"].to_arrow(),
                "id": kept["id"].to_arrow(),
                "time": kept["time"].to_arrow(),
                "label": _label_arrow(kept["label"], cfg, n_labels),
                "text": kept["text"].to_arrow(),
            }
        )
        yield Batch(
            records.cast(
                pa.schema(
                    [
                        ("line", pa.int64()),
                        ("id", pa.string()),
                        ("time", pa.timestamp("us")),
                        records.schema.field("label"),
                        ("text", pa.string()),
                    ]
                )
            ),
            bad,
        )


def read(cfg: TableParams, ledger) -> Iterator[dict]:
    """The line-by-line path (and every image table): the same rows as dicts, bad ones to the ledger, a file
    whose rows stop early to the ledger as damaged after them."""
    payload = "text" if cfg.text else "image"
    for kept, bad in parsed_batches(cfg):
        if kept is None:
            ledger.damaged(*bad[0])
            continue
        pending = iter(bad)
        next_bad = next(pending, None)
        for row in kept.iter_rows(named=True):  # in line order, as the fast path accounts for them
            while next_bad is not None and next_bad[0] < row["line"]:
                ledger.quarantine(*next_bad[1:])
                next_bad = next(pending, None)
            yield {"id": row["id"], "time": row["time"], "label": row["label"], payload: row[payload]}
        for _, where, reason, raw in ([next_bad] if next_bad else []) + list(pending):
            ledger.quarantine(where, reason, raw)

"""A dataset of your own, configured in params.yaml, not coded: any time-stamped table read with polars.

`datasets.<name>: {input: <file or folder>}` and a section `<name>:` (TableParams, `kind: table`; `drift init` writes
both): the input is a Parquet, CSV or JSON-lines file (gzip too), a folder of them (`files`: a glob of the folder's
files to read, e.g. "**/*.parquet"), or a Hugging Face `save_to_disk` folder (its Arrow files); the reader reads
`source`, the input joined with `files` (drift.data.datasets.dataset_cfg); the section names the time column and its encoding, the
input (text columns joined in order, or an image column of bytes, paths relative to the source, or arrays), the
label column(s) and the task. Each file is scanned lazily with an explicit schema and streamed in CHUNK_ROWS-row
batches, so memory stays bounded. A bad row is quarantined with its reason (missing_id, missing_time, bad_time,
missing_label, bad_label, label_not_in_classes, empty_input, unreadable_image, path_outside_root: an image path
relative to the source's folder that resolves, symlinks followed, outside it (or outside `image_root`, a wider
folder allowed explicitly), never opened; invalid_utf8: a cell
of a CSV, JSON-lines or Parquet file that is not UTF-8), one reason a row, the first met;
duplicate ids are the ingest driver's. Images become 3x32x32 RGB (resized), as the built-in image datasets.
"""

from __future__ import annotations

import codecs
import glob as globbing
import gzip
import io
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, ClassVar, cast

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image
from pydantic import model_validator

from drift.core.errors import DriftError
from drift.core.params import DatasetParams, Label, Names, choice
from drift.data.datasets._fast import Batch

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
    classes: list[Label] | None = None  # the declared label set; null: every value found

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
    """(file, format) of a source in order: one file, the table files of a folder (recursively, sorted), those a
    glob matches, or a save_to_disk folder's Arrow files in its state.json order."""
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


def _plain_copy(path: Path, tmp: Path) -> Path:
    """A gzip file decompressed to `tmp` in pieces (memory stays flat); any other file as it is."""
    if path.suffix.lower() != ".gz":
        return path
    out = tmp / path.stem
    with gzip.open(path, "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    return out


BAD_BYTES = "\ufffd"  # what an invalid UTF-8 sequence becomes in utf8_copy


def utf8_copy(path: Path, tmp: Path) -> tuple[Path, int]:
    """(the text file as valid UTF-8, the number of its lines that were not): the file itself when it is valid
    (one streamed check), else a copy in `tmp` in which each invalid byte sequence is U+FFFD (BAD_BYTES), line
    by line, so memory stays flat. The rows holding BAD_BYTES in such a copy are quarantined as invalid_utf8."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                decoder.decode(chunk)
            decoder.decode(b"", final=True)
        return path, 0
    except UnicodeDecodeError:
        pass
    handle, name = tempfile.mkstemp(dir=tmp, prefix="utf8-", suffix=path.suffix)
    bad = 0
    with open(path, "rb") as src, open(handle, "w", encoding="utf-8", newline="") as dst:
        for line in src:
            try:
                dst.write(line.decode("utf-8"))
            except UnicodeDecodeError:
                dst.write(line.decode("utf-8", errors="replace"))
                bad += 1
    return Path(name), bad


def utf8_checked(batch: pa.RecordBatch) -> tuple[pa.RecordBatch, int]:
    """(the batch with each string column that holds invalid UTF-8 as binary, the number of rows with such a
    cell): Parquet does not promise valid strings, and polars refuses a whole file over one bad cell. A valid
    column costs one C++ validation; only an invalid one is checked cell by cell."""
    bad = np.zeros(batch.num_rows, dtype=bool)
    columns = []
    for field, column in zip(batch.schema, batch.columns):
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            try:
                column.validate(full=True)
            except pa.ArrowInvalid:
                column = column.cast(
                    pa.large_binary() if pa.types.is_large_string(field.type) else pa.binary()
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
    repaired: dict | None = None,
) -> Iterator[pl.DataFrame]:
    """The file's `columns` in batches of at most chunk_rows rows: a lazy scan with an explicit schema (text files:
    every column a string, parsed here; Parquet and Arrow: their own types), streamed. A CSV or JSON-lines file
    with invalid UTF-8 is read from its utf8_copy, a Parquet string column holding some as binary (utf8_checked);
    `repaired` (when given) gets path -> its lines (Parquet: rows of `columns`) that were not valid UTF-8."""
    plain = _plain_copy(path, tmp)
    if fmt in ("csv", "jsonl"):
        plain, bad = utf8_copy(plain, tmp)
        if bad and repaired is not None:
            repaired[path] = bad
    if fmt == "arrow":  # save_to_disk writes the Arrow IPC stream format
        with pa.memory_map(str(plain)) as f:
            reader = pa.ipc.open_stream(f)
            _check_columns(path, reader.schema.names, columns)
            for batch in reader:
                batch, bad = utf8_checked(batch.select(columns))
                if bad and repaired is not None:
                    repaired[path] = repaired.get(path, 0) + bad
                if batch.num_rows:
                    yield from arrow_frame(batch).iter_slices(chunk_rows)
        return
    if fmt == "parquet":  # pyarrow's reader, which leaves strings unchecked: utf8_checked finds the bad cells
        file = pq.ParquetFile(plain)
        _check_columns(path, file.schema_arrow.names, columns)
        for batch in file.iter_batches(batch_size=chunk_rows, columns=columns):
            batch, bad = utf8_checked(batch)
            if bad and repaired is not None:
                repaired[path] = repaired.get(path, 0) + bad
            if batch.num_rows:
                yield arrow_frame(batch)
        return
    if fmt == "csv":
        lazy = pl.scan_csv(plain, infer_schema=False, separator=cfg.csv_separator, truncate_ragged_lines=True)
    else:
        schema = {
            c: (pl.List(pl.Int64) if c == cfg.image and cfg.image_encoding == "array" else pl.String)
            for c in columns
        }
        lazy = pl.scan_ndjson(plain, schema=schema, ignore_errors=True)
    _check_columns(path, lazy.collect_schema().names(), columns)
    for frame in lazy.select(columns).collect_batches(chunk_size=chunk_rows):
        if frame.height:
            yield frame


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


def parse_label(frame: pl.DataFrame, cfg: TableParams, classes: list[str]) -> tuple[pl.Series, pl.Series]:
    """(label, reason): the label as the records hold it (class index, rating, or list of 0/1) and why a row has
    none (null where it has one)."""
    if cfg.task == "multilabel":
        values, reasons = [], pl.Series([None] * frame.height, dtype=pl.String)
        for column in cfg.label:
            text = _class_text(frame[column]).str.to_lowercase()
            bit = text.replace_strict(
                {"0": 0, "1": 1, "false": 0, "true": 1}, default=None, return_dtype=pl.Int8
            )
            why = (
                pl.when(text.is_null())
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
        value = raw.cast(pl.String).str.strip_chars().cast(pl.Float64, strict=False)
        bad = value.is_null() | ~value.is_finite()
        reason = pl.select(
            pl.when(raw.is_null())
            .then(pl.lit("missing_label"))
            .when(bad)
            .then(pl.lit("bad_label"))
            .otherwise(None)
        ).to_series()
        return value, reason
    text = _class_text(raw)
    index = text.replace_strict({c: i for i, c in enumerate(classes)}, default=None, return_dtype=pl.Int64)
    reason = pl.select(
        pl.when(text.is_null() | (text == ""))
        .then(pl.lit("missing_label"))
        .when(index.is_null())
        .then(pl.lit("label_not_in_classes"))
        .otherwise(None)
    ).to_series()
    return index, reason


class OutsideRoot(ValueError):
    """An image path that leaves its root: quarantined as path_outside_root, never opened."""


def image_path(value, root: Path, bound: Path | None = None) -> Path:
    """The file an image path names: relative to `root`, or absolute; resolved (symlinks followed), it must lie
    inside `bound` (default `root`; resolved too), else OutsideRoot and nothing is opened."""
    path = Path(value)
    resolved = (path if path.is_absolute() else root / path).resolve()
    base = Path(bound or root).resolve()
    if base not in resolved.parents:
        raise OutsideRoot(f"{value} resolves outside {base}")
    return resolved


def read_image(value, encoding: str, root: Path, bound: Path | None = None) -> np.ndarray:
    """One image cell as uint8 (3, 32, 32) RGB; raises on anything unreadable, OutsideRoot for a path that
    leaves `bound` (image_path: relative to `root`, inside `bound`, default `root`)."""
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
        else:
            image = Image.open(image_path(value, root, bound))
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
    """A column as it is read for times and labels: bytes decoded as UTF-8, null where they are not (those rows
    are quarantined as invalid_utf8); any other column as it is."""
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


def parsed_batches(cfg: TableParams, chunk_rows: int = CHUNK_ROWS) -> Iterator[tuple[pl.DataFrame, list]]:
    """(kept rows: line, id, time, label and text or image, their bad rows as (line, where, reason, raw)) per
    batch, every file of the source in order; `line` counts rows over the whole source from 1."""
    classes = [str(c) for c in label_names(cfg)] if cfg.task in ("binary", "multiclass") else []
    root, bound = source_root(cfg.source), Path(cfg.image_root) if cfg.image_root else None
    columns, line = columns_of(cfg), 0
    with tempfile.TemporaryDirectory(prefix="drift-table-") as tmp:
        for path, fmt in source_files(cfg.source, cfg.format):
            name, first = path.name, line
            repaired: dict[Path, int] = {}
            for frame in scan_batches(path, fmt, columns, cfg, Path(tmp), chunk_rows, repaired):
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
                flags = []  # a row with bytes that were not UTF-8: its own reason, first
                if repaired and fmt in ("csv", "jsonl"):  # read from its utf8_copy
                    flags += [
                        frame[c].str.contains(BAD_BYTES, literal=True).fill_null(False)
                        for c in columns
                        if frame[c].dtype == pl.String
                    ]
                for (
                    column
                ) in columns:  # a Parquet or Arrow column of raw bytes (an image's aside): decoded here
                    if column != cfg.image and frame[column].dtype == pl.Binary:
                        text, invalid = _decoded(frame[column])
                        frame = frame.with_columns(text)
                        flags.append(invalid)
                if flags:
                    invalid = pl.select(pl.any_horizontal(flags)).to_series()
                    reason = pl.select(
                        pl.when(invalid).then(pl.lit("invalid_utf8")).otherwise(reason)
                    ).to_series()
                time = parse_time(frame[cfg.time], cfg.time_encoding, cfg.time_format)
                raw_time = frame[cfg.time]
                no_time = raw_time.is_null() | (
                    raw_time.cast(pl.String, strict=False).str.strip_chars() == ""
                )
                time_reason = pl.select(
                    pl.when(no_time)
                    .then(pl.lit("missing_time"))  # null or empty: missing
                    .when(time.is_null())
                    .then(pl.lit("bad_time"))
                    .otherwise(None)
                ).to_series()
                label, label_reason = parse_label(frame, cfg, classes)
                if cfg.text:
                    parts = [frame[c].cast(pl.String, strict=False) for c in cfg.text]
                    payload = pl.select(
                        pl.concat_str(
                            parts, separator=cfg.text_separator, ignore_nulls=True
                        ).str.strip_chars()
                    ).to_series()
                    input_reason = pl.select(
                        pl.when(payload.is_null() | (payload == ""))
                        .then(pl.lit("empty_input"))
                        .otherwise(None)
                    ).to_series()
                    images = None
                else:
                    cells = frame[image_column(cfg)].to_list()
                    images, cell_flags = [], []
                    for cell in cells:
                        outside = False
                        try:
                            images.append(
                                None if cell is None else read_image(cell, cfg.image_encoding, root, bound)
                            )
                        except OutsideRoot:
                            images.append(None)
                            outside = True
                        except Exception:  # noqa: BLE001 (PIL raises many kinds: each an unreadable image)
                            images.append(None)
                        cell_flags.append(
                            "empty_input"
                            if cell is None
                            else "path_outside_root"
                            if outside
                            else "unreadable_image"
                            if images[-1] is None
                            else None
                        )
                    input_reason = pl.Series(cell_flags, dtype=pl.String)
                reason = pl.select(pl.coalesce(reason, time_reason, label_reason, input_reason)).to_series()
                good = reason.is_null()
                bad_index = np.flatnonzero(~good.to_numpy()).tolist()
                bad = [
                    (
                        lines[i],
                        f"{name}:{in_file[i]}" if reason[i] == "invalid_utf8" or not ids[i] else ids[i],
                        reason[i],
                        _raw(frame, i),
                    )
                    for i in bad_index
                ]
                kept = pl.DataFrame({"line": lines, "id": ids, "time": time, "label": label}).filter(good)
                if images is None:
                    kept = kept.with_columns(text=payload.filter(good))
                else:
                    kept_images = [images[i] for i in np.flatnonzero(good.to_numpy()).tolist()]
                    kept = kept.with_columns(image=pl.Series(kept_images, dtype=pl.Object))
                line += n
                yield kept, bad


# ---------------------------------------------------------------- the reader's contract


def label_names(cfg: TableParams) -> list[str]:
    """binary / multiclass: the declared classes, else every distinct value found (numbers in numeric order);
    multilabel: the label columns (or the declared names); regression: none."""
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
                found |= set(_class_text(text_cells(frame[cfg.label[0]])).drop_nulls().unique().to_list()) - {
                    ""
                }
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
    """The fast path of a text table (drift.data.datasets._fast.Batch): kept records as Arrow, bad rows in order."""
    n_labels = len(label_names(cfg))
    for kept, bad in parsed_batches(cfg):
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
    """The line-by-line path (and every image table): the same rows as dicts, bad ones to the ledger."""
    payload = "text" if cfg.text else "image"
    for kept, bad in parsed_batches(cfg):
        pending = iter(bad)
        next_bad = next(pending, None)
        for row in kept.iter_rows(named=True):  # in line order, as the fast path accounts for them
            while next_bad is not None and next_bad[0] < row["line"]:
                ledger.quarantine(*next_bad[1:])
                next_bad = next(pending, None)
            yield {"id": row["id"], "time": row["time"], "label": row["label"], payload: row[payload]}
        for _, where, reason, raw in ([next_bad] if next_bad else []) + list(pending):
            ledger.quarantine(where, reason, raw)

"""`drift init`'s library half: a table's columns inspected and its params.yaml section proposed.

`inspect_source` reads a sample of the first file (names, types, a few values) and scans the chosen time column
over the whole source for its span; `propose` picks the time, input, label and id columns and the task from
the column types and names, or from the user's choices. A choice with more than one candidate is an
`Ambiguous` error naming them (the CLI asks on stderr), never a silent guess.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tempfile
from pathlib import Path
from typing import cast

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from drift.core.errors import DriftError
from drift.core.params import parse
from drift.data.datasets.table import (
    TableParams,
    arrow_frame,
    columns_of,
    invalid_cells,
    label_names,
    parse_time,
    scan_batches,
    source_files,
    source_root,
    text_cells,
    utf8_checked,
    utf8_copy,
)

SAMPLE_ROWS = 2000
TIME_NAMES = re.compile(
    r"(^|_)(time|date|year|created|timestamp|ts|datetime|published|epoch|when)($|_|at$)", re.I
)
LABEL_NAMES = re.compile(
    r"^(label|labels|target|class|category|y|rating|score|sentiment|outcome|topic)$", re.I
)
ID_NAMES = re.compile(r"^(id|.*_id|uuid|key|guid)$", re.I)
IMAGE_PATH = r"(?i)\.(png|jpe?g|bmp|gif|webp)$"
MAX_CLASSES = 50


class Ambiguous(DriftError):
    """More than one column fits a role: the question to ask, naming the candidates and the flag."""


def sample(source: str) -> tuple[pl.DataFrame, int]:
    """(the first SAMPLE_ROWS rows of the first file with inferred types, number of files)."""
    files = source_files(source)
    path, fmt = files[0]
    if fmt in ("csv", "jsonl"):  # invalid UTF-8 read as U+FFFD: its rows are counted by time_span
        with tempfile.TemporaryDirectory(prefix="drift-init-") as tmp:
            plain, _ = utf8_copy(path, Path(tmp)) if path.suffix.lower() != ".gz" else (path, 0)
            if fmt == "csv":  # polars reads gzip in memory: a sample is small
                frame = pl.read_csv(
                    plain,
                    n_rows=SAMPLE_ROWS,
                    infer_schema_length=SAMPLE_ROWS,
                    truncate_ragged_lines=True,
                    encoding="utf8-lossy",
                )
            else:
                frame = pl.read_ndjson(
                    plain, n_rows=SAMPLE_ROWS, infer_schema_length=SAMPLE_ROWS, ignore_errors=True
                )
    elif (
        fmt == "parquet"
    ):  # below: a cell of invalid UTF-8 read as null (_lossy_text); time_span counts its rows
        batch = next(pq.ParquetFile(path).iter_batches(batch_size=SAMPLE_ROWS), None)
        frame = arrow_frame(utf8_checked(batch)[0]) if batch is not None else pl.DataFrame()
    else:
        with pa.memory_map(str(path)) as f:
            table = pa.ipc.open_stream(f).read_all().slice(0, SAMPLE_ROWS).combine_chunks()
        batches = table.to_batches()
        frame = arrow_frame(utf8_checked(batches[0])[0]) if batches else arrow_frame(table)
    if fmt in ("parquet", "arrow"):
        frame = frame.with_columns(
            [_lossy_text(frame[c]) for c in frame.columns if frame[c].dtype == pl.Binary]
        )
    return frame, len(files)


def _lossy_text(s: pl.Series) -> pl.Series:
    """A column of bytes of which 95% decode as UTF-8, as text, null where a cell does not (ingest quarantines
    its row): text stored as bytes, or strings with a few bad cells; images (a PNG's first byte is no UTF-8)
    stay bytes."""
    values = s.drop_nulls().to_list()
    valid = sum(1 for v in values if _utf8(v))
    if not values or valid < 0.95 * len(values):
        return s
    return pl.Series(
        s.name,
        [v.decode("utf-8") if v is not None and _utf8(v) else None for v in s.to_list()],
        dtype=pl.String,
    )


def _utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _mean(s: pl.Series) -> float:
    """The mean of a numeric or boolean column that is not empty (polars types a mean as any scalar)."""
    return cast(float, s.mean())


def _strings(s: pl.Series) -> pl.Series:
    return s.drop_nulls().cast(pl.String, strict=False).drop_nulls()


def time_encoding(s: pl.Series) -> tuple[str, str | None] | None:
    """(encoding, format) the column reads as, or None when it is not a time."""
    if isinstance(s.dtype, pl.Datetime):
        return "timestamp", None
    if s.dtype == pl.Date:
        return "date", None
    values = s.drop_nulls()
    if not len(values):
        return None
    if s.dtype.is_numeric():
        v = values.cast(pl.Float64)
        # not empty, no nulls: floats (polars types a column's min and max as any scalar)
        least, most = cast(float, v.min()), cast(float, v.max())
        if (v == v.floor()).all() and least >= 1000 and most <= 2200:
            return "year", None
        if least >= 1e8 and most < 1e10:
            return "epoch_s", None
        if least >= 1e11 and most < 1e13:
            return "epoch_ms", None
        return None
    if s.dtype != pl.String:
        return None
    text = values.str.strip_chars()
    for fmt in ("%Y-%m-%d", "%d/%m/%Y", "%m/%d/%Y", "%Y/%m/%d"):
        if _mean(text.str.to_date(fmt, strict=False).is_not_null()) >= 0.95:
            return "date", fmt
    if _mean(parse_time(text, "timestamp", None).is_not_null()) >= 0.95:
        return "timestamp", None
    return None


def _is_image(s: pl.Series) -> str | None:
    if s.dtype == pl.Binary or (
        isinstance(s.dtype, pl.Struct) and "bytes" in [f.name for f in s.dtype.fields]
    ):
        return "bytes"
    if isinstance(s.dtype, (pl.List, pl.Array)):
        return "array"
    if s.dtype == pl.String:
        text = _strings(s)
        if len(text) and _mean(text.str.contains(IMAGE_PATH)) >= 0.95:
            return "path"
    return None


def looks_like_key(s: pl.Series) -> bool:
    """A hash, a URL, an id or a number: numbers, or strings of which 95% hold no whitespace. Such a column is
    never taken as text unless named with --text."""
    if s.dtype.is_numeric():
        return True
    if s.dtype != pl.String:
        return False
    text = _strings(s)
    return len(text) > 0 and not _mean(text.str.contains(r"\s")) > 0.05


def _is_text(s: pl.Series) -> bool:
    text = _strings(s) if s.dtype == pl.String else None
    return (
        text is not None
        and len(text) > 0
        and not looks_like_key(s)
        and (_mean(text.str.len_chars()) >= 15 or text.n_unique() > len(text) // 2)
        and not ID_NAMES.match(s.name)
    )


def parse_slices(spec: str, low, high) -> dict:
    """--slices UNIT[:START:END] -> the section's slices; START and END default to the data's years (decades)."""
    parts = spec.split(":")
    if len(parts) not in (1, 3) or not parts[0]:
        raise DriftError(f"--slices {spec!r}: write UNIT or UNIT:START:END, e.g. year or decade:1950:2030")
    step = 10 if parts[0] == "decade" else 1  # a decade's START and END default to the data's decades
    out = {"unit": parts[0], "start": low.year // step * step, "end": (high.year // step + 1) * step}
    if len(parts) == 3:
        try:
            out["start"], out["end"] = int(parts[1]), int(parts[2])
        except ValueError:
            raise DriftError(
                f"--slices {spec!r}: START and END are years, e.g. {parts[0]}:2000:2024"
            ) from None
    return out


def _is_label(s: pl.Series) -> bool:
    """Few distinct values, each repeated; or a number (a rating, a score)."""
    values = s.drop_nulls()
    n = values.n_unique()
    return 2 <= n and (n <= min(MAX_CLASSES, len(values) // 2) or s.dtype.is_numeric())


def _choose(role: str, flag: str, candidates: list[str], preferred: list[str] | None = None) -> str:
    """The one candidate (or the one preferred by its name); else an Ambiguous question, or a DriftError."""
    if preferred is not None and len(preferred) == 1:
        return preferred[0]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise DriftError(f"no column looks like the {role}: name it with {flag} <column>")
    raise Ambiguous(f"which column is the {role}: {', '.join(candidates)}? answer with {flag} <column>")


def _task(s: pl.Series) -> str:
    values = s.drop_nulls()
    n = values.n_unique()
    if n == 2:
        return "binary"
    if s.dtype.is_numeric() and (
        n > MAX_CLASSES or s.dtype.is_float() and not (values == values.floor()).all()
    ):
        return "regression"
    if 3 <= n <= MAX_CLASSES:
        return "multiclass"
    raise DriftError(
        f"column {s.name!r} has {n} distinct values: name the task with --task "
        f"(binary, multiclass, regression, multilabel)"
    )


def propose(
    name: str,
    source: str,
    time: str | None = None,
    text: list[str] | None = None,
    image: str | None = None,
    label: list[str] | None = None,
    task: str | None = None,
    id_column: str | None = None,
    slices: str | None = None,
    per_slice: int | None = None,
) -> dict:
    """The section of dataset `name` (a mapping ready for params.yaml) and `columns`, what the sample showed.
    The id: `id_column` ("none": row numbers), else the one column whose values are unique and look like keys
    (no whitespace, or numbers; several: the one named like an id, else a question); `slices`: UNIT[:START:END];
    `per_slice`: the unit whose median slice holds nearest N rows (`slicing` in the result: see choose_unit)."""
    if slices and per_slice is not None:
        raise DriftError(
            "--slices and --per-slice both choose the slices: give one (--per-slice N picks the unit)"
        )
    if per_slice is not None and per_slice < 1:
        raise DriftError(f"--per-slice {per_slice}: give the rows a slice should hold, a whole number >= 1")
    frame, n_files = sample(source)
    columns = frame.columns
    for given in [time, image, *(text or []), *(label or []), None if id_column == "none" else id_column]:
        if given is not None and given not in columns:
            raise DriftError(f"{source} has no column {given!r}: its columns are {', '.join(columns)}")
    if text and image:
        raise DriftError("name one input: --text <columns> or --image <column>, not both")

    encodings = {c: time_encoding(frame[c]) for c in columns}
    if time is None:
        candidates = [c for c in columns if encodings[c] is not None]
        time = _choose("time", "--time", candidates, [c for c in candidates if TIME_NAMES.search(c)])
    read_as = encodings.get(time)
    if read_as is None:
        raise DriftError(f"column {time!r} reads as no time (timestamps, dates, years, epoch seconds or ms)")
    if id_column is None:
        ids = [
            c
            for c in columns
            if c != time
            and c not in (text or [])
            and c not in (label or [])
            and frame[c].null_count() == 0
            and frame[c].n_unique() == frame.height
            and looks_like_key(frame[c])
            and not frame[c].dtype.is_float()
        ]
        named = [c for c in ids if ID_NAMES.match(c)]
        id_column = ids[0] if len(ids) == 1 else named[0] if len(named) == 1 else None
        if id_column is None and len(ids) > 1:
            raise Ambiguous(
                f"which column is the id: {', '.join(ids)}? answer with --id <column> (--id none: "
                f"row numbers)"
            )
    elif id_column == "none":
        id_column = None

    rest = [c for c in columns if c not in (time, id_column)]
    if label is None:
        candidates = [
            c
            for c in rest
            if c not in (image, *(text or []))
            and _is_label(frame[c])
            and not _is_text(frame[c])
            and _is_image(frame[c]) is None
        ]
        label = [_choose("label", "--label", candidates, [c for c in candidates if LABEL_NAMES.match(c)])]
    if task is None:
        if len(label) > 1:
            task = "multilabel"
        else:
            task = _task(frame[label[0]])

    rest = [c for c in rest if c not in label]
    if not text and not image:
        images = [c for c in rest if _is_image(frame[c])]
        texts = [c for c in rest if _is_text(frame[c]) and encodings[c] is None]  # another time is no input
        if images and texts:
            raise Ambiguous(
                f"which input: the text in {', '.join(texts)} or the image in {', '.join(images)}? "
                f"answer with --text <columns> or --image <column>"
            )
        if images:
            image = _choose("image", "--image", images)
        elif texts:
            text = texts  # every text column, joined in the table's order
        else:
            raise DriftError(
                f"no column looks like the input: name it with --text <columns> or --image <column> "
                f"(columns: {', '.join(rest)})"
            )

    encoding, fmt = read_as
    where, files = split_source(source)
    section: dict[str, object] = {"kind": "table", **({"files": files} if files else {})}
    if id_column:
        section["id"] = id_column
    section.update(time=time, time_encoding=encoding)
    if fmt:
        section["time_format"] = fmt
    if text:
        section["text"] = list(text)
    else:
        assert image  # given, or chosen above when no text was
        section.update(image=image, image_encoding=_is_image(frame[image]) or "bytes")
    section.update(label=label[0] if len(label) == 1 else list(label), task=task)
    cfg = parse(
        TableParams, {**section, "source": source, "slices": {"unit": "year", "start": 1, "end": 2}}, name
    )
    if task in ("binary", "multiclass"):
        section["classes"] = label_names(cfg)
    invalid: dict = {}
    times: list = []
    low, high = time_span(cfg, invalid, times)
    slicing = None
    if per_slice is not None:
        slicing = choose_unit(np.concatenate(times), low, high, per_slice)
        section["slices"] = slicing["slices"]
    else:
        section["slices"] = parse_slices(slices, low, high) if slices else slices_for(low, high)
    if slices:
        from drift.protocol.slicing import slice_edges

        slice_edges(
            parse(TableParams, {**section, "source": source}, name).slices
        )  # a unit or edges that cannot slice: say so now
    section["min_samples"] = 20
    section["strict"] = False
    return {
        "section": section,
        "input": where,
        "columns": {c: str(frame[c].dtype) for c in columns},
        "files": n_files,
        "invalid_utf8": sum(invalid.values()),
        "slicing": slicing,
        "span": [str(low), str(high)],
        "examples": {c: [str(v)[:40] for v in frame[c].head(3).to_list()] for c in columns},
    }


def time_span(cfg: TableParams, invalid: dict | None = None, times: list | None = None):
    """(earliest, latest) time over the whole source; `invalid` (when given) gets file -> its rows with invalid
    UTF-8, which ingest will quarantine (invalid_utf8): a Parquet file's columns the section reads are scanned
    for them, a text file is checked whole; `times` (when given) gets every readable time, as datetime64[us]
    arrays."""
    low: dt.datetime | None = None
    high: dt.datetime | None = None
    with tempfile.TemporaryDirectory(prefix="drift-init-") as tmp:
        for path, fmt in source_files(cfg.source, cfg.format):
            columnar = fmt in ("parquet", "arrow")
            columns = [c for c in columns_of(cfg) if c != cfg.image] if columnar else [cfg.time]
            repaired = None if columnar else invalid
            for frame in scan_batches(path, fmt, columns, cfg, Path(tmp), repaired=repaired):
                if columnar and invalid is not None:  # bytes, or strings holding bad cells (utf8_checked)
                    bad = [invalid_cells(frame[c]) for c in columns if frame[c].dtype == pl.Binary]
                    n_bad = pl.select(pl.any_horizontal(bad)).to_series().sum() if bad else 0
                    if n_bad:
                        invalid[path] = invalid.get(path, 0) + n_bad
                found = parse_time(
                    text_cells(frame[cfg.time]), cfg.time_encoding, cfg.time_format
                ).drop_nulls()
                if len(found):
                    # a Datetime column's min and max are datetimes (polars types them as any scalar)
                    first, last = cast(dt.datetime, found.min()), cast(dt.datetime, found.max())
                    low = first if low is None else min(low, first)
                    high = last if high is None else max(high, last)
                    if times is not None:
                        times.append(found.cast(pl.Datetime("us")).to_numpy())
    if low is None:
        raise DriftError(f"no readable time in column {cfg.time!r} of {cfg.source}")
    return low, high


def slices_for(low, high) -> dict:
    """One slice a year when the span covers three years or more, else one a half-year."""
    unit = "year" if high.year - low.year >= 2 else "half-year"
    return {"unit": unit, "start": low.year, "end": high.year + 1}


def choose_unit(times: np.ndarray, low, high, per_slice: int) -> dict:
    """The slicing unit whose median slice holds nearest `per_slice` rows (by ratio; a tie: the finer unit), over
    the units --slices accepts, each spanning the data's years: {"slices": the section's spec, "unit", "k" (the
    number of slices), "rows": [min, median, max] per slice, "per_slice", "candidates": the same for every unit}.
    Rows are the source's rows with a readable time, before ingest's checks."""
    from drift.core.params import SliceSpec
    from drift.protocol.slicing import AUTO_UNITS, assign_slices, slice_edges

    candidates = []
    for unit in AUTO_UNITS:
        step = 10 if unit == "decade" else 1
        spec = {"unit": unit, "start": low.year // step * step, "end": (high.year // step + 1) * step}
        edges, _ = slice_edges(SliceSpec.model_validate(spec))
        index = assign_slices(times, edges)
        counts = np.bincount(index[index >= 0], minlength=len(edges) - 1)
        rows = [int(counts.min()), float(np.median(counts)), int(counts.max())]
        candidates.append(
            {
                "slices": spec,
                "unit": unit,
                "k": len(counts),
                "rows": rows,
                "off_by": abs(np.log(max(rows[1], 0.5) / per_slice)),
            }
        )
    best = min(candidates, key=lambda c: (round(c["off_by"], 9), c["k"] * -1))
    for c in candidates:
        c.pop("off_by")
    return {**best, "per_slice": per_slice, "candidates": candidates}


def split_source(source: str) -> tuple[str, str | None]:
    """A table's source as params.yaml names it: (`datasets.<name>.input`, what DVC tracks: the file or folder, a
    glob's fixed folder; the section's `files`: the glob relative to that folder, or None)."""
    if not any(ch in source for ch in "*?["):
        return source, None
    root = str(source_root(source))
    return root, os.path.relpath(source, root)

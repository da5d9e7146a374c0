"""`drift init`'s library half: a table's columns inspected and its params.yaml section proposed.

`sample` reads a sample of the first file (names, types, a few values; of a text file, only its head, however
large it expands) and `scan_times` scans the chosen time column over the whole source for its span; `propose`
picks the time, input, label and id columns and the task from the column types and names, or from the user's
choices. A choice with more than one candidate is an `Ambiguous` error naming them (the CLI asks on stderr),
never a silent guess. Missing-value markers (NaN, N/A, ...) are never classes, times outside the section's
`plausible_years` never part of the span, and the proposed slices cover the data's dense span (dense_years): a
few rows years away from the rest never make thousands of slices.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from drift.core.errors import DriftError
from drift.core.params import parse
from drift.data.datasets._io import damage, open_binary
from drift.data.datasets.table import (
    MAX_BLANK_LINES,
    NA_LABELS,
    FileNotes,
    TableParams,
    arrow_frame,
    clean_copy,
    columns_of,
    in_plausible_years,
    invalid_cells,
    label_names,
    parse_time,
    scan_batches,
    source_files,
    source_root,
    temp_file,
    text_cells,
    utf8_checked,
)

SAMPLE_ROWS = 2000
SAMPLE_BYTES = 16 << 20  # the head of a text file the sample reads: SAMPLE_ROWS rows of up to 8 KiB
# dense_years: rows in years at least OUTLIER_GAP empty years away from the rest, together under OUTLIER_SHARE
# of the rows, are outliers (a sentinel, a typo): left out of the proposed slices (ingest filters them by the
# span)
OUTLIER_GAP = 10
OUTLIER_SHARE = 0.01
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
    if fmt in ("csv", "jsonl"):  # invalid UTF-8 read as U+FFFD: its rows are counted by scan_times
        with tempfile.TemporaryDirectory(prefix="drift-init-") as tmp:
            head = text_head(path, fmt, Path(tmp))
            if fmt == "csv":
                frame = pl.read_csv(
                    head,
                    n_rows=SAMPLE_ROWS,
                    infer_schema_length=SAMPLE_ROWS,
                    truncate_ragged_lines=True,
                    encoding="utf8-lossy",
                )
            else:
                frame = pl.read_ndjson(
                    head, n_rows=SAMPLE_ROWS, infer_schema_length=SAMPLE_ROWS, ignore_errors=True
                )
    elif (
        fmt == "parquet"
    ):  # below: a cell of invalid UTF-8 read as null (_lossy_text); scan_times counts its rows
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


def text_head(path: Path, fmt: str, tmp: Path) -> Path:
    """The first SAMPLE_BYTES of a CSV or JSON-lines file (a .gz expanded only that far), up to its last whole
    line, as clean_copy leaves them: no blank line, bytes that are not UTF-8 as U+FFFD, no unreadable JSON
    line."""
    with open_binary(path) as src:
        data = src.read(SAMPLE_BYTES)
        cut = len(data) == SAMPLE_BYTES or damage(src) is not None
    if cut and b"\n" in data:
        data = data[: data.rindex(b"\n") + 1]
    head = temp_file(tmp, "head-", f".{fmt}")
    head.write_bytes(data)
    json_rows = "drop" if fmt == "jsonl" else None
    return clean_copy(head, fmt, MAX_BLANK_LINES, tmp, FileNotes(), json_rows=json_rows)


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


def present(s: pl.Series) -> pl.Series:
    """A column's values less the missing ones: nulls, float NaN, and missing-value markers (NA_LABELS)."""
    values = s.drop_nulls()
    if values.dtype.is_float():
        return values.filter(values.is_not_nan())
    if values.dtype == pl.String:
        return values.filter(~values.str.strip_chars().is_in(sorted(NA_LABELS)))
    return values


def _is_label(s: pl.Series) -> bool:
    """Few distinct values, each repeated; or a number (a rating, a score). Missing values are no values."""
    values = present(s)
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
    values = present(s)
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
    (no whitespace, or numbers; several: the one named like an id, else a question); `slices`:
    UNIT[:START:END]; `per_slice`: the unit whose median slice holds nearest N rows (`slicing` in the result:
    see choose_unit)."""
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
    scan = scan_times(cfg, keep_times=per_slice is not None)
    low, high = (dt.datetime(year, 1, 1) for year in dense_years(scan.years))  # the slices' span
    slicing = None
    if per_slice is not None:
        slicing = choose_unit(np.concatenate(scan.times), low, high, per_slice)
        section["slices"] = slicing["slices"]
    else:
        section["slices"] = parse_slices(slices, low, high) if slices else slices_for(low, high)
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
        "invalid_utf8": scan.invalid_utf8,
        "implausible_times": scan.implausible,
        "outlying_rows": sum(n for year, n in scan.years.items() if not low.year <= year <= high.year),
        "slicing": slicing,
        "span": [str(scan.low), str(scan.high)],
        "examples": {c: [str(v)[:40] for v in frame[c].head(3).to_list()] for c in columns},
    }


@dataclass
class TimeScan:
    """The time column over the whole source: the span of its plausible times, the rows per year, the rows
    ingest will quarantine for bytes that are not UTF-8 (invalid_utf8) or a time outside the section's
    plausible_years, and (when asked) every plausible time as datetime64[us] arrays."""

    low: dt.datetime
    high: dt.datetime
    years: Counter[int]
    invalid_utf8: int = 0
    implausible: int = 0
    times: list[np.ndarray] = field(default_factory=list)


def scan_times(cfg: TableParams, keep_times: bool = False) -> TimeScan:
    """The TimeScan of a source: a Parquet file's columns the section reads are scanned for invalid UTF-8, a
    text file is checked whole."""
    scan = TimeScan(dt.datetime.max, dt.datetime.min, Counter())
    with tempfile.TemporaryDirectory(prefix="drift-init-") as tmp:
        for path, fmt in source_files(cfg.source, cfg.format):
            columnar = fmt in ("parquet", "arrow")
            columns = [c for c in columns_of(cfg) if c != cfg.image] if columnar else [cfg.time]
            notes = FileNotes()
            for frame in scan_batches(path, fmt, columns, cfg, Path(tmp), notes=notes):
                if columnar:  # bytes, or strings holding bad cells (utf8_checked)
                    bad = [invalid_cells(frame[c]) for c in columns if frame[c].dtype == pl.Binary]
                    scan.invalid_utf8 += (
                        int(pl.select(pl.any_horizontal(bad)).to_series().sum()) if bad else 0
                    )
                found = parse_time(
                    text_cells(frame[cfg.time]), cfg.time_encoding, cfg.time_format
                ).drop_nulls()
                plausible = found.filter(in_plausible_years(found, cfg))
                scan.implausible += len(found) - len(plausible)
                if len(plausible):
                    # a Datetime column's min and max are datetimes (polars types them as any scalar)
                    scan.low = min(scan.low, cast(dt.datetime, plausible.min()))
                    scan.high = max(scan.high, cast(dt.datetime, plausible.max()))
                    scan.years.update(dict(plausible.dt.year().value_counts().iter_rows()))
                    if keep_times:
                        scan.times.append(plausible.cast(pl.Datetime("us")).to_numpy())
            scan.invalid_utf8 += 0 if columnar else notes.invalid_utf8
    if not scan.years:
        within = f" within plausible_years {cfg.plausible_years}" if scan.implausible else ""
        raise DriftError(f"no readable time in column {cfg.time!r} of {cfg.source}{within}")
    return scan


def dense_years(years: Counter[int]) -> tuple[int, int]:
    """(first, last) year of the data's dense span: the years that hold rows, less the outlying groups at
    either end (years OUTLIER_GAP or more empty years away from the rest that together hold under
    OUTLIER_SHARE of the rows: a sentinel such as 1900-01-01, a typo), so a handful of rows never stretch the
    slices over centuries."""
    held = sorted(years)
    groups = [[held[0]]]
    for year in held[1:]:
        if year - groups[-1][-1] > OUTLIER_GAP:
            groups.append([])
        groups[-1].append(year)
    rows = [sum(years[y] for y in group) for group in groups]
    limit = OUTLIER_SHARE * sum(rows)
    first, last, left = 0, len(groups) - 1, 0
    while first < last and left + rows[first] < limit:
        left, first = left + rows[first], first + 1
    left = 0
    while last > first and left + rows[last] < limit:
        left, last = left + rows[last], last - 1
    return groups[first][0], groups[last][-1]


def slices_for(low, high) -> dict:
    """One slice a year when the span covers three years or more, else one a half-year."""
    unit = "year" if high.year - low.year >= 2 else "half-year"
    return {"unit": unit, "start": low.year, "end": high.year + 1}


def choose_unit(times: np.ndarray, low, high, per_slice: int) -> dict:
    """The slicing unit whose median slice holds nearest `per_slice` rows (by ratio; a tie: the finer unit),
    over the units --slices accepts, each spanning the data's years: {"slices": the section's spec, "unit",
    "k" (the number of slices), "rows": [min, median, max] per slice, "per_slice", "candidates": the same for
    every unit}. Rows are the source's rows with a readable time, before ingest's checks."""
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
    """A table's source as params.yaml names it: (`datasets.<name>.input`, what DVC tracks: the file or
    folder, a glob's fixed folder; the section's `files`: the glob relative to that folder, or None)."""
    if not any(ch in source for ch in "*?["):
        return source, None
    root = str(source_root(source))
    return root, os.path.relpath(source, root)

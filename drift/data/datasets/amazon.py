"""Amazon Reviews 2023 (paper Section 3.1.2, Appendix B.2): predict the 1-5 star rating from the review text.

Source: a folder of `<Category>.jsonl` or `.jsonl.gz` review files (one JSON object per line); only `rating,
title, text, parent_asin, user_id, timestamp` are read. cfg (params.yaml `amazon`): source (default
data/raw/amazon), categories (default every file in source), url and sha256 (drift.data.fetch only: a URL
template with {category}, {file name: sha}), strict (the ingest driver). Record: id =
"user_id:parent_asin:timestamp" (a missing one of the two is "" there with `keep_missing_ids`), time =
`timestamp` (ms since epoch, UTC), label = float(rating), text = the `text_fields` (title, text) joined by
"\\n", verbatim (<br /> tags included). Quarantine reasons: malformed_json, missing_id (unless
keep_missing_ids), missing_timestamp, bad_timestamp, missing_rating, bad_rating, rating_out_of_range,
empty_text (unless keep_empty; a text field that is a non-empty number, list or object: whatever keep_empty);
a cut or corrupt .gz keeps its rows before the damage and is quarantined by name (damaged_file)."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, ClassVar
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from drift.core.dataset_registry import CORPUS_INPUTS
from drift.core.errors import DriftError, close_matches
from drift.core.params import (
    CorpusParams,
    Names,
    PositiveInt,
    SampleSpec,
    SliceSpec,
    choice,
    slices_field,
)
from drift.data.datasets._fast import NON_WHITESPACE, Batch, fast_batches, or_empty
from drift.data.datasets._io import (
    EPOCH,
    DamagedFile,
    from_epoch_ms,
    iter_json_lines,
    missing_source,
    raw_text,
)
from drift.data.ledger import Ledger

TEXT_FIELDS = ("title", "text")  # amazon.text_fields: the review's fields the input joins, "\n" between


# the per-category review files of Amazon Reviews 2023 (Hou et al. 2024), as the Hugging Face dataset
# McAuley-Lab/Amazon-Reviews-2023 serves them (`raw_review_<Category>`, what the paper's authors load)
PUBLIC_URL = "https://huggingface.co/datasets/McAuley-Lab/Amazon-Reviews-2023/resolve/main/raw/review_categories/{category}.jsonl"


class AmazonParams(CorpusParams):
    """params.yaml `amazon:`."""

    SECTION: ClassVar[str] = "amazon"
    source: str = CORPUS_INPUTS["amazon"]  # datasets.amazon.input when the run has it
    url: str | None = PUBLIC_URL
    categories: Names | None = None  # null or []: every <Category>.jsonl(.gz) in source
    slices: SliceSpec = slices_field(unit="half-year", start=2014, end=2024)
    sample: SampleSpec | None = Field(default_factory=lambda: SampleSpec(n=300_000, seed=0))
    min_samples: PositiveInt = 100
    text_fields: Annotated[list[Annotated[str, choice(*TEXT_FIELDS)]], Field(min_length=1)] = [
        "title",
        "text",
    ]
    # rows whose text fields are all empty: quarantined as empty_text (false), or kept with their empty text
    # (true: the authors' runs); repeated reviews (one user, item and time): quarantined as duplicate_id
    # (false), or kept, the n-th repeat with id "<id>#<n>" (true: the authors' runs)
    keep_empty: bool = False
    keep_duplicates: bool = False
    # rows without user_id or parent_asin: quarantined as missing_id (false), or kept, the missing part "" in
    # the id (true: the authors' runs, which never read either field)
    keep_missing_ids: bool = False


PARAMS = AmazonParams
# drift plan: the paper's Table 1 row (Appendix B); a review's title + text, in tokens (assumed)
PAPER_COST = {"model_seed_runs": 57, "train_gpu_h": 116.6, "eval_gpu_h": 136.7, "node_h": 63.3}
TYPICAL_TOKENS = 100
SUFFIXES = (".jsonl", ".jsonl.gz")  # plain first: a user who unpacked a file reads the unpacked one


def label_names(cfg) -> list[str]:
    return []


def found_categories(folder: Path) -> list[str]:
    """Category names of the files in the folder."""
    names = set()
    for p in folder.iterdir():
        for suffix in SUFFIXES:
            if p.is_file() and p.name.endswith(suffix):
                names.add(p.name[: -len(suffix)])
    return sorted(names)


def category_files(cfg: AmazonParams) -> list[Path]:
    """The file of each configured category; all of them checked before any row is read."""
    folder = Path(cfg.source)
    if not folder.is_dir():
        raise missing_source(
            "amazon", folder, "the Amazon Reviews 2023 files <Category>.jsonl or <Category>.jsonl.gz"
        )
    found = found_categories(folder)
    categories = cfg.categories or found  # none configured: every category file in the folder
    if not categories:
        raise DriftError(f"amazon: no <Category>.jsonl or <Category>.jsonl.gz files in {folder}")
    files = []
    for cat in categories:
        path = next((folder / f"{cat}{s}" for s in SUFFIXES if (folder / f"{cat}{s}").is_file()), None)
        if path is None:
            hint = close_matches(cat, found) if found else "the folder holds no category files"
            raise DriftError(
                f"amazon: no file for category {cat!r} in {folder} "
                f"(expected {cat}.jsonl or {cat}.jsonl.gz): {hint}"
            )
        files.append(path)
    return files


def read(cfg: AmazonParams, ledger: Ledger) -> Iterator[dict]:
    """The line-by-line reader: the baseline, and the fallback of the fast path for the rows it must see."""
    for path in category_files(cfg):
        ledger.file(path.name)
        try:
            for lineno, raw, row in iter_json_lines(path):
                record = row_record(
                    row,
                    f"{path.name}:{lineno}",
                    raw,
                    ledger,
                    cfg.text_fields,
                    cfg.keep_empty,
                    cfg.keep_missing_ids,
                )
                if record is not None:
                    yield record
        except DamagedFile as e:  # a cut or corrupt .gz: its rows before the damage are kept, the others read
            ledger.damaged(path.name, e.reason)


def row_record(
    row,
    where: str,
    raw: bytes,
    ledger: Ledger,
    fields=("title", "text"),
    keep_empty: bool = False,
    keep_missing_ids: bool = False,
) -> dict | None:
    """One parsed line -> its record, or None after quarantining it with its reason (`keep_empty`: a row with
    no text is kept, its text ""; `keep_missing_ids`: a row without user_id or parent_asin is kept, the
    missing part "" in its id)."""
    if not isinstance(row, dict):
        ledger.quarantine(where, "malformed_json", raw_text(raw))
        return None

    user, asin = row.get("user_id"), row.get("parent_asin")
    if (not user or not asin) and not keep_missing_ids:
        ledger.quarantine(where, "missing_id", raw_text(raw))
        return None
    user, asin = user or "", asin or ""

    ts = row.get("timestamp")
    if ts is None:
        ledger.quarantine(where, "missing_timestamp", raw_text(raw))
        return None
    time = from_epoch_ms(ts)
    if time is None:
        ledger.quarantine(where, "bad_timestamp", raw_text(raw))
        return None

    rating = row.get("rating")
    if rating is None:
        ledger.quarantine(where, "missing_rating", raw_text(raw))
        return None
    try:
        rating = float(rating)
    except (TypeError, ValueError):
        ledger.quarantine(where, "bad_rating", raw_text(raw))
        return None
    if not 1.0 <= rating <= 5.0:  # also rejects NaN
        ledger.quarantine(where, "rating_out_of_range", raw_text(raw))
        return None

    parts = [row.get(f) or "" for f in fields]
    if not all(isinstance(p, str) for p in parts) or not (keep_empty or any(p.strip() for p in parts)):
        ledger.quarantine(where, "empty_text", raw_text(raw))
        return None

    return {"id": f"{user}:{asin}:{ts}", "time": time, "label": rating, "text": "\n".join(parts)}


# ---------------------------------------------------------------- fast path (drift.data.datasets._fast)

SCHEMA = pa.schema(
    [
        ("user_id", pa.string()),
        ("parent_asin", pa.string()),
        ("timestamp", pa.int64()),
        ("rating", pa.float64()),
        ("title", pa.string()),
        ("text", pa.string()),
    ]
)
RECORDS = pa.schema(
    [("id", pa.string()), ("time", pa.timestamp("us")), ("label", pa.float64()), ("text", pa.string())]
)
# the milliseconds from_epoch_ms turns into a datetime (years 1 to 9999); others go to row_record
MIN_MS = (dt.datetime.min - EPOCH) // dt.timedelta(milliseconds=1)
MAX_MS = (dt.datetime.max - EPOCH) // dt.timedelta(milliseconds=1)


def vectorise(table: pa.Table, fields=("title", "text"), keep_empty: bool = False):
    """row_record as column operations, for the rows whose every check passes; the rest fall back to it."""
    user, asin, ts, rating = table["user_id"], table["parent_asin"], table["timestamp"], table["rating"]
    parts = [or_empty(table[f]) for f in fields]
    good = pc.and_kleene(pc.greater(pc.utf8_length(user), 0), pc.greater(pc.utf8_length(asin), 0))
    good = pc.and_kleene(good, pc.and_kleene(pc.greater_equal(ts, MIN_MS), pc.less_equal(ts, MAX_MS)))
    good = pc.and_kleene(good, pc.and_kleene(pc.greater_equal(rating, 1.0), pc.less_equal(rating, 5.0)))
    if not keep_empty:
        good = pc.and_kleene(
            good, functools.reduce(pc.or_, [pc.match_substring_regex(p, NON_WHITESPACE) for p in parts])
        )
    keep = pc.fill_null(good, False)  # a null anywhere (a missing field) is a row for row_record
    in_range = pc.if_else(
        keep, ts, 0
    )  # the product of an out-of-range value is never used; it must not overflow
    records = pa.table(
        {
            "id": pc.binary_join_element_wise(user, asin, pc.cast(ts, pa.string()), ":"),
            "time": pc.cast(pc.multiply(in_range, 1000), pa.timestamp("us")),
            "label": rating,
            "text": pc.binary_join_element_wise(*parts, "\n"),
        },
        schema=RECORDS,
    )
    return records.filter(keep), keep, pc.invert(keep), {}


def read_batches(cfg: AmazonParams) -> Iterator[Batch]:
    """The fast path: Batches of every category file, in order (drift.data.datasets._fast)."""
    for path in category_files(cfg):
        yield from fast_batches(
            path,
            SCHEMA,
            functools.partial(vectorise, fields=cfg.text_fields, keep_empty=cfg.keep_empty),
            functools.partial(
                row_record,
                fields=cfg.text_fields,
                keep_empty=cfg.keep_empty,
                keep_missing_ids=cfg.keep_missing_ids,
            ),
            RECORDS,
        )


def download_targets(cfg) -> list[tuple[str, Path]]:
    """`drift fetch amazon`: (url, destination) of each category file; `url` is a template with {category}."""
    if not cfg.url:
        raise DriftError(
            "amazon: no download URL: set amazon.url in params.yaml to a template with "
            "{category}, e.g. https://.../review_categories/{category}.jsonl.gz"
        )
    if not cfg.categories:
        raise DriftError("amazon: set amazon.categories in params.yaml to the categories to download")
    if "{category}" not in cfg.url and len(cfg.categories) > 1:
        raise DriftError(f"amazon.url has no {{category}} in it: {cfg.url}")
    urls = [cfg.url.format(category=cat) for cat in cfg.categories]
    return [(u, Path(cfg.source) / Path(urlparse(u).path).name) for u in urls]


def raw_inputs(cfg) -> list[Path]:
    """`drift track amazon`: the category files one by one, as `drift fetch amazon` registers them."""
    folder = Path(cfg.source)
    if not folder.is_dir():
        raise missing_source(
            "amazon", folder, "the Amazon Reviews 2023 files <Category>.jsonl or <Category>.jsonl.gz"
        )
    categories = cfg.categories or found_categories(folder)
    if not categories:
        raise DriftError(
            f"amazon: no <Category>.jsonl or <Category>.jsonl.gz files in {folder}: put them "
            f"there, or download them with `drift fetch amazon`"
        )
    paths = []
    for cat in categories:
        path = next((folder / f"{cat}{s}" for s in SUFFIXES if (folder / f"{cat}{s}").is_file()), None)
        if path is None:
            raise DriftError(
                f"amazon: {folder / cat}.jsonl (or .jsonl.gz) not found: put it there, or "
                f"download it with `drift fetch amazon`"
            )
        paths.append(path)
    return paths

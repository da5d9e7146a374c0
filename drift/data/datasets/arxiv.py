"""arXiv (paper Section 3.1.3, Appendix B.3, Section E): multi-label subject classification from title +
abstract.

Source: the Kaggle/Cornell snapshot `arxiv-metadata-oai-snapshot.json` (or its .gz), one JSON object per line,
streamed (about 2.9 million lines, 4.5 GB). cfg (params.yaml `arxiv`): source, categories (the label space in
label order; default the paper's seven leaf categories), time_field ("first_version", the default:
versions[0].created; or "update_date"), inclusion, separator, row_rules, url and sha256 (drift.data.fetch
only), strict. Record: id = arXiv id, label = 0/1 per category in cfg order, text = title + separator +
abstract, whitespace collapsed. A paper with none of the categories is filtered first ("no_kept_category"),
with `inclusion: all` one with a category outside them too ("other_category", the paper's Section 3.1.3);
quarantine reasons: malformed_json, missing_id, missing_categories, missing_timestamp, bad_timestamp,
empty_text. `row_rules: authors` reads a line as the authors' loader does: `categories` cut at each single
space, each piece stripped (an empty piece, from two spaces in a row or one at an end, is a category outside
the label space; a tab or a newline between two categories joins them into one), the text stripped at both
ends (one side empty: no separator), a paper with neither title nor abstract kept with that text."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from drift.core.dataset_registry import CORPUS_INPUTS
from drift.core.errors import DriftError
from drift.core.params import (
    CorpusParams,
    Names,
    PositiveInt,
    SliceSpec,
    choice,
    slices_field,
)
from drift.data.datasets._fast import (
    RARE_WHITESPACE,
    WS_CLASS,
    Batch,
    fast_batches,
    or_empty,
)
from drift.data.datasets._io import (
    DamagedFile,
    iter_json_lines,
    missing_source,
    normalize_ws,
    parse_date,
    parse_rfc2822,
    raw_text,
)
from drift.data.ledger import Ledger

TIME_FIELDS = ("first_version", "update_date")  # arxiv.time_field
MANUAL_URL = "https://www.kaggle.com/datasets/Cornell-University/arxiv"  # where the paper's authors get it
INCLUSIONS = (
    "any",
    "all",
)  # arxiv.inclusion: a paper kept with any of the categories, or only with all of its own among them
ROW_RULES = ("ours", "authors")  # arxiv.row_rules


class ArxivParams(CorpusParams):
    """params.yaml `arxiv:`."""

    SECTION: ClassVar[str] = "arxiv"
    source: str = CORPUS_INPUTS["arxiv"]  # datasets.arxiv.input when the run has it
    categories: Annotated[Names, Field(min_length=1)] = Field(
        default_factory=lambda: ["cs.LG", "hep-ph", "cs.CV", "cs.AI", "hep-th", "quant-ph", "gr-qc"]
    )
    time_field: Annotated[str, choice(*TIME_FIELDS)] = "first_version"
    inclusion: Annotated[str, choice(*INCLUSIONS)] = (
        "any"  # all: every category of a paper among `categories`
    )
    separator: str = "\n"  # between the title and the abstract
    # ours: categories split at any whitespace, a paper with neither title nor abstract quarantined
    # (empty_text); authors: as their loader (the module doc)
    row_rules: Annotated[str, choice(*ROW_RULES)] = "ours"
    slices: SliceSpec = slices_field(unit="year", start=2000, end=2026)
    min_samples: PositiveInt = 100


PARAMS = ArxivParams
# drift plan: the paper's Table 1 row (Appendix B), the corpus size it assumes, a title + abstract in tokens
PAPER_COST = {"model_seed_runs": 60, "train_gpu_h": 272.3, "eval_gpu_h": 101.9, "node_h": 93.5}
PAPER_ROWS = {
    "rows": 955_596,
    "non_empty": None,
    "source": "assumed: a third of the snapshot's 2,866,787 records (Section 3.1.3) carry one of the "
    "seven categories (drift/data/datasets/arxiv.py); the paper gives no subsample size",
}
TYPICAL_TOKENS = 220
LEAF_CATEGORIES = ArxivParams.model_fields["categories"].get_default(
    call_default_factory=True
)  # paper Section E


def label_names(cfg: ArxivParams) -> list[str]:
    return list(cfg.categories)


def paper_time(row: dict, time_field: str):
    """(datetime or None, reason if None) from the configured time field."""
    if time_field == "update_date":
        value = row.get("update_date")
        if not value:
            return None, "missing_timestamp"
        return parse_date(value), "bad_timestamp"
    versions = row.get("versions")
    if (
        not isinstance(versions, list)
        or not versions
        or not isinstance(versions[0], dict)
        or not versions[0].get("created")
    ):
        return None, "missing_timestamp"
    return parse_rfc2822(versions[0]["created"]), "bad_timestamp"


def read(cfg: ArxivParams, ledger: Ledger) -> Iterator[dict]:
    """The line-by-line reader: the baseline, and the fallback of the fast path for the rows it must see."""
    path, record = snapshot(cfg)
    ledger.file(path.name)
    try:
        for lineno, raw, row in iter_json_lines(path):
            rec = record(row, f"{path.name}:{lineno}", raw, ledger)
            if rec is not None:
                yield rec
    except DamagedFile as e:  # a cut or corrupt .gz: its rows before the damage are kept
        ledger.damaged(path.name, e.reason)


def snapshot(cfg: ArxivParams):
    """(the snapshot's path, row_record bound to the configured categories and time field)."""
    path = Path(cfg.source)
    if not path.is_file():
        raise missing_source("arxiv", path, "the arXiv metadata snapshot (JSON lines)")
    index = {c: i for i, c in enumerate(label_names(cfg))}
    return path, functools.partial(
        row_record,
        index=index,
        time_field=cfg.time_field,
        inclusion=cfg.inclusion,
        separator=cfg.separator,
        row_rules=cfg.row_rules,
    )


def row_record(
    row,
    where: str,
    raw: bytes,
    ledger: Ledger,
    index: dict[str, int],
    time_field: str,
    inclusion: str = "any",
    separator: str = "\n",
    row_rules: str = "ours",
) -> dict | None:
    """One parsed line -> its record, or None after filtering or quarantining it (`row_rules`: ours or
    authors, the module doc)."""
    if not isinstance(row, dict):
        ledger.quarantine(where, "malformed_json", raw_text(raw))
        return None
    if not row.get("id"):
        ledger.quarantine(where, "missing_id", raw_text(raw))
        return None
    cats = row.get("categories")
    if not isinstance(cats, str):
        ledger.quarantine(where, "missing_categories", raw_text(raw))
        return None

    tokens = cats.split() if row_rules == "ours" else [c.strip() for c in cats.split(" ")]
    label = [0] * len(index)
    for c in tokens:
        i = index.get(c)
        if i is not None:
            label[i] = 1
    if not any(label):
        ledger.filter("no_kept_category")
        return None
    if inclusion == "all" and any(c not in index for c in tokens):
        ledger.filter("other_category")
        return None

    time, reason = paper_time(row, time_field)
    if time is None:
        ledger.quarantine(where, reason, raw_text(raw))
        return None

    title, abstract = row.get("title"), row.get("abstract")
    title = normalize_ws(title) if isinstance(title, str) else ""
    abstract = normalize_ws(abstract) if isinstance(abstract, str) else ""
    text = f"{title}{separator}{abstract}"
    if row_rules == "authors":
        text = text.strip()
    elif not title and not abstract:
        ledger.quarantine(where, "empty_text", raw_text(raw))
        return None

    return {"id": str(row["id"]), "time": time, "label": label, "text": text}


# ---------------------------------------------------------------- fast path (drift.data.datasets._fast)

SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("categories", pa.string()),
        ("title", pa.string()),
        ("abstract", pa.string()),
        ("versions", pa.list_(pa.struct([("created", pa.string())]))),
        ("update_date", pa.string()),
    ]
)
# the forms parse_rfc2822's split and parse_date read; a time in any other form goes to row_record
MONTH_NAMES = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
RFC2822_GMT = (
    r"^[A-Za-z]{3}, (?P<d>[0-9]{1,2}) (?P<b>" + "|".join(MONTH_NAMES) + r") (?P<Y>[1-9][0-9]{3}) "
    r"(?P<H>[01][0-9]|2[0-3]):(?P<M>[0-5][0-9]):(?P<S>[0-5][0-9]) GMT$"
)
ISO_DATE = r"^(?P<Y>[1-9][0-9]{3})-(?P<m>[0-9]{2})-(?P<d>[0-9]{2})$"


def records_schema(n_labels: int) -> pa.Schema:
    return pa.schema(
        [
            ("id", pa.string()),
            ("time", pa.timestamp("us")),
            ("label", pa.list_(pa.int8(), n_labels)),
            ("text", pa.string()),
        ]
    )


def normalized(text) -> pa.ChunkedArray:
    """normalize_ws on a column of rows without RARE_WHITESPACE: split at runs of ASCII whitespace, joined
    by one space; null -> "". Three times faster than a regex replace."""
    return pc.utf8_trim(pc.binary_join(pc.ascii_split_whitespace(or_empty(text)), " "), " ")


def column_times(table: pa.Table, time_field: str) -> pa.ChunkedArray:
    """The time of each row whose time field has the common form; null for the others (row_record's)."""
    if time_field == "update_date":
        parts = pc.extract_regex(table["update_date"], ISO_DATE)
        month = pc.cast(pc.struct_field(parts, "m"), pa.int64())
        text = pc.binary_join_element_wise(*(pc.struct_field(parts, f) for f in "Ymd"), " ")
        time = pc.strptime(text, "%Y %m %d", "us", error_is_null=True)
    else:
        versions = table["versions"]
        first = pc.if_else(
            pc.fill_null(pc.greater(pc.list_value_length(versions), 0), False),
            versions,
            pa.scalar(None, versions.type),
        )  # list_element refuses an empty list
        parts = pc.extract_regex(pc.struct_field(pc.list_element(first, 0), "created"), RFC2822_GMT)
        month = pc.index_in(pc.struct_field(parts, "b"), pa.array(MONTH_NAMES))
        month = pc.add(pc.cast(month, pa.int64()), 1)
        text = pc.binary_join_element_wise(*(pc.struct_field(parts, f) for f in "YbdHMS"), " ")
        time = pc.strptime(text, "%Y %b %d %H %M %S", "us", error_is_null=True)
    # Arrow's strptime rolls Feb 30 over to Mar 2 where datetime() refuses it: such a row goes to row_record
    day = pc.cast(pc.struct_field(parts, "d"), pa.int64())
    exact = pc.and_(pc.equal(pc.day(time), day), pc.equal(pc.month(time), month))
    return pc.if_else(pc.fill_null(exact, False), time, pa.scalar(None, time.type))


def vectorise(
    table: pa.Table,
    index: dict[str, int],
    time_field: str,
    inclusion: str = "any",
    separator: str = "\n",
    row_rules: str = "ours",
):
    """row_record as column operations: papers outside the label space are filtered here, papers whose checks
    all pass are kept, the rest (bad or unusual rows) fall back to row_record. With `row_rules` authors, the
    rows where the two rules differ fall back too: categories not cut by single spaces alone, a paper with an
    empty title or abstract."""
    ids, cats = table["id"], table["categories"]
    labels = [
        pc.fill_null(pc.match_substring_regex(cats, f"(^|[{WS_CLASS}]){re.escape(c)}([{WS_CLASS}]|$)"), False)
        for c in index
    ]
    any_label = functools.reduce(pc.or_, labels) if labels else pa.repeat(False, table.num_rows)
    id_and_cats = pc.fill_null(pc.and_(pc.greater(pc.utf8_length(ids), 0), pc.is_valid(cats)), False)
    if row_rules == "authors":
        # categories a single space apart and no other whitespace: there split() and split(" ") agree
        single_spaced = pc.match_substring_regex(cats, f"^[^{WS_CLASS}]+( [^{WS_CLASS}]+)*$")
        id_and_cats = pc.and_(id_and_cats, pc.fill_null(single_spaced, False))
    filtered = pc.and_(id_and_cats, pc.invert(any_label)).to_numpy()
    candidate = pc.and_(id_and_cats, any_label)
    other = np.zeros(table.num_rows, bool)
    if inclusion == "all":  # a paper with a category outside the label space is filtered too
        tokens = pc.utf8_split_whitespace(pc.fill_null(cats, ""))
        flat = pc.list_flatten(tokens)
        # Arrow splits at Python's whitespace characters but leaves an empty token where the text starts or
        # ends with one; str.split() has none
        outside = pc.and_(
            pc.invert(pc.is_in(flat, pa.array(list(index), pa.string()))), pc.greater(pc.utf8_length(flat), 0)
        ).to_numpy(False)
        other[np.unique(pc.list_parent_indices(tokens).to_numpy()[outside])] = True
        other &= candidate.to_numpy(False)
        candidate = pc.and_(candidate, pa.array(~other))
    papers = table.filter(candidate)  # the time and the text of the papers in the label space only
    time = column_times(papers, time_field)
    title, abstract = normalized(papers["title"]), normalized(papers["abstract"])
    has_title, has_abstract = pc.greater(pc.utf8_length(title), 0), pc.greater(pc.utf8_length(abstract), 0)
    # authors: an empty side means a stripped separator, row_record's to join
    has_text = pc.and_(has_title, has_abstract) if row_rules == "authors" else pc.or_(has_title, has_abstract)
    rare = pc.or_(
        pc.fill_null(pc.match_substring_regex(papers["title"], RARE_WHITESPACE), False),
        pc.fill_null(pc.match_substring_regex(papers["abstract"], RARE_WHITESPACE), False),
    )
    kept = pc.fill_null(pc.and_(pc.and_(pc.is_valid(time), has_text), pc.invert(rare)), False)
    candidate = candidate.to_numpy()
    flags = (
        np.stack([lab.to_numpy()[candidate] for lab in labels], axis=1).astype(np.int8)
        if labels
        else np.zeros((len(papers), 0), np.int8)
    )
    records = pa.table(
        {
            "id": papers["id"],
            "time": time,
            "label": pa.FixedSizeListArray.from_arrays(pa.array(flags.reshape(-1), pa.int8()), len(index)),
            "text": pc.binary_join_element_wise(title, abstract, separator),
        },
        schema=records_schema(len(index)),
    ).filter(kept)
    keep = np.zeros(table.num_rows, bool)
    keep[np.flatnonzero(candidate)[kept.to_numpy()]] = True
    n_filtered, n_other = int(filtered.sum()), int(other.sum())
    counts = {
        **({"no_kept_category": n_filtered} if n_filtered else {}),
        **({"other_category": n_other} if n_other else {}),
    }
    return records, keep, ~(keep | filtered | other), counts


def read_batches(cfg: ArxivParams) -> Iterator[Batch]:
    """The fast path: Batches of the snapshot, in order (drift.data.datasets._fast)."""
    path, record = snapshot(cfg)
    index = record.keywords["index"]
    yield from fast_batches(
        path,
        SCHEMA,
        functools.partial(
            vectorise,
            index=index,
            time_field=cfg.time_field,
            inclusion=cfg.inclusion,
            separator=cfg.separator,
            row_rules=cfg.row_rules,
        ),
        record,
        records_schema(len(index)),
    )


def download_targets(cfg) -> list[tuple[str, Path]]:
    """`drift fetch arxiv`: the snapshot's (url, destination)."""
    if not cfg.url:  # Kaggle serves it to signed-in users only
        raise DriftError(
            f"arxiv: the snapshot needs a Kaggle account: download it from {MANUAL_URL} (or "
            f"`kaggle datasets download Cornell-University/arxiv`), unzip it and put "
            f"arxiv-metadata-oai-snapshot.json at {cfg.source}; or set arxiv.url to a copy you can reach"
        )
    return [(cfg.url, Path(cfg.source))]


def raw_inputs(cfg) -> list[Path]:
    """`drift track arxiv`: the snapshot."""
    path = Path(cfg.source)
    if not path.is_file():
        raise missing_source("arxiv", path, "the arXiv metadata snapshot (JSON lines)")
    return [path]

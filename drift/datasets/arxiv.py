"""arXiv (paper Section 3.1.3, Appendix B.3, Section E): multi-label subject classification from title + abstract.

Source: the Kaggle/Cornell metadata snapshot `arxiv-metadata-oai-snapshot.json`, one JSON object per line
(about 2.9 million lines, 4.5 GB; a `.gz` of it is read too). It is streamed line by line.

cfg keys (the `arxiv` section of params.yaml):
    source      the snapshot file (default data/raw/arxiv/arxiv-metadata-oai-snapshot.json)
    categories  the label space, in label order (default: the paper's seven leaf categories)
    time_field  "first_version" (default: versions[0].created, RFC 2822, when the paper first appeared)
                or "update_date" ("2008-11-13", the date of the last version)
    url, sha256 download only (drift.fetch): the snapshot's URL and optional sha256
    strict      read by the ingest driver: stop at the first bad row instead of quarantining it

Record: id = arXiv id, label = [0/1 per category, in cfg order] from the space-separated `categories` field,
text = title + "\\n" + abstract, each with its whitespace collapsed (the snapshot hard-wraps them).
A paper with none of the categories is filtered ("no_kept_category"): that check comes first, so the two
thirds of the snapshot outside the label space are dropped without being judged. Bad rows are quarantined
with reasons: malformed_json, missing_id, missing_categories, missing_timestamp, bad_timestamp, empty_text.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from drift.datasets._io import iter_json_lines, missing_source, normalize_ws, parse_date, parse_rfc2822, raw_text
from drift.ledger import Ledger
from drift.params import TIME_FIELDS, ArxivParams

NAME = "arxiv"
TASK = "multilabel"
MODALITY = "text"
DEFAULT_SOURCE = ArxivParams.model_fields["source"].default  # drift.params holds it
LEAF_CATEGORIES = ArxivParams.model_fields["categories"].get_default(call_default_factory=True)  # paper Section E


def label_names(cfg: ArxivParams | dict) -> list[str]:
    return list(ArxivParams.of(cfg).categories)


def paper_time(row: dict, time_field: str):
    """(datetime or None, reason if None) from the configured time field."""
    if time_field == "update_date":
        value = row.get("update_date")
        if not value:
            return None, "missing_timestamp"
        return parse_date(value), "bad_timestamp"
    versions = row.get("versions")
    if not isinstance(versions, list) or not versions or not isinstance(versions[0], dict) \
            or not versions[0].get("created"):
        return None, "missing_timestamp"
    return parse_rfc2822(versions[0]["created"]), "bad_timestamp"


def read(cfg: ArxivParams | dict, ledger: Ledger) -> Iterator[dict]:
    cfg = ArxivParams.of(cfg)  # an unknown time_field stops here, listing TIME_FIELDS
    path, time_field = Path(cfg.source), cfg.time_field
    if not path.is_file():
        raise missing_source(NAME, path, "the arXiv metadata snapshot (JSON lines)")
    categories = label_names(cfg)
    index = {c: i for i, c in enumerate(categories)}

    for lineno, raw, row in iter_json_lines(path):
        where = f"{path.name}:{lineno}"
        if not isinstance(row, dict):
            ledger.quarantine(where, "malformed_json", raw_text(raw))
            continue
        if not row.get("id"):
            ledger.quarantine(where, "missing_id", raw_text(raw))
            continue
        cats = row.get("categories")
        if not isinstance(cats, str):
            ledger.quarantine(where, "missing_categories", raw_text(raw))
            continue

        label = [0] * len(categories)
        for c in cats.split():
            i = index.get(c)
            if i is not None:
                label[i] = 1
        if not any(label):
            ledger.filter("no_kept_category")
            continue

        time, reason = paper_time(row, time_field)
        if time is None:
            ledger.quarantine(where, reason, raw_text(raw))
            continue

        title, abstract = row.get("title"), row.get("abstract")
        title = normalize_ws(title) if isinstance(title, str) else ""
        abstract = normalize_ws(abstract) if isinstance(abstract, str) else ""
        if not title and not abstract:
            ledger.quarantine(where, "empty_text", raw_text(raw))
            continue

        yield {"id": str(row["id"]), "time": time, "label": label, "text": f"{title}\n{abstract}"}

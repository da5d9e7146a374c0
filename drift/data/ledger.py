"""Every input row accounted for: kept + filtered (by a rule) + quarantined (bad, with a reason) = read."""
from __future__ import annotations

from collections import Counter

from drift.core.errors import DriftError


class Ledger:
    """Counts what an ingest did with each input row; keeps the bad rows with their reasons.

    A dataset reader calls `filter(rule)` for a row a rule drops (not an error), `quarantine(where, reason)`
    for a bad row, and yields the rows it keeps; the ingest driver calls `keep()` for each row it writes.
    With `strict=True` the first bad row raises a one-line DriftError naming where it was.
    """

    def __init__(self, dataset: str, strict: bool = False):
        self.dataset = dataset
        self.strict = strict
        self.kept = 0
        self.filtered: Counter[str] = Counter()
        self.quarantined: Counter[str] = Counter()
        self.bad_rows: list[dict] = []  # {"where", "reason", "raw"}: written beside the dataset

    def keep(self) -> None:
        self.kept += 1

    def filter(self, rule: str) -> None:
        self.filtered[rule] += 1

    def quarantine(self, where: str, reason: str, raw: str | None = None) -> None:
        if self.strict:
            raise DriftError(
                f"{self.dataset}: bad input at {where}: {reason} "
                f"(strict mode; set {self.dataset}.strict: false to quarantine bad rows and go on)"
            )
        self.quarantined[reason] += 1
        self.bad_rows.append({"where": where, "reason": reason, "raw": None if raw is None else str(raw)[:2000]})

    @property
    def read(self) -> int:
        return self.kept + sum(self.filtered.values()) + sum(self.quarantined.values())

    def counts(self) -> dict:
        return {
            "read": self.read,
            "kept": self.kept,
            "filtered": sum(self.filtered.values()),
            "quarantined": sum(self.quarantined.values()),
            "filtered_by_rule": dict(sorted(self.filtered.items())),
            "quarantined_by_reason": dict(sorted(self.quarantined.items())),
        }

"""Every input row accounted for: kept + filtered (by a rule) + quarantined (bad, with a reason) = read, for
the dataset and for each file it reads; a damaged file is quarantined by name, and what vanished gets a
warning."""

from __future__ import annotations

from collections import Counter

from drift.core.errors import DriftError

SECONDS_RULE = "time_outside_span"  # the rule under which timestamps in the wrong unit vanish


class Ledger:
    """Counts what an ingest did with each input row; keeps the bad rows with their reasons.

    A dataset reader calls `file(name)` before the rows of each file it reads, `filter(rule)` for a row a rule
    drops (not an error), `quarantine(where, reason)` for a bad row, `damaged(name, reason)` for a file that
    ends early or does not decompress (its rows before the damage kept), and yields the rows it keeps; the
    ingest driver calls `keep()` for each row it writes. With `strict=True` the first bad row or damaged file
    raises a one-line DriftError naming where it was.
    """

    def __init__(self, dataset: str, strict: bool = False):
        self.dataset = dataset
        self.strict = strict
        self.kept = 0
        self.filtered: Counter[str] = Counter()
        self.quarantined: Counter[str] = Counter()
        self.bad_rows: list[dict] = []  # {"where", "reason", "raw"}: written beside the dataset
        self.source = ""  # the file whose rows are being counted; "" for a reader that reads no files
        self.files: dict[str, dict] = {}  # file -> {kept, filtered, quarantined, seconds_like}
        self.damaged_files: dict[str, str] = {}  # file -> why it was quarantined

    def file(self, name: str) -> None:
        self.source = name
        self._counts()

    def _counts(self) -> dict | None:
        if not self.source:
            return None
        return self.files.setdefault(
            self.source, {"kept": 0, "filtered": Counter(), "quarantined": Counter(), "seconds_like": 0}
        )

    def keep(self, n: int = 1) -> None:
        self.kept += n
        if (counts := self._counts()) is not None:
            counts["kept"] += n

    def filter(self, rule: str, n: int = 1, seconds_like: int = 0) -> None:
        """`n` rows dropped by `rule`; `seconds_like` of them have a time in January-February 1970, where a
        timestamp in seconds read as milliseconds lands."""
        self.filtered[rule] += n
        if (counts := self._counts()) is not None:
            counts["filtered"][rule] += n
            counts["seconds_like"] += seconds_like

    def quarantine(self, where: str, reason: str, raw: str | None = None) -> None:
        if self.strict:
            raise DriftError(
                f"{self.dataset}: bad input at {where}: {reason} "
                f"(strict mode; set {self.dataset}.strict: false to quarantine bad rows and go on)"
            )
        self.quarantined[reason] += 1
        if (counts := self._counts()) is not None:
            counts["quarantined"][reason] += 1
        self.bad_rows.append(
            {"where": where, "reason": reason, "raw": None if raw is None else str(raw)[:2000]}
        )

    def damaged(self, name: str, reason: str) -> None:
        """File `name` stopped at damage (or at a limit on what a file may cost): its readable rows are
        counted already; the file is quarantined by name (the quarantine table's `where` is the file, its
        reason `damaged_file`, its raw the detail). A reader that counts no file (`file` never called) gets no
        per-file counts from it either."""
        if self.strict:
            raise DriftError(
                f"{self.dataset}: {name} is damaged: {reason} (strict mode; set {self.dataset}.strict: "
                f"false to keep its readable rows, quarantine the file and go on, or download it again)"
            )
        if self.files:
            self.file(name)
        self.damaged_files[name] = reason
        self.bad_rows.append({"where": name, "reason": "damaged_file", "raw": reason})

    @property
    def read(self) -> int:
        return self.kept + sum(self.filtered.values()) + sum(self.quarantined.values())

    def file_counts(self) -> dict[str, dict]:
        out = {}
        for name, c in self.files.items():
            filtered, quarantined = sum(c["filtered"].values()), sum(c["quarantined"].values())
            out[name] = {
                "read": c["kept"] + filtered + quarantined,
                "kept": c["kept"],
                "filtered": filtered,
                "quarantined": quarantined,
                "filtered_by_rule": dict(sorted(c["filtered"].items())),
                "quarantined_by_reason": dict(sorted(c["quarantined"].items())),
            }
            if name in self.damaged_files:
                out[name]["damaged"] = self.damaged_files[name]
        return out

    def warnings(self) -> list[str]:
        """One line per file whose rows vanished: damaged, empty, or every row dropped by one rule or reason
        (timestamps that look like seconds instead of milliseconds say so)."""
        lines = [
            f"{self.dataset}: {name} is damaged ({reason}): quarantined, its rows before the damage kept"
            for name, reason in self.damaged_files.items()
            if name not in self.files
        ]
        for name, c in self.file_counts().items():
            prefix = f"{self.dataset}: {name}"
            seconds = self.files[name]["seconds_like"]
            unit = (
                f"; {seconds} of its timestamps land in January-February 1970: seconds since the epoch where "
                f"milliseconds are expected?"
                if seconds
                else ""
            )
            if "damaged" in c:
                lines.append(
                    f"{prefix} is damaged ({c['damaged']}): quarantined, {c['kept']} rows read before the "
                    f"damage kept; download it again"
                )
            elif c["read"] == 0:
                lines.append(f"{prefix} contributed no rows: it holds none (an empty file?)")
            elif c["kept"] == 0:
                every = {
                    **{f"filtered by {r}": n for r, n in c["filtered_by_rule"].items()},
                    **{f"quarantined as {r}": n for r, n in c["quarantined_by_reason"].items()},
                }
                if len(every) == 1:
                    how = f"all {c['read']} rows {next(iter(every))}"
                else:
                    how = f"{c['read']} rows, " + ", ".join(f"{n} {what}" for what, n in every.items())
                lines.append(f"{prefix} contributed no rows: {how}{unit}")
            elif seconds:
                lines.append(f"{prefix}: {seconds} rows {SECONDS_RULE}{unit}")
        return lines

    def counts(self) -> dict:
        out = {
            "read": self.read,
            "kept": self.kept,
            "filtered": sum(self.filtered.values()),
            "quarantined": sum(self.quarantined.values()),
            "filtered_by_rule": dict(sorted(self.filtered.items())),
            "quarantined_by_reason": dict(sorted(self.quarantined.items())),
        }
        if self.files:
            out["files"] = self.file_counts()
        if self.files or self.damaged_files:
            out["damaged_files"] = dict(sorted(self.damaged_files.items()))
        out["warnings"] = self.warnings()
        return out

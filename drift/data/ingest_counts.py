"""What the ingest stage writes beside the records: IngestCounts (metrics/ingest/<dataset>.json, a DVC
metric)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from drift.core.artefact import Artefact


class FileCounts(BaseModel):
    """One input file's rows: read = kept + filtered + quarantined; `damaged`: why it could not be read whole."""

    model_config = ConfigDict(extra="forbid")

    read: int
    kept: int
    filtered: int
    quarantined: int
    filtered_by_rule: dict[str, int]
    quarantined_by_reason: dict[str, int]
    damaged: str | None = None


class IngestCounts(Artefact):
    """metrics/ingest/<dataset>.json: every input row accounted for (read = kept + filtered by a named rule +
    quarantined with a reason), per file when the source is a folder of files (`files`, `damaged_files`), one
    warning line per file whose rows vanished, the configured `span` and the records' own `data_span`."""

    WRITER = "ingest"
    WHAT = "ingest counts file"

    dataset: str
    read: int
    kept: int
    filtered: int
    quarantined: int
    filtered_by_rule: dict[str, int]
    quarantined_by_reason: dict[str, int]
    files: dict[str, FileCounts] | None = None
    damaged_files: dict[str, str] | None = None
    warnings: list[str]
    span: tuple[str, str]
    data_span: tuple[str | None, str | None]

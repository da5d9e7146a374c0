"""The registry of datasets. Each dataset is one module here that reads its source into canonical records.

A dataset module defines NAME (the registry name), TASK ("binary" | "regression" | "multilabel",
drift.protocol.tasks), MODALITY ("text" | "image"), `label_names(cfg) -> list[str]` ([] for regression) and
`read(cfg, ledger: Ledger) -> Iterator[dict]`: it streams the source cfg names (the dataset's section of
params.yaml as its drift.core.params model, every default filled) and yields per kept row {"id": str, "time":
naive UTC datetime, "label": int | float | list[int], and "text": str or "image": uint8 array (3, 32, 32)}.
Rows a rule drops call ledger.filter(rule), bad rows ledger.quarantine(where, reason, raw). It never filters by
time (the ingest driver applies cfg.slices); a missing source raises DriftError saying where to put the files
or how to fetch them."""
from __future__ import annotations

import importlib
from types import ModuleType

from drift.core.errors import DriftError, close_matches

# name -> module path; imported lazily so `drift --help` stays fast
DATASETS = {
    "sotu": "drift.data.datasets.sotu",
    "synth-portraits": "drift.data.datasets.synth_portraits",
    "yearbook": "drift.data.datasets.yearbook",
    "amazon": "drift.data.datasets.amazon",
    "arxiv": "drift.data.datasets.arxiv",
}


def get_dataset(name: str) -> ModuleType:
    if name not in DATASETS:
        raise DriftError(f"unknown dataset {name!r}: {close_matches(name, DATASETS)}")
    return importlib.import_module(DATASETS[name])

"""The registry of datasets. Each dataset is one module here that reads its source into canonical records.

A dataset module defines:

    NAME      the registry name ("sotu", "amazon", ...)
    TASK      "binary" | "regression" | "multilabel"   (drift.protocol.tasks)
    MODALITY  "text" | "image"
    def label_names(cfg) -> list[str]      class names (binary: 2, multilabel: C); [] for regression
    def read(cfg, ledger: Ledger) -> Iterator[dict]
        Streams the source named by cfg (the dataset's section of params.yaml: its drift.core.params model, every
        default filled; a plain mapping is validated into one) and yields one dict per kept
        row: {"id": str, "time": datetime.datetime (UTC, naive), "label": int | float | list[int],
              "text": str} for text, or "image": numpy uint8 array (3, 32, 32) for images.
        Rows a rule drops call ledger.filter(rule); bad rows call ledger.quarantine(where, reason, raw).
        It never filters by time: the ingest driver applies the time span of cfg.slices for every dataset.
        A missing source raises DriftError with where to put the files or how to fetch them.
"""
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

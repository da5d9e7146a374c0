"""The dataset table: every dataset's name, task, modality and reader module, the one list of datasets.

The params schema takes its dataset names from here (drift.core.params), the ingest stage imports the reader
(drift.data.datasets.get_dataset) and every later stage reads task and modality from here or the slice
manifest. The module is named by its file stem under drift/data/datasets/, not as a dotted path: the import
closure (drift/core/closure.py) would count a dotted name as an import, and every stage would depend on
every reader again. A dataset of the user's own is configured, not coded: a name of params.yaml `datasets`
that is not in the table is read by TABLE_READER, and its section (`kind: table`) names task and input
(drift/data/datasets/table.py); its row comes from there. params.yaml names no reader: the check stage writes
each dataset's reader and its code digest to data/checked/<name>.json, which its ingest depends on.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from drift.core.artefact import Modality, TaskName
from drift.core.errors import DriftError, close_matches

READERS = "drift/data/datasets"  # the reader of a dataset: READERS/<module>.py
TABLE_MODULE = "table"  # the reader of every configured table
TABLE_READER = f"{READERS}/{TABLE_MODULE}.py"


class Dataset(NamedTuple):
    task: TaskName | Literal[""]  # "": a configured table's section as written, before it names one
    modality: Modality
    module: str  # its reader, drift/data/datasets/<module>.py

    @property
    def reader(self) -> str:
        return f"{READERS}/{self.module}.py"


DATASETS: dict[str, Dataset] = {
    "sotu": Dataset("binary", "text", "sotu"),
    "synth-portraits": Dataset("binary", "image", "synth_portraits"),
    "yearbook": Dataset("binary", "image", "yearbook"),
    "amazon": Dataset("regression", "text", "amazon"),
    "arxiv": Dataset("multilabel", "text", "arxiv"),
}


# the embedded datasets install with the project (a corpus in a pinned package, or generated with pinned
# numpy): their ingest's input is requirements.lock (drift.core.params.EMBEDDED_INPUT)
EMBEDDED = ("sotu", "synth-portraits")
# where a real corpus's files go by default: its `datasets.<name>.input` when params.yaml leaves it out of the
# run
CORPUS_INPUTS = {
    "yearbook": "data/raw/yearbook/faces_aligned_small_mirrored_co_aligned_cropped_cleaned.tar.gz",
    "amazon": "data/raw/amazon",
    "arxiv": "data/raw/arxiv/arxiv-metadata-oai-snapshot.json",
}


def dataset_info(name: str, section=None) -> Dataset:
    """Dataset `name`'s row: a built-in one's, or, given its section (a mapping as written or the typed
    TableParams), a configured table's: its `task`, and modality image when it names an `image` column."""
    if name in DATASETS:
        return DATASETS[name]
    if section is not None:
        get = section.get if isinstance(section, dict) else lambda key: getattr(section, key, None)
        return Dataset(get("task") or "", "image" if get("image") else "text", TABLE_MODULE)
    raise DriftError(
        f"unknown dataset {name!r}: {close_matches(name, DATASETS)} (or a table of your own: "
        f"`drift init {name} <file>`)"
    )

"""The dataset readers: one module per dataset of drift/core/dataset_registry.py's table, read only by the
ingest stage.

A dataset module defines NAME (the registry name), TASK ("binary" | "multiclass" | "regression" |
"multilabel", drift.protocol.tasks), MODALITY ("text" | "image"), `label_names(cfg) -> list[str]` ([] for
regression) and `read(cfg, ledger: Ledger) -> Iterator[dict]`: it streams the source cfg names (the dataset's
section of params.yaml as its drift.core.params model, every default filled) and yields per kept row {"id":
str, "time": naive UTC datetime, "label": int | float | list[int], and "text": str or "image": uint8 array (3,
32, 32)}. Rows a rule drops call ledger.filter(rule), bad rows ledger.quarantine(where, reason, raw). It never
filters by time (the ingest driver applies cfg.slices); a missing source raises DriftError saying where to put
the files or how to fetch them."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

from drift.core.dataset_registry import DATASETS, dataset_info
from drift.core.errors import DriftError
from drift.core.params import DatasetParams, Params, dataset_entry_form, parse

PACKAGE = __name__  # the readers' modules: PACKAGE.<module of the table>


def get_dataset(name: str, section=None) -> ModuleType:
    """Dataset `name`'s module (imported on first use: only ingest and the CLI import readers); a configured
    table's (drift/data/datasets/table.py) given its section (dataset_info)."""
    return importlib.import_module(f"{PACKAGE}.{dataset_info(name, section).module}")


def dataset_params(name: str, value=None) -> DatasetParams:
    """Dataset `name`'s section: `value` if it is one, else the mapping validated with its defaults."""
    model = get_dataset(name).PARAMS
    return value if isinstance(value, model) else parse(model, {} if value is None else value, name)


def dataset_cfg(params: Params, name: str) -> DatasetParams:
    """Dataset `name`'s section of params.yaml (drift.core.params.load_params) typed by its module's PARAMS,
    with `source`, the files its reader reads, filled from `datasets.<name>.input`, the one place they are
    named (DVC tracks the same path); a corpus left out of the run takes its default, and a table's `files`
    picks files of its input folder. A section that writes `source` itself is refused. An unknown name lists
    the valid ones."""
    section = dict(params.section(name))
    if "source" in section:
        raise DriftError(
            f"params.yaml `{name}.source` is an earlier form: a dataset's files are named once, in "
            f"`datasets.{name}.input`; drop {name}.source and write {dataset_entry_form(name, section['source'])}"
        )
    entry = params.datasets.get(name)
    model = get_dataset(name, params.tables.get(name)).PARAMS
    if entry is not None and "source" in model.model_fields:
        files = section.get("files") if name in params.tables else None
        section["source"] = str(Path(entry.input) / files) if files else entry.input
    return parse(model, section, name)


def check_datasets(params: Params) -> None:
    """Every dataset section params.yaml writes, typed by its module: an unknown key or a wrong type in any is
    a one-line DriftError (the check stage, ingest and the CLI run it after load_params)."""
    written = {n for n in DATASETS if n.replace("-", "_") in params.model_fields_set}
    for name in sorted(written | set(params.datasets)):
        dataset_cfg(params, name)

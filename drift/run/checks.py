"""Whether the models of a dataset's run can run on it: known names, the right modality, the encoders their
probes read, the families train.lr names. With drift/data/validate.py (the data), everything that can be checked
before any compute; the check stage runs `validate` for every dataset before any ingest, and the train stage
again, the ingest stage the data part (no torch there).
"""

from __future__ import annotations

import json
from pathlib import Path

from drift.core.closure import ROOT, code_digest, import_closure
from drift.core.encoder_registry import get_encoder_spec
from drift.core.errors import DriftError, close_matches
from drift.core.model_registry import MODELS, get_model_info
from drift.core.params import Params, roster
from drift.core.paths import CHECKED, dataset_paths
from drift.data.validate import validate_names


def check_roster(models: list[str], modality: str, text_encoder: str | None, encoders=()) -> None:
    """Stop before any compute when a model cannot run on this dataset with these encoders."""
    for name in models:
        info = get_model_info(name)
        if modality == "image" and info.input == "tokens":
            raise DriftError(f"{name} is a text head; it cannot run on an image dataset")
        if modality == "image" and info.input == "text":
            raise DriftError(f"{name} reads raw text; it cannot run on an image dataset")
        if modality == "text" and info.input == "pixels":
            raise DriftError(f"{name} is an image model; it cannot run on a text dataset")
        if info.input == "pooled":
            encoder = info.name.removeprefix("probe-")
            if get_encoder_spec(encoder).modality != modality:
                raise DriftError(
                    f"{name} probes a {get_encoder_spec(encoder).modality} encoder; "
                    f"it cannot run on a {modality} dataset"
                )
            available = ([text_encoder] if modality == "text" else []) + list(encoders)
            if encoder not in available:
                raise DriftError(
                    f"{name} needs embeddings from encoder {encoder}, which this run does not compute: "
                    f"add it to embed.encoders (now {list(encoders)}) or drop {name}"
                )


def validate(params: Params, name: str) -> None:
    """What the train stage checks before any compute, beyond the schema (drift.core.params): validate_names,
    then the models of the roster (against the dataset's modality in drift/core/dataset_registry.py) and the families
    of train.lr. The dataset's section and slices are ingest's (drift.data.validate.validate_data)."""
    validate_names(params, name)
    embed = params.embed
    check_roster(
        roster(params.train, name, params.info(name).modality),
        params.info(name).modality,
        embed.text_encoder,
        embed.encoders,
    )
    if isinstance(params.train.lr, dict):
        families = {"default"} | {info.family.lower() for info in MODELS.values()}
        for family in params.train.lr:
            if family not in families:
                raise DriftError(
                    f"unknown parameter train.lr.{family}: "
                    f"{close_matches(family, families, prefix='train.lr.')}"
                )


def check_run(params: Params) -> None:
    """Everything the check stage refuses before any compute: every dataset section params.yaml writes, and for
    each dataset of the run its data (drift.data.validate.validate_data) and its roster (validate). What
    `drift check` runs too, before DVC parses dvc.yaml."""
    from drift.data.datasets import check_datasets, dataset_cfg
    from drift.data.validate import validate_data

    check_datasets(params)
    for name in params.datasets:
        validate_data(params, name, dataset_cfg(params, name))
        validate(params, name)  # the roster: what train would refuse, refused before ingest


def checked_record(params: Params, name: str, code_root: Path = ROOT) -> dict:
    """What dataset `name`'s ingest depends on beyond its raw input and the stage's shared code: its reader (the
    project's: drift/core/dataset_registry.py, or the table reader for a table of the user's) and the digest of the
    reader's code and import closure under `code_root` (drift.core.closure.code_digest: docstrings and comments
    left out)."""
    reader = params.info(name).reader
    return {
        "dataset": name,
        "reader": reader,
        "code": code_digest([reader, *import_closure(code_root / reader, code_root)], code_root),
    }


def write_checked(params: Params, root: Path = Path(".")) -> list[Path]:
    """The check stage's output: data/checked/<name>.json for every dataset of the run (checked_record), the same
    bytes while its reader is unchanged, so each ingest runs after the check and again only when its reader
    changed. The folder holds nothing else (DVC removes it before the stage runs)."""
    (Path(root) / CHECKED).mkdir(parents=True, exist_ok=True)
    written = []
    for name in params.datasets:
        path = dataset_paths(name, root)["checked"]
        path.write_text(json.dumps(checked_record(params, name), indent=2) + "\n")
        written.append(path)
    return written

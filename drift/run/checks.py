"""Whether the models of a dataset's run can run on it: known names, the right modality, the encoders their
probes read, the families train.lr names. With drift/data/validate.py (the data), everything that can be
checked before any compute; the check stage runs `validate` for every dataset before any ingest, and the train
stage again, the ingest stage the data part (no torch there).
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
from drift.run.digests import Digests


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
    then the models of the roster (against the dataset's modality in drift/core/dataset_registry.py) and the
    families of train.lr. The dataset's section and slices are ingest's (drift.data.validate.validate_data).
    """
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
    """Everything the check stage refuses before any compute: every dataset section params.yaml writes, and
    for each dataset of the run its data (drift.data.validate.validate_data) and its roster (validate). What
    `drift check` runs too, before DVC parses dvc.yaml."""
    from drift.data.datasets import check_datasets, dataset_cfg
    from drift.data.validate import validate_data

    check_datasets(params)
    for name in params.datasets:
        validate_data(params, name, dataset_cfg(params, name))
        validate(params, name)  # the roster: what train would refuse, refused before ingest


def table_image_files(cfg) -> list[Path]:
    """The image files a table's rows name (`image_encoding: path`), each resolved inside its root as ingest
    resolves it; a path ingest would quarantine (outside the root, unreadable) is left out here."""
    import tempfile

    from drift.data.datasets.table import (
        OutsideRoot,
        image_column,
        image_path,
        scan_batches,
        source_files,
        source_root,
    )

    root, bound = source_root(cfg.source), Path(cfg.image_root) if cfg.image_root else None
    column, found = image_column(cfg), []
    with tempfile.TemporaryDirectory(prefix="drift-check-") as tmp:
        for path, fmt in source_files(cfg.source, cfg.format):
            for frame in scan_batches(path, fmt, [column], cfg, Path(tmp)):
                for value in frame[column].drop_nulls():
                    try:
                        found.append(image_path(value, root, bound))
                    except (OutsideRoot, OSError, ValueError):
                        continue
    return found


def checked_record(params: Params, name: str, code_root: Path = ROOT, digests: Digests | None = None) -> dict:
    """What dataset `name`'s ingest depends on beyond its raw input and the stage's shared code: its reader
    (the project's: drift/core/dataset_registry.py, or the table reader for a table of the user's), the digest
    of the reader's code and import closure under `code_root` (drift.core.closure.code_digest: docstrings and
    comments left out), and for a table whose rows name image files, `images`: the digest of those files'
    bytes."""
    reader = params.info(name).reader
    record = {
        "dataset": name,
        "reader": reader,
        "code": code_digest([reader, *import_closure(code_root / reader, code_root)], code_root),
    }
    if name in params.tables and params.tables[name].get("image_encoding") == "path":
        from drift.data.datasets import dataset_cfg

        cfg = dataset_cfg(params, name)
        record["images"] = (digests or Digests()).files(table_image_files(cfg))
    return record


def embed_record(params: Params, name: str, digests: Digests | None = None) -> dict:
    """What dataset `name`'s embed depends on beyond its inputs and the embed params: the bytes of the local
    weights (`embed.weights`, or a declared encoder's folder) of each encoder it runs, so other weights under
    the same path re-run it, and the declarations (params.yaml `encoders:`) of the declared ones it runs."""
    encoders = params.embed.dataset_encoders(params.info(name).modality)
    declared = {e: get_encoder_spec(e) for e in encoders if get_encoder_spec(e).declared}
    weights = {
        e: params.embed.weights.get(e) or (declared[e].folder if e in declared else None) for e in encoders
    }
    digests = digests or Digests()
    record: dict = {
        "dataset": name,
        "weights": {e: digests.tree(Path(path)) for e, path in weights.items() if path},
    }
    if declared:  # only then: a run of built-in encoders keeps its bytes
        record["encoders"] = {e: params.encoders[e] for e in declared}
    return record


def train_record(params: Params, name: str) -> dict:
    """What dataset `name`'s train and evaluate depend on beyond their params: the declarations (params.yaml
    `models:`) of the heads of its roster declared there, so a head's size changed re-runs them and a head
    other datasets run does not."""
    declared = {m: params.models[m] for m in params.train.models.get(name) or [] if m in params.models}
    return {"dataset": name, **({"models": declared} if declared else {})}


def write_checked(params: Params, root: Path = Path(".")) -> list[Path]:
    """The check stage's output, for every dataset of the run: data/checked/<name>.json (checked_record),
    which its ingest depends on, data/checked/<name>.embed.json (embed_record), which its embed depends on,
    and data/checked/<name>.train.json (train_record), which its train and evaluate depend on; each the same bytes while what it records is unchanged, so a stage re-runs only when its reader, its
    image files or its weights changed. The folder holds nothing else (DVC removes it before the stage runs).
    """
    (Path(root) / CHECKED).mkdir(parents=True, exist_ok=True)
    digests, written = Digests(), []
    for name in params.datasets:
        paths = dataset_paths(name, root)
        records = {
            "checked": checked_record(params, name, digests=digests),
            "checked_embed": embed_record(params, name, digests),
            "checked_train": train_record(params, name),
        }
        for key, record in records.items():
            paths[key].write_text(json.dumps(record, indent=2) + "\n")
            written.append(paths[key])
    digests.save()
    return written

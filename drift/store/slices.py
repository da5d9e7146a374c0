"""The slice table (`data/slices/<dataset>.lance`): the canonical records with `slice`, `slice_label` and
`split`, as one Lance file, and the small JSON manifest beside it (`<dataset>.json`: slices, task, a content
digest). The file is byte-deterministic (same records, same bytes, so dvc.lock does not change on a re-run):
Lance's 2.0 file format, its schema metadata folded into one JSON entry (`drift`), never a Lance dataset
directory (random file names, a timestamped manifest)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
from lance.file import LanceFileReader, LanceFileWriter
from pydantic import BaseModel, ConfigDict

from drift.core.artefact import Artefact, Modality, TaskName
from drift.core.errors import DriftError
from drift.core.params import DatasetParams, SplitParams
from drift.data.records import records_manifest
from drift.protocol.slicing import build_slices

# Lance's 2.1 file format picks encodings from samples, so its bytes vary run to run; 2.0's do not
FILE_FORMAT = "2.0"
METADATA_KEY = b"drift"


class SliceInfo(BaseModel):
    """One slice of the manifest: its rows and split, and whether it has a row (`trainable`: enough rows and a
    training row) and a column (`usable`: enough rows and a test row) in the drift matrix."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    index: int
    label: str
    start: str
    end: str
    rows: int
    test: int
    train: int
    trainable: bool
    usable: bool


class SliceManifest(Artefact):
    """data/slices/<dataset>.json, beside the slice table: the slices, the task, modality and label names, and
    (once the table is written) its row count and a digest of its id, key, slice, split and label columns."""

    WRITER = "slice"
    WHAT = "slice manifest"

    dataset: str
    task: TaskName
    modality: Modality
    label_names: list[str]
    min_samples: int
    slices: list[SliceInfo]
    rows: int | None = None  # set by write_slice_table
    digest: str | None = None

    def labels(self) -> list[str]:
        return [s.label for s in self.slices]


def hand_manifest(
    dataset: str,
    labels: Sequence[str] = (),
    task: TaskName = "binary",
    modality: Modality = "text",
    label_names: Sequence[str] = ("0", "1"),
) -> SliceManifest:
    """The manifest of a slice table built by hand (tests, benchmarks), not by the slice stage: one usable,
    trainable slice per label, its dates and counts left empty."""
    slices = [
        SliceInfo(
            index=i, label=label, start="", end="", rows=0, test=0, train=0, trainable=True, usable=True
        )
        for i, label in enumerate(labels)
    ]
    return SliceManifest(
        dataset=dataset,
        task=task,
        modality=modality,
        label_names=list(label_names),
        min_samples=1,
        slices=slices,
    )


def _folded(schema: pa.Schema) -> pa.Schema:
    """Every metadata entry in one sorted JSON value: Lance writes a map's entries in hash order."""
    meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    return schema.with_metadata({METADATA_KEY: json.dumps(meta, sort_keys=True).encode()})


def _unfolded(schema: pa.Schema) -> pa.Schema:
    meta = json.loads((schema.metadata or {}).get(METADATA_KEY, b"{}"))
    return schema.with_metadata({k.encode(): v.encode() for k, v in meta.items()})


def write_slice_table(table: pa.Table, path: Path, manifest: SliceManifest) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    folded = table.replace_schema_metadata(_folded(table.schema).metadata)
    writer = LanceFileWriter(str(tmp), folded.schema, version=FILE_FORMAT)
    writer.write_batch(folded)
    writer.close()
    if path.is_dir():  # a slice table of an earlier version: a Lance dataset directory
        shutil.rmtree(path)
    os.replace(tmp, path)
    digest = hashlib.sha256()
    for name in ("id", "key", "slice", "split", "label"):
        digest.update(name.encode())
        digest.update(json.dumps(table.column(name).to_pylist()).encode())
    manifest.model_copy(update={"rows": table.num_rows, "digest": digest.hexdigest()}).to_file(
        path.with_suffix(".json")
    )


def read_slice_manifest(path: Path) -> SliceManifest:
    """The manifest beside the slice table at `path` (the .lance file), validated."""
    manifest_path = Path(path).with_suffix(".json")
    if not manifest_path.exists():
        raise DriftError(f"no slice table at {path}: run `dvc repro slice@{Path(path).stem}` first")
    return SliceManifest.from_file(manifest_path, Path(path).stem)


def _reader(path: Path, columns: list[str] | None) -> LanceFileReader:
    path = Path(path)
    if not path.exists():
        raise DriftError(f"no slice table at {path}: run `dvc repro slice@<dataset>` first")
    if path.is_dir():
        raise DriftError(
            f"{path} is a slice table of an earlier version (a directory): "
            f"run `dvc repro -f slice@{path.stem}` to rewrite it"
        )
    return LanceFileReader(str(path), columns=columns)


def read_slice_table(path: Path, columns: list[str] | None = None) -> pa.Table:
    """The slice table (or its `columns`), with the schema metadata the slice stage gave it."""
    table = _reader(path, columns).read_all(batch_size=65536).to_table()
    return table.replace_schema_metadata(_unfolded(table.schema).metadata)


def slice_table_batches(path: Path, columns: list[str], batch_size: int):
    """(rows, schema metadata, an iterator of record batches of `columns` in row order)."""
    reader = _reader(path, columns)
    schema = _unfolded(reader.metadata().schema)
    return reader.num_rows(), schema.metadata or {}, reader.read_all(batch_size=batch_size).to_batches()


def image_dtype(path: Path) -> np.dtype:
    """The dtype the slice table's `image` column holds: uint8, or float32 (a reader's unrounded 0-255
    values)."""
    field = _reader(path, ["image"]).metadata().schema.field("image")
    return np.dtype(field.type.value_type.to_pandas_dtype())


def slice_dataset(records, name: str, split_cfg: SplitParams):
    """Dataset `name`'s records -> (the slice table, its manifest: task, modality, label names, slices),
    sliced by the dataset's keys ingest wrote in the records (drift.data.records.records_manifest)."""
    described = records_manifest(records)
    slicing = DatasetParams.of(described["slicing"])  # read back from the records file: validated here, once
    table, slices = build_slices(records, slicing, split_cfg)
    manifest = SliceManifest.parse(
        {
            "dataset": name,
            "task": described["task"],
            "modality": described["modality"],
            "label_names": described["label_names"],
            "min_samples": slicing.min_samples,
            "slices": slices,
        },
        "the records' metadata",
        name,
    )
    return table, manifest


def slice_warnings(manifest: SliceManifest) -> list[str]:
    """One line per reason the dataset's results will be (partly) empty, each naming the cause and the
    setting: fewer than two usable slices (no Future, no Decay), no trainable slice (no f_k: the roster fills
    no cell), a slice with rows but no test rows (its column stays empty). The slice stage prints them."""
    name, slices = manifest.dataset, manifest.slices
    usable = [s.label for s in slices if s.usable]
    lines = []
    if len(usable) < 2:
        lines.append(
            f"{name}: {len(usable)} usable slice(s) ({', '.join(usable) or 'none'}) of {len(slices)}: Future "
            f"and Decay will be empty; spread the rows over more slices ({name}.slices) or lower "
            f"{name}.min_samples (now {manifest.min_samples})"
        )
    if not any(s.trainable for s in slices):
        lines.append(
            f"{name}: no slice has training rows and {manifest.min_samples} or more rows: no model can "
            f"be trained, the roster fills no cell; lower {name}.min_samples or split.test_fraction"
        )
    no_test = [s.label for s in slices if s.rows and not s.test]
    if no_test:
        lines.append(
            f"{name}: slice(s) {', '.join(no_test)} have no test rows: their columns stay empty; raise "
            f"split.test_fraction or widen {name}.slices"
        )
    return lines


def trainable_cutoffs(slice_info: list[SliceInfo]) -> list[int]:
    """The cutoffs k that get a model f_k: slices (a slice manifest's) with enough rows and at least one
    training row."""
    return [s.index for s in slice_info if s.trainable]

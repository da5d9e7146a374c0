"""The slice table (`data/slices/<dataset>.lance`): the canonical records with `slice`, `slice_label` and `split`,
as one Lance file, and the small JSON manifest beside it (`<dataset>.json`: slices, task, a content digest).
The file is byte-deterministic (same records, same bytes, so dvc.lock does not change on a re-run): Lance's
2.0 file format, its schema metadata folded into one JSON entry (`drift`), never a Lance dataset directory
(random file names, a timestamped manifest)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
from lance.file import LanceFileReader, LanceFileWriter

from drift.core.errors import DriftError
from drift.core.params import DatasetParams, SplitParams
from drift.data.records import records_manifest
from drift.protocol.slicing import build_slices

# Lance's 2.1 file format picks encodings from samples, so its bytes vary run to run; 2.0's do not
FILE_FORMAT = "2.0"
METADATA_KEY = b"drift"


def _folded(schema: pa.Schema) -> pa.Schema:
    """Every metadata entry in one sorted JSON value: Lance writes a map's entries in hash order."""
    meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    return schema.with_metadata({METADATA_KEY: json.dumps(meta, sort_keys=True).encode()})


def _unfolded(schema: pa.Schema) -> pa.Schema:
    meta = json.loads((schema.metadata or {}).get(METADATA_KEY, b"{}"))
    return schema.with_metadata({k.encode(): v.encode() for k, v in meta.items()})


def write_slice_table(table: pa.Table, path: Path, manifest: dict) -> None:
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
    manifest = {**manifest, "rows": table.num_rows, "digest": digest.hexdigest()}
    path.with_suffix(".json").write_text(json.dumps(manifest, indent=2) + "\n")


def read_slice_manifest(path: Path) -> dict:
    manifest_path = Path(path).with_suffix(".json")
    if not manifest_path.exists():
        raise DriftError(f"no slice table at {path}: run `dvc repro slice@<dataset>` first")
    return json.loads(manifest_path.read_text())


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
    """The dtype the slice table's `image` column holds: uint8, or float32 (a reader's unrounded 0-255 values)."""
    field = _reader(path, ["image"]).metadata().schema.field("image")
    return np.dtype(field.type.value_type.to_pandas_dtype())


def slice_dataset(records, name: str, split_cfg: SplitParams):
    """Dataset `name`'s records -> (the slice table, its manifest: task, modality, label names, slices), sliced
    by the dataset's keys ingest wrote in the records (drift.data.records.records_manifest)."""
    described = records_manifest(records)
    slicing = DatasetParams.of(described["slicing"])  # read back from the records file: validated here, once
    table, slices = build_slices(records, slicing, split_cfg)
    manifest = {
        "dataset": name,
        "task": described["task"],
        "modality": described["modality"],
        "label_names": described["label_names"],
        "min_samples": slicing.min_samples,
        "slices": slices,
    }
    return table, manifest


def slice_warnings(manifest: dict) -> list[str]:
    """One line per reason the dataset's results will be (partly) empty, each naming the cause and the setting:
    fewer than two usable slices (no Future, no Decay), no trainable slice (no f_k: the roster fills no cell),
    a slice with rows but no test rows (its column stays empty). The slice stage prints them."""
    name, slices = manifest["dataset"], manifest["slices"]
    usable = [s["label"] for s in slices if s["usable"]]
    lines = []
    if len(usable) < 2:
        lines.append(
            f"{name}: {len(usable)} usable slice(s) ({', '.join(usable) or 'none'}) of {len(slices)}: Future "
            f"and Decay will be empty; spread the rows over more slices ({name}.slices) or lower "
            f"{name}.min_samples (now {manifest['min_samples']})"
        )
    if not any(s["trainable"] for s in slices):
        lines.append(
            f"{name}: no slice has training rows and {manifest['min_samples']} or more rows: no model can "
            f"be trained, the roster fills no cell; lower {name}.min_samples or split.test_fraction"
        )
    no_test = [s["label"] for s in slices if s["rows"] and not s["test"]]
    if no_test:
        lines.append(
            f"{name}: slice(s) {', '.join(no_test)} have no test rows: their columns stay empty; raise "
            f"split.test_fraction or widen {name}.slices"
        )
    return lines


def trainable_cutoffs(slice_info: list[dict]) -> list[int]:
    """The cutoffs k that get a model f_k: slices (a slice manifest's) with enough rows and at least one training
    row."""
    return [s["index"] for s in slice_info if s.get("trainable", s["usable"])]

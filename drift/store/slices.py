"""The slice table (`data/slices/<dataset>.lance`): the canonical records with `slice`, `slice_label` and `split`,
and the small JSON manifest beside it (`<dataset>.json`: slices, task, a content digest), so that what downstream
stages depend on is deterministic even though Lance file names are random."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import lance
import pyarrow as pa

from drift.core.errors import DriftError
from drift.core.params import DatasetParams, SplitParams
from drift.data.records import records_manifest
from drift.protocol.slicing import build_slices


def write_slice_table(table: pa.Table, path: Path, manifest: dict) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    lance.write_dataset(table, str(path), mode="overwrite" if Path(path).exists() else "create")
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


def read_slice_table(path: Path, columns: list[str] | None = None) -> pa.Table:
    if not Path(path).exists():
        raise DriftError(f"no slice table at {path}: run `dvc repro slice@<dataset>` first")
    return lance.dataset(str(path)).to_table(columns=columns)


def slice_dataset(records, name: str, split_cfg: SplitParams):
    """Dataset `name`'s records -> (the slice table, its manifest: task, modality, label names, slices), sliced
    by the dataset's keys ingest wrote in the records (drift.data.records.records_manifest)."""
    described = records_manifest(records)
    slicing = DatasetParams.of(described["slicing"])  # read back from the records file: validated here, once
    table, slices = build_slices(records, slicing, split_cfg)
    manifest = {"dataset": name, "task": described["task"], "modality": described["modality"],
                "label_names": described["label_names"], "min_samples": slicing.min_samples, "slices": slices}
    return table, manifest


def slice_warnings(manifest: dict) -> list[str]:
    """One line per reason the dataset's results will be (partly) empty, each naming the cause and the setting:
    fewer than two usable slices (no Future, no Decay), no trainable slice (no f_k: the roster fills no cell),
    a slice with rows but no test rows (its column stays empty). The slice stage prints them."""
    name, slices = manifest["dataset"], manifest["slices"]
    usable = [s["label"] for s in slices if s["usable"]]
    lines = []
    if len(usable) < 2:
        lines.append(f"{name}: {len(usable)} usable slice(s) ({', '.join(usable) or 'none'}) of {len(slices)}: Future "
                     f"and Decay will be empty; spread the rows over more slices ({name}.slices) or lower "
                     f"{name}.min_samples (now {manifest['min_samples']})")
    if not any(s["trainable"] for s in slices):
        lines.append(f"{name}: no slice has training rows and {manifest['min_samples']} or more rows: no model can "
                     f"be trained, the roster fills no cell; lower {name}.min_samples or split.test_fraction")
    no_test = [s["label"] for s in slices if s["rows"] and not s["test"]]
    if no_test:
        lines.append(f"{name}: slice(s) {', '.join(no_test)} have no test rows: their columns stay empty; raise "
                     f"split.test_fraction or widen {name}.slices")
    return lines


def trainable_cutoffs(slice_info: list[dict]) -> list[int]:
    """The cutoffs k that get a model f_k: slices (a slice manifest's) with enough rows and at least one training
    row."""
    return [s["index"] for s in slice_info if s.get("trainable", s["usable"])]


"""Lance tables: the slice table and the embedding cache (the feature store).

The slice table (`data/slices/<dataset>.lance`) holds the canonical records with `slice`, `slice_label` and
`split`; a small JSON manifest beside it (`<dataset>.json`) carries the slices, task and a content digest, so
that what downstream stages depend on is deterministic even though Lance file names are random.

The embedding store is one Lance table per encoder fingerprint under a shared cache directory, keyed by the
payload's content hash: pooled vectors as fixed_size_list<float32>[D], token states ragged as
list<fixed_size_list<float16>[D]> plus `n_tokens`, no padding stored. Rows are appended in chunks, each a
commit, so a killed run keeps what it finished; readers take the first row of each key.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from drift.errors import DriftError


# ---------------------------------------------------------------- slice table

def write_slice_table(table: pa.Table, path: Path, manifest: dict) -> None:
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


# ---------------------------------------------------------------- embedding store

def default_cache_dir() -> Path:
    """Where embeddings live: $DRIFT_CACHE_DIR, else ~/.cache/drift (outside any workspace, so queued and
    temporary DVC experiments share it)."""
    return Path(os.environ.get("DRIFT_CACHE_DIR") or Path.home() / ".cache" / "drift").expanduser()


def store_schema(dim: int, with_tokens: bool) -> pa.Schema:
    fields = [pa.field("key", pa.string()), pa.field("pooled", pa.list_(pa.float32(), dim))]
    if with_tokens:
        fields += [pa.field("tokens", pa.list_(pa.list_(pa.float16(), dim))), pa.field("n_tokens", pa.int32())]
    return pa.schema(fields)


class EmbeddingStore:
    """The Lance table of one encoder fingerprint: `<cache_dir>/<encoder>-<fingerprint[:16]>.lance`."""

    def __init__(self, cache_dir: Path, encoder: str, fingerprint: str, dim: int, with_tokens: bool):
        self.path = Path(cache_dir) / f"{encoder}-{fingerprint[:16]}.lance"
        self.dim, self.with_tokens = dim, with_tokens
        self.schema = store_schema(dim, with_tokens)

    def _dataset(self):
        return lance.dataset(str(self.path)) if self.path.exists() else None

    def keys(self) -> pa.Array:
        ds = self._dataset()
        return ds.to_table(columns=["key"]).column("key").combine_chunks() if ds else pa.array([], pa.string())

    def missing(self, keys: list[str]) -> list[str]:
        """The keys not yet stored, deduplicated, in their first-seen order."""
        have = set(self.keys().to_pylist())
        return [k for k in dict.fromkeys(keys) if k not in have]

    def append(self, keys: list[str], pooled: np.ndarray, tokens: list[np.ndarray] | None = None) -> None:
        columns = {"key": pa.array(keys, pa.string()),
                   "pooled": pa.FixedSizeListArray.from_arrays(pa.array(pooled.astype(np.float32).reshape(-1)), self.dim)}
        if self.with_tokens:
            lengths = np.array([len(t) for t in tokens], dtype=np.int32)
            flat = np.concatenate(tokens).astype(np.float16).reshape(-1)
            inner = pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float16()), self.dim)
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
            columns["tokens"] = pa.ListArray.from_arrays(pa.array(offsets), inner)
            columns["n_tokens"] = pa.array(lengths)
        table = pa.Table.from_pydict(columns, schema=self.schema)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        mode = "append" if self.path.exists() else "create"
        try:
            lance.write_dataset(table, str(self.path), mode=mode)
        except Exception:  # another process created the table between our check and write: append to it
            if mode != "create":
                raise
            lance.write_dataset(table, str(self.path), mode="append")

    def _positions(self, keys: list[str]) -> np.ndarray:
        """Row position in the store of each key (first occurrence); a missing key is an error."""
        stored = self.keys()
        first = pc.index_in(pa.array(keys, pa.string()), value_set=stored)
        if first.null_count:
            raise DriftError(f"{first.null_count} rows have no embedding in {self.path}: "
                             "run `dvc repro -f embed@<dataset>` to compute them")
        return first.to_numpy(zero_copy_only=False).astype(np.int64)

    def read_pooled(self, keys: list[str]) -> np.ndarray:
        """[n, D] float32, aligned with keys."""
        positions = self._positions(keys)
        table = self._dataset().take(positions, columns=["pooled"])
        return table.column("pooled").combine_chunks().flatten().to_numpy().reshape(len(keys), self.dim)

    def read_tokens(self, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Token states of each key, ragged: (flat [sum n_i, D] float16, offsets [n+1]) aligned with keys."""
        positions = self._positions(keys)
        tokens = self._dataset().take(positions, columns=["tokens"]).column("tokens").combine_chunks()
        flat = tokens.flatten().flatten().to_numpy().reshape(-1, self.dim)
        offsets = tokens.offsets.to_numpy()
        return flat, (offsets - offsets[0]).astype(np.int64)

    def stats(self) -> dict:
        ds = self._dataset()
        if ds is None:
            return {"path": str(self.path), "rows": 0}
        size = sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())
        return {"path": str(self.path), "rows": ds.count_rows(), "version": ds.version,
                "fragments": len(ds.get_fragments()), "bytes": size}

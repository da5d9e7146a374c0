"""The embedding store (the feature store): one Lance table per encoder fingerprint under the cache directory,
keyed by the payload's content hash: pooled vectors as fixed_size_list<float32>[D] (float16 in a table of
embed.pooled_dtype float16, a field of its fingerprint), token states ragged as
list<fixed_size_list<float16>[D]> plus `n_tokens`, no padding. Writers only append, in chunks, each chunk one
commit (a killed run keeps what it finished); the table is created once, under a file lock on disk, by Lance's
conditional put on object storage (cache_dir s3://bucket/prefix, an ObjectPath). Two writers may commit the
same key: readers take the first row of a key, compaction deletes the later ones and merges small fragments.

Every row carries the CRC-32 of its pooled bytes (`pooled_crc32`) and token bytes (`tokens_crc32`); a row
holding a NaN or an inf is never written. A read whose bytes fail their checksum is never served: the row goes
to `damaged` (key and fragment), and the embed stage discards and recomputes its fragments
(`discard_fragments`); `scan_damage` is what `drift cache verify` reads.
"""

from __future__ import annotations

import fcntl
import json
import zlib
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from lance import LanceOperation
from lance.commit import CommitConflictError
from lance.fragment import write_fragments
from pydantic import BaseModel, ConfigDict

from drift.core.artefact import Artefact
from drift.core.errors import DriftError, disk_full, is_disk_full
from drift.core.objectstore import ObjectPath, location

FRAGMENT_BYTES = 1 << 30  # compaction target per fragment: few files to list, each small enough to rewrite
COMPACT_AFTER = 8  # an embed run compacts once this many under-sized fragments have piled up
FILE_FORMAT: Final = "2.0"  # measured: takes of token states ~2x faster than the 2.1/2.2 structural encodings
NO_KEYS = pa.array([], pa.large_string())


class StoreManifest(BaseModel):
    """One encoder's entry of the embed stage's manifest: the store table it wrote (`store`, under
    embed.cache_dir), its fingerprint and the fields it hashes, the vector width, the rows and a digest of
    their unique keys. `with_tokens` is absent for the text encoder (token states and pooled vectors) and
    false for a probe's encoder (pooled vectors only)."""

    model_config = ConfigDict(extra="forbid")

    encoder: str
    fingerprint: str
    fingerprint_fields: dict[str, Any]  # the encoder's own record (drift.encoders.fingerprint)
    store: str
    dim: int
    rows: int
    keys_sha256: str
    with_tokens: bool | None = None  # None: True

    @property
    def tokens(self) -> bool:
        return self.with_tokens is not False

    @property
    def pooled_dtype(self) -> str:
        """The stored dtype of the pooled vectors: float32, or the fingerprint's `pooled_dtype`."""
        return self.fingerprint_fields.get("pooled_dtype", "float32")

    @property
    def hf_revision(self) -> str | None:
        """The Hugging Face commit the encoder's weights were loaded from (None: a local folder or file)."""
        return self.fingerprint_fields.get("hf_revision")


class EmbeddingsManifest(Artefact):
    """data/embeddings/<dataset>.json, the embed stage's DVC output: {encoders: {name: StoreManifest}}, in the
    order the stage embedded them. Deterministic: an identical re-embedding writes the same bytes."""

    WRITER = "embed"
    WHAT = "embeddings manifest"

    encoders: dict[str, StoreManifest]


def weights_revisions(manifest: EmbeddingsManifest) -> dict[str, str]:
    """{encoder: the Hugging Face commit its weights were loaded from} for the encoders of an embed manifest
    that have one (its `hf_revision`), in the manifest's order: what the environment record adds, so two runs
    can tell whether they used the same weights. Encoders read from a local folder (the default MiniLM) have
    none."""
    return {name: m.hf_revision for name, m in manifest.encoders.items() if m.hf_revision}


class DamagedRows(DriftError):
    """Rows of a store table that a read refused: {key: fragment id} in `damaged`."""

    def __init__(self, path: Path, damaged: dict[str, int]):
        self.path, self.damaged = Path(path), dict(damaged)
        super().__init__(
            f"{len(self.damaged)} rows of the embedding table {self.path} fail their checksum or hold "
            f"non-finite values (first key {next(iter(self.damaged))}): run `dvc repro -f "
            "embed@<dataset>` to compute them again"
        )


def table_name(encoder: str, fingerprint: str) -> str:
    return f"{encoder}-{fingerprint[:16]}.lance"


def find_table(cache_dir: Path | ObjectPath, encoder: str, fingerprint: str) -> str:
    """The table of a fingerprint: named after the encoder that computed it first, so an encoder of another
    name with the same fingerprint (a declaration renamed) finds that one's rows; a new one is named after
    `encoder`."""
    own = table_name(encoder, fingerprint)
    root = location(cache_dir)
    if committed(root / own) or not root.is_dir():
        return own
    found = sorted(p.name for p in root.glob(f"*-{fingerprint[:16]}.lance") if committed(p))
    return found[0] if found else own


CHECKSUM = {"pooled": "pooled_crc32", "tokens": "tokens_crc32"}  # the checksum column of each value column


# embed.pooled_dtype -> the type of the pooled column's values
POOLED_DTYPES = {"float32": pa.float32(), "float16": pa.float16()}


def store_schema(
    dim: int, with_tokens: bool, metadata: dict | None = None, pooled_dtype: str = "float32"
) -> pa.Schema:
    fields = [pa.field("key", pa.string()), pa.field("pooled", pa.list_(POOLED_DTYPES[pooled_dtype], dim))]
    if with_tokens:
        fields += [
            pa.field("tokens", pa.list_(pa.list_(pa.float16(), dim))),
            pa.field("n_tokens", pa.int32()),
        ]
    fields += [pa.field(CHECKSUM["pooled"], pa.uint32())]
    if with_tokens:
        fields += [pa.field(CHECKSUM["tokens"], pa.uint32())]
    return pa.schema(fields, metadata=metadata)


def row_checksums(values: np.ndarray, offsets: np.ndarray | None = None) -> np.ndarray:
    """CRC-32 of each row's bytes, [n] uint32: rows of a 2-d array, or ragged rows (flat values + offsets)."""
    flat = np.ascontiguousarray(values)
    data = flat.reshape(-1).view(np.uint8).data  # the rows' bytes as a memoryview
    row_bytes = flat.itemsize * (flat.shape[1] if flat.ndim > 1 else 1)
    if offsets is None:
        bounds = np.arange(len(flat) + 1, dtype=np.int64) * row_bytes
    else:
        bounds = np.asarray(offsets, np.int64) * row_bytes
    ends: list[int] = bounds.tolist()
    return np.fromiter(
        (zlib.crc32(data[a:b]) for a, b in zip(ends[:-1], ends[1:])), np.uint32, count=len(ends) - 1
    )


def damaged_rows(
    values: np.ndarray, checksums: np.ndarray | None, offsets: np.ndarray | None = None
) -> np.ndarray:
    """Indexes of the rows whose bytes fail their checksum; without checksums (a table written before them),
    of the rows holding a non-finite value. A row that matches its checksum holds what `append` wrote, and
    append never writes a non-finite value."""
    if checksums is not None:
        return np.flatnonzero(row_checksums(values, offsets) != np.asarray(checksums, np.uint32))
    return non_finite_rows(values, offsets)


def non_finite_rows(values: np.ndarray, offsets: np.ndarray | None = None) -> np.ndarray:
    """Indexes of the rows (of a 2-d array, or ragged rows: flat values + offsets) holding a NaN or an inf."""
    if not len(values):
        return np.zeros(0, np.int64)
    bad = np.flatnonzero(~np.isfinite(values).reshape(len(values), -1).all(axis=1))
    if offsets is None or not len(bad):
        return bad
    return np.unique(np.searchsorted(np.asarray(offsets[1:]), bad, side="right"))


def legacy_schema(schema: pa.Schema) -> pa.Schema:
    """The schema of a table written before rows carried checksums."""
    return pa.schema([f for f in schema if f.name not in CHECKSUM.values()], metadata=schema.metadata)


def committed(path: Path | ObjectPath) -> bool:
    """A table with at least one committed version: a process killed while creating it leaves data files only."""
    versions = location(path) / "_versions"
    if isinstance(versions, ObjectPath):
        return any(p.suffix == ".manifest" for p in versions.iterdir())
    return versions.is_dir() and any(p.suffix == ".manifest" for p in versions.iterdir())


def _as_keys(keys) -> pa.Array:
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    return keys.cast(pa.large_string()) if isinstance(keys, pa.Array) else pa.array(keys, pa.large_string())


def _key_column(ds, fragments=None) -> pa.Array:
    if fragments is not None and not fragments:
        return NO_KEYS
    column = ds.scanner(columns=["key"], fragments=fragments, scan_in_order=True).to_table().column("key")
    return _as_keys(column)


def _fragment_state(fragment) -> tuple:
    meta = fragment.metadata
    return meta.id, meta.physical_rows, meta.deletion_file.num_deleted_rows if meta.deletion_file else 0


def _target_rows(ds) -> int:
    """Rows per fragment after compaction: about FRAGMENT_BYTES of data (token states make rows large)."""
    rows = nbytes = 0
    data = location(ds.uri) / "data"
    for fragment in ds.get_fragments():
        rows += fragment.metadata.physical_rows
        nbytes += sum(f.file_size_bytes or (data / f.path).stat().st_size for f in fragment.metadata.files)
    per_row = nbytes / rows if rows and nbytes else 1024
    return int(min(max(FRAGMENT_BYTES // per_row, 1024), 1 << 20))


def _ragged_take(flat: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of a ragged array (flat values + offsets), gathered in one vectorised copy."""
    lengths = (offsets[1:] - offsets[:-1])[rows]
    out = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    index = np.arange(out[-1], dtype=np.int64) + np.repeat(offsets[:-1][rows] - out[:-1], lengths)
    return flat[index], out


class EmbeddingStore:
    """The Lance table of one encoder fingerprint: `<cache_dir>/<encoder>-<fingerprint[:16]>.lance`, the
    encoder being the one that computed it first.

    Reads come from one pinned version (row positions stay valid while other processes append or compact);
    the key column of that version is read once and kept, and only new fragments are read after an append.
    `pooled_dtype` (embed.pooled_dtype) is the dtype appended pooled vectors are stored in; reads give the
    table's own."""

    def __init__(
        self,
        cache_dir: Path | ObjectPath,
        encoder: str,
        fingerprint: str,
        dim: int,
        with_tokens: bool,
        fields: dict | None = None,
        table: str | None = None,
        pooled_dtype: str = "float32",
    ):
        # `table`: its file name when another encoder name computed it first (find_table), or a manifest names
        # it
        self.path = location(cache_dir) / (table or table_name(encoder, fingerprint))
        self.encoder, self.fingerprint, self.dim, self.with_tokens = encoder, fingerprint, dim, with_tokens
        self.pooled_dtype = pooled_dtype
        metadata = {"drift.encoder": encoder, "drift.fingerprint": fingerprint}
        if fields is not None:
            metadata["drift.fingerprint_fields"] = json.dumps(fields, sort_keys=True)
        self.schema = store_schema(dim, with_tokens, metadata, pooled_dtype)
        self._ds: lance.LanceDataset | None = None  # the pinned version
        self._keys = NO_KEYS  # the key of each row of _ds, in take() order
        # (id, rows, deleted) per fragment of _ds: tells an append from a rewrite
        self._state: list[tuple] = []
        # whether the table's rows carry checksums (None: not yet known)
        self._has_checksums: bool | None = None
        self.damaged: dict[
            str, int
        ] = {}  # key -> fragment id of every row a read refused (checksum, non-finite)

    # -- the pinned version

    def refresh(self) -> pa.Array:
        """Move to the latest version; returns the keys it adds. After appends only the new fragments are
        read; after a rewrite (compaction, dedupe) every key is read again (and all are returned)."""
        if not committed(self.path):
            return NO_KEYS
        for attempt in range(3):
            try:
                ds = lance.dataset(str(self.path))
                if self._ds is not None and ds.version == self._ds.version:
                    return NO_KEYS
                fragments = ds.get_fragments()
                state = [_fragment_state(f) for f in fragments]
                known = len(self._state)
                if self._ds is not None and state[:known] == self._state:
                    added = _key_column(ds, fragments[known:])
                    self._keys = pa.concat_arrays([self._keys, added])
                else:
                    added = self._keys = _key_column(ds)
                self._ds, self._state = ds, state
                return added
            except OSError:  # a compaction elsewhere removed the files of the version we opened: again
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def keys(self) -> pa.Array:
        self.refresh()
        return self._keys

    def missing(self, keys) -> list[str]:
        """The keys not yet stored, deduplicated, in their first-seen order."""
        self.refresh()
        unique = pc.unique(_as_keys(keys))
        return unique.filter(pc.invert(pc.is_in(unique, value_set=self._keys))).to_pylist()

    # -- writes

    def append(self, keys, pooled: np.ndarray, tokens=None, lengths=None) -> None:
        """Commit rows as one new fragment. tokens: a list of [n_i, D] arrays, or a flat [sum n_i, D] array
        with `lengths`. The pooled vectors are stored in `pooled_dtype` (rounded to nearest when float16).
        Never touches the pinned version, so a background thread may call it."""
        pooled = np.asarray(pooled, np.float32).astype(self.pooled_dtype, copy=False).reshape(-1, self.dim)
        columns = {
            "key": pa.array(keys, pa.string()),
            "pooled": pa.FixedSizeListArray.from_arrays(pa.array(pooled.reshape(-1)), self.dim),
        }
        if self.with_tokens:
            if lengths is None:
                lengths = [len(t) for t in tokens]
                tokens = np.concatenate(tokens) if len(tokens) else np.zeros((0, self.dim), np.float16)
            lengths = np.asarray(lengths, np.int32)
            flat = np.ascontiguousarray(tokens, dtype=np.float16).reshape(-1)
            inner = pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float16()), self.dim)
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
            columns["tokens"] = pa.ListArray.from_arrays(pa.array(offsets), inner)
            columns["n_tokens"] = pa.array(lengths)
        bad = non_finite_rows(pooled)  # float16 overflows to inf above 65504: refused as well
        if self.with_tokens:
            bad = np.union1d(bad, non_finite_rows(flat.reshape(-1, self.dim), offsets))
        if len(bad):  # never stored, so never served
            raise DriftError(
                f"{self.encoder} gave NaN or inf for {len(bad)} of {len(keys)} rows (first key "
                f"{keys[int(bad[0])]}): nothing of this chunk was stored in {self.path}; check the "
                "encoder's weights, embed.dtype and embed.pooled_dtype"
            )
        columns[CHECKSUM["pooled"]] = pa.array(row_checksums(pooled))
        if self.with_tokens:
            columns[CHECKSUM["tokens"]] = pa.array(row_checksums(flat.reshape(-1, self.dim), offsets))
        try:
            self._create()
            schema = self.schema if self._checksummed() else legacy_schema(self.schema)
            table = pa.Table.from_pydict({f.name: columns[f.name] for f in schema}, schema=schema)
            # concurrent appends are safe in Lance; a failed one removes its data file and commits nothing
            lance.write_dataset(table, str(self.path), mode="append")
        except OSError as e:
            if is_disk_full(e):
                raise disk_full(
                    self.path,
                    "embed.cache_dir (or $DRIFT_CACHE_DIR)",
                    sum(c.nbytes for c in columns.values()),
                ) from None
            raise

    def _checksummed(self) -> bool:
        """Whether the table's rows carry checksums (a table created before they existed does not)."""
        if self._has_checksums is None:
            if not committed(self.path):
                return True
            self._has_checksums = CHECKSUM["pooled"] in lance.dataset(str(self.path)).schema.names
        return self._has_checksums

    def _create(self) -> None:
        """Create the table empty, once, under a file lock: two Lance "create" writes racing each other can
        both commit, the second as an overwrite that drops the first one's rows."""
        if committed(self.path):
            return
        if isinstance(self.path, ObjectPath):
            # version 1 is a put-if-absent, committed without retries: the loser of two racing creates fails
            # (write_dataset's create would retry it as an overwrite at version 2, dropping appends made
            # since). The format is Lance's default there: a commit of no fragments records no file format.
            try:
                create = write_fragments(
                    self.schema.empty_table(),
                    str(self.path),
                    mode="create",
                    data_storage_version=FILE_FORMAT,
                    return_transaction=True,
                )
                lance.LanceDataset.commit(str(self.path), create, max_retries=0)
            except (OSError, ValueError, CommitConflictError):
                if not committed(self.path):
                    raise
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not committed(self.path):
                # Lance file format 2.0: reads these large ragged rows about twice as fast as 2.1/2.2
                lance.write_dataset(
                    self.schema.empty_table(), str(self.path), mode="create", data_storage_version=FILE_FORMAT
                )

    # -- reads

    def _positions(self, keys: pa.Array) -> np.ndarray:
        """Row of each key in the pinned version (its first occurrence); a missing key is an error."""
        if self._ds is None:
            self.refresh()
        found = pc.index_in(keys, value_set=self._keys)
        if found.null_count:  # committed after our version was pinned?
            self.refresh()
            found = pc.index_in(keys, value_set=self._keys)
        if found.null_count:
            raise DriftError(
                f"{found.null_count} rows have no embedding in {self.path}: "
                "run `dvc repro -f embed@<dataset>` to compute them"
            )
        return found.to_numpy(zero_copy_only=False).astype(np.int64)

    def _take(self, keys, column: str) -> tuple[pa.Array, np.ndarray, np.ndarray | None, np.ndarray]:
        """The column's values for the distinct rows, read in storage order, the index that maps each key to
        its row among them, the rows' checksums of that column (None: not stored, or a column without one) and
        the rows' positions in the pinned version."""
        keys = _as_keys(keys)
        checksum = CHECKSUM.get(column) if self._checksummed() else None
        for attempt in (0, 1):
            positions = self._positions(keys)
            rows, inverse = np.unique(positions, return_inverse=True)
            assert self._ds is not None  # _positions pinned a version, or raised: the keys are not empty
            try:
                table = self._ds.take(rows, columns=[column] + ([checksum] if checksum else []))
                values = table.column(column)
                values = values.chunk(0) if values.num_chunks == 1 else values.combine_chunks()
                sums = table.column(checksum).to_numpy() if checksum else None
                return values, inverse, sums, rows
            except OSError:
                if attempt:
                    raise
                self._ds, self._state = None, []  # a compaction elsewhere removed our version's files: re-pin
        raise AssertionError("unreachable")

    def _refuse(self, keys, inverse: np.ndarray, positions: np.ndarray, bad: np.ndarray) -> None:
        """Record the rows a read found damaged (indexes among the distinct rows read) in `damaged`."""
        if not len(bad):
            return
        live = np.cumsum([rows - deleted for _, rows, deleted in self._state])
        fragment_ids = [fid for fid, _, _ in self._state]
        first = np.zeros(len(positions), np.int64)
        first[inverse[::-1]] = np.arange(len(inverse))[::-1]  # a key of each distinct row
        keys = _as_keys(keys)
        for row in bad:
            fragment = fragment_ids[int(np.searchsorted(live, positions[row], side="right"))]
            self.damaged.setdefault(keys[int(first[row])].as_py(), int(fragment))

    def read_pooled(self, keys, strict: bool = True) -> np.ndarray:
        """[n, D] in the table's dtype (float32, or float16: embed.pooled_dtype), aligned with keys. A damaged
        row (checksum, non-finite) is recorded in `damaged` and raises DamagedRows; with strict=False it is
        read as zeros, and the caller must not serve the result while `damaged` is not empty (the feature
        build, which names every damaged row at its end)."""
        if len(keys) == 0:
            return np.zeros((0, self.dim), self.pooled_dtype)
        column, inverse, sums, positions = self._take(keys, "pooled")
        values = column.flatten().to_numpy().reshape(-1, self.dim)
        bad = damaged_rows(values, sums)
        if len(bad):
            self._refuse(keys, inverse, positions, bad)
            if strict:
                raise DamagedRows(self.path, self.damaged)
            values = values.copy()
            values[bad] = 0
        return values if np.array_equal(inverse, np.arange(len(values))) else values[inverse]

    def read_lengths(self, keys) -> np.ndarray:
        """Token count of each key, [n] int64 (the small n_tokens column: no token states read)."""
        if len(keys) == 0:
            return np.zeros(0, np.int64)
        column, inverse, _, _ = self._take(keys, "n_tokens")
        return column.to_numpy(zero_copy_only=False).astype(np.int64)[inverse.reshape(-1)]

    def read_tokens(self, keys, strict: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Token states of each key, ragged: (flat [sum n_i, D] float16, offsets [n+1] int64) aligned with
        keys. A damaged row is recorded in `damaged` and handled as in read_pooled."""
        if len(keys) == 0:
            return np.zeros((0, self.dim), np.float16), np.zeros(1, np.int64)
        column, inverse, sums, positions = self._take(keys, "tokens")
        offsets = column.offsets.to_numpy().astype(np.int64)
        offsets -= offsets[0]
        flat = column.flatten().flatten().to_numpy().reshape(-1, self.dim)
        bad = damaged_rows(flat, sums, offsets)
        if len(bad):
            self._refuse(keys, inverse, positions, bad)
            if strict:
                raise DamagedRows(self.path, self.damaged)
            flat = flat.copy()
            for row in bad:
                flat[offsets[row] : offsets[row + 1]] = 0
        if np.array_equal(inverse, np.arange(len(offsets) - 1)):
            return flat, offsets
        return _ragged_take(flat, offsets, inverse)

    # -- maintenance

    def maybe_compact(self) -> dict | None:
        """After an embed run: compact once COMPACT_AFTER under-sized fragments have piled up, or when two
        writers stored a key twice. Best effort: if a concurrent compaction wins, the table stays correct."""
        self.refresh()
        if self._ds is None:
            return None
        target = _target_rows(self._ds)
        small = sum(1 for _, rows, _ in self._state if rows < target // 2)
        duplicated = pc.count_distinct(self._keys).as_py() < len(self._keys)
        if small < COMPACT_AFTER and not duplicated:
            return None
        try:
            return compact_table(self.path, dedupe=duplicated)
        except (OSError, DriftError):
            return None

    def stats(self) -> dict:
        return table_info(self.path)


def open_store(manifest: StoreManifest, cache_dir: Path | ObjectPath) -> EmbeddingStore:
    """The store table a manifest names; a clear error when it is not in this cache directory."""
    store = EmbeddingStore(
        cache_dir,
        manifest.encoder,
        manifest.fingerprint,
        manifest.dim,
        with_tokens=manifest.tokens,
        table=manifest.store,
        pooled_dtype=manifest.pooled_dtype,
    )
    if manifest.rows and not committed(store.path):
        raise DriftError(
            f"embedding table {store.path.name} is not in {location(cache_dir)} (another embed.cache_dir, "
            f"or removed by `drift cache gc`): run `dvc repro -f embed@<dataset>` to compute it"
        )
    return store


def discard_fragments(path: Path, fragment_ids) -> int:
    """Delete whole fragments (those holding damaged rows), so their rows are missing and the next embed run
    computes them again, in the same chunks and batches as the run that wrote them (a fragment is one or more
    whole commits); returns the rows deleted."""
    ds = lance.dataset(str(path))
    wanted = {int(f) for f in fragment_ids}
    fragments = [f for f in ds.get_fragments() if f.metadata.id in wanted]
    if not fragments:
        return 0
    rows = sum(f.count_rows() for f in fragments)
    lance.LanceDataset.commit(
        str(path),
        LanceOperation.Delete([], [f.metadata.id for f in fragments], "drift: damaged rows"),
        read_version=ds.version,
    )
    return rows


def scan_damage(path: Path, batch_rows: int = 1024) -> list[dict]:
    """Every row of a table read and checked (checksums, finite values): one entry per fragment with damage,
    {fragment, rows (damaged), first_key, last_key (in storage order), problem}. A fragment that cannot be
    read at all is one entry with the reader's error."""
    ds = lance.dataset(str(path))
    names = ds.schema.names
    found = []
    for fragment in ds.get_fragments():
        bad_keys: list[str] = []
        try:
            for column in ("pooled", "tokens"):
                if column not in names:
                    continue
                checksum = CHECKSUM[column] if CHECKSUM[column] in names else None
                scanner = fragment.scanner(
                    columns=["key", column] + ([checksum] if checksum else []), batch_size=batch_rows
                )
                for batch in scanner.to_batches():
                    values = batch.column(column)
                    sums = batch.column(checksum).to_numpy() if checksum else None
                    if column == "tokens":
                        offsets = values.offsets.to_numpy().astype(np.int64)
                        flat = (
                            values.flatten()
                            .flatten()
                            .to_numpy()
                            .reshape(-1, ds.schema.field("pooled").type.list_size)
                        )
                        bad = damaged_rows(flat[offsets[0] : offsets[-1]], sums, offsets - offsets[0])
                    else:
                        bad = damaged_rows(values.flatten().to_numpy().reshape(len(batch), -1), sums)
                    bad_keys += batch.column("key").take(pa.array(bad, pa.int64())).to_pylist()
        except Exception as e:  # any failure to read a fragment is damage to report
            found.append(
                {
                    "fragment": fragment.metadata.id,
                    "rows": fragment.metadata.physical_rows,
                    "first_key": None,
                    "last_key": None,
                    "problem": " ".join(str(e).split())[:200],
                }
            )
            continue
        if bad_keys:
            unique = list(dict.fromkeys(bad_keys))
            found.append(
                {
                    "fragment": fragment.metadata.id,
                    "rows": len(unique),
                    "first_key": unique[0],
                    "last_key": unique[-1],
                    "problem": "rows fail their checksum or hold non-finite values",
                }
            )
    return found


def dedupe_table(path: Path | ObjectPath, attempts: int = 5) -> int:
    """Delete every row whose key an earlier row holds (readers already use the first), returns how many.

    The deletion is committed against the version the duplicates were found in. A delete by row address must
    never be re-applied to another version, so a conflicting commit (a compaction rewrote those fragments
    meanwhile) fails, and we look again from the latest version."""
    for _ in range(attempts):
        ds = lance.dataset(str(path))
        found = ds.scanner(columns=["key"], with_row_address=True, scan_in_order=True).to_table()
        keys = _as_keys(found.column("key"))
        first = pc.index_in(keys, value_set=keys).to_numpy(zero_copy_only=False)
        later = np.flatnonzero(first != np.arange(len(keys)))
        if not len(later):
            return 0
        addresses = found.column("_rowaddr").to_numpy()[later]
        updated, emptied = [], []
        for fragment_id in np.unique(addresses >> 32):
            rows = addresses[(addresses >> 32) == fragment_id]
            fragment = ds.get_fragment(int(fragment_id))
            assert fragment is not None  # its id is in the row addresses this version just scanned
            meta = fragment.delete(f"_rowaddr IN ({','.join(map(str, rows))})")
            if meta is None:
                emptied.append(int(fragment_id))
            else:
                updated.append(meta)
        try:
            lance.LanceDataset.commit(
                str(path),
                LanceOperation.Delete(updated, emptied, "drift: duplicate keys"),
                read_version=ds.version,
            )
            return len(later)
        except CommitConflictError:
            continue
    raise DriftError(
        f"could not dedupe {path}: other processes kept rewriting it; run `drift cache compact` again"
    )


def compact_table(path: Path | ObjectPath, dedupe: bool = True, cleanup: bool = True) -> dict:
    """Dedupe keys, merge small fragments, then delete the files only older versions use."""
    path = location(path)
    before = table_info(path, count_unique=False)
    if not before["committed"]:
        return {
            "table": path.name,
            "duplicates_removed": 0,
            "fragments_before": 0,
            "fragments_after": 0,
            "bytes_before": before["bytes"],
            "bytes_after": before["bytes"],
        }
    removed = dedupe_table(path) if dedupe else 0
    ds = lance.dataset(str(path))
    ds.optimize.compact_files(target_rows_per_fragment=_target_rows(ds), materialize_deletions=True)
    if cleanup:
        # files written but not yet committed by a running writer are "unverified" and kept by lance (7 days)
        lance.dataset(str(path)).cleanup_old_versions(older_than=timedelta(0))
    after = table_info(path, count_unique=False)
    return {
        "table": path.name,
        "duplicates_removed": removed,
        "fragments_before": before["fragments"],
        "fragments_after": after["fragments"],
        "bytes_before": before["bytes"],
        "bytes_after": after["bytes"],
    }


def table_info(path: Path | ObjectPath, count_unique: bool = True) -> dict:
    """What `drift cache list` shows about one table."""
    path = location(path)
    if isinstance(path, ObjectPath):
        files = [(size, mtime) for _, size, mtime in path.objects()]
    else:
        files = [(s.st_size, s.st_mtime) for s in (f.stat() for f in path.rglob("*") if f.is_file())]
    encoder, _, short = path.stem.rpartition("-")
    info = {
        "table": path.name,
        "path": str(path),
        "encoder": encoder or path.stem,
        "fingerprint": short,
        "fingerprint_fields": None,
        "committed": committed(path),
        "rows": 0,
        "unique": 0,
        "dim": None,
        "tokens": None,
        "fragments": 0,
        "version": None,
        "bytes": sum(size for size, _ in files),
        "updated": max(
            (mtime for _, mtime in files),
            default=0 if isinstance(path, ObjectPath) or not path.exists() else path.stat().st_mtime,
        ),
    }
    if not info["committed"]:
        return info
    ds = lance.dataset(str(path))
    meta = {k.decode(): v.decode() for k, v in (ds.schema.metadata or {}).items()}
    info.update(
        encoder=meta.get("drift.encoder", info["encoder"]),
        fingerprint=meta.get("drift.fingerprint", short),
        fingerprint_fields=json.loads(meta["drift.fingerprint_fields"])
        if "drift.fingerprint_fields" in meta
        else None,
        rows=ds.count_rows(),
        dim=ds.schema.field("pooled").type.list_size,
        tokens="tokens" in ds.schema.names,
        fragments=len(ds.get_fragments()),
        version=ds.version,
    )
    info["unique"] = pc.count_distinct(_key_column(ds)).as_py() if count_unique else None
    return info

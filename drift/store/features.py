"""Feature files: the model inputs of one dataset as plain .npy files, read batch by batch from disk.

`data/features/<dataset>/<encoder>/` holds, in slice-table row order, tokens.npy (float16 [n_tokens, D], text
encoders only), offsets.npy (int64 [n + 1]: row i is tokens[offsets[i]:offsets[i + 1]]), pooled.npy (float32
[n, D], or float16 under embed.pooled_dtype: the store's floats) and header.json (shapes, dtypes, each file's
size and sha256, the store's fingerprint and table, a hash of the keys); `pixels/` holds pixels.npy (uint8 or
float32 [n, C, H, W]) and its header. `write_features` builds them once from the store, streaming, and again
when the header no longer matches (another fingerprint or other rows) or a file no longer matches its size or
sha256 (checked on every open). Readers take a batch at a time with preadv, so memory follows the batch size,
not the dataset; the files are standard .npy, so `np.load(path, mmap_mode="r")` opens them too."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from drift.core.errors import DriftError
from drift.core.objectstore import ObjectPath
from drift.store.embeddings import DamagedRows, StoreManifest, open_store
from drift.store.integrity import fsync_dir, fsync_file, sha256_file
from drift.store.slices import image_dtype, read_slice_table, slice_table_batches

FORMAT = 2  # 2: each file's size and sha256 in the header
CHUNK_BYTES = 64 << 20  # store reads of about this many bytes of token states at a time, while building


def keys_sha256(keys) -> str:
    """A hash of the slice table's keys in row order: the rows a feature file was built for."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    keys = keys.to_pylist() if isinstance(keys, pa.Array) else list(keys)
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()


# ---------------------------------------------------------------- reading


class DiskArray:
    """A .npy file read with os.preadv: rows, or fixed-width spans of rows, copied into fresh buffers.

    Thread safe (preadv takes the offset, no shared file position); nothing stays mapped, so memory holds only
    what the caller keeps."""

    def __init__(self, path: Path):
        self.path = Path(path)
        with open(self.path, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version not in ((1, 0), (2, 0)):
                raise DriftError(
                    f"{path}: .npy format {version} is not read here; rebuild it with write_features"
                )
            read = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = read(f)
            self.header_bytes = f.tell()
        if fortran:
            raise DriftError(
                f"{self.path} is in Fortran order: rebuild it with drift.store.features.write_features"
            )
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.row_shape = self.shape[1:]
        self.row_bytes = int(np.prod(self.row_shape, dtype=np.int64)) * self.dtype.itemsize
        self.fd = os.open(self.path, os.O_RDONLY)

    def __len__(self) -> int:
        return self.shape[0]

    def __del__(self):
        fd = getattr(self, "fd", None)
        if fd is not None:
            os.close(fd)

    def _read(self, out: np.ndarray, first_row: int) -> None:
        """Fill `out` (C-contiguous, whole rows) with the rows from first_row on."""
        view = out.reshape(-1).view(np.uint8).data  # a memoryview of out's bytes
        position, done = self.header_bytes + first_row * self.row_bytes, 0
        while done < len(view):  # preadv may return less than asked (signals, huge reads)
            n = os.preadv(self.fd, [view[done:]], position + done)
            if n == 0:
                raise DriftError(
                    f"{self.path} is shorter than its header says: rebuild it (`dvc repro -f embed@<dataset>`)"
                )
            done += n

    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        """[len(rows), *row_shape] in the caller's order; runs of consecutive rows are one read each."""
        rows = np.asarray(rows, np.int64)
        unique, inverse = np.unique(rows, return_inverse=True)
        out = np.empty((len(unique), *self.row_shape), self.dtype)
        if len(unique):
            breaks = np.flatnonzero(np.diff(unique) != 1) + 1
            for lo, hi in zip(np.r_[0, breaks], np.r_[breaks, len(unique)]):
                self._read(out[lo:hi], int(unique[lo]))
        if len(unique) == len(rows) and np.array_equal(unique, rows):
            return out
        return out[inverse.reshape(-1)]

    def read_spans(self, starts: np.ndarray, width: int) -> np.ndarray:
        """[len(starts), width, *row_shape]: rows start .. start + width - 1 for each start, positions past
        the last row reading the last row (as an index clamped to the end would)."""
        starts = np.asarray(starts, np.int64)
        out = np.empty((len(starts), width, *self.row_shape), self.dtype)
        n = len(self)
        for i in np.argsort(starts, kind="stable"):  # ascending offsets: the file is read front to back
            start = int(starts[i])
            inside = max(0, min(width, n - start))
            if inside:
                self._read(out[i, :inside], start)
            if inside < width:
                self._read(out[i, inside : inside + 1], n - 1)
                out[i, inside + 1 :] = out[i, inside]
        return out


def read_header(path: Path) -> dict | None:
    try:
        return json.loads((Path(path) / "header.json").read_text())
    except (OSError, ValueError):
        return None


def open_features(path: Path) -> dict:
    """{name: DiskArray or ndarray} of one feature directory: tokens and pooled as DiskArrays, offsets in
    memory (8 bytes a row), plus the header."""
    path = Path(path)
    header = read_header(path)
    if header is None:
        raise DriftError(f"no feature files in {path}: run `dvc repro embed@<dataset>`")
    arrays: dict[str, dict | DiskArray | np.ndarray] = {"header": header}
    for name in header["files"]:
        file = path / f"{name}.npy"
        arrays[name] = np.load(file) if name == "offsets" else DiskArray(file)
    return arrays


# ---------------------------------------------------------------- building


def _open_npy(path: Path, dtype, shape) -> BinaryIO:
    """A file with a .npy header for this dtype and shape, positioned to write the data sequentially."""
    f = open(path, "wb")
    np.lib.format.write_array_header_1_0(
        f,
        {
            "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
            "fortran_order": False,
            "shape": tuple(int(s) for s in shape),
        },
    )
    return f


def _write(f, array: np.ndarray) -> None:
    f.write(np.ascontiguousarray(array).data)


def _replace_dir(tmp: Path, target: Path) -> None:
    """Put a finished directory in place: readers see the old files or the new ones, never a mix."""
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.rename(target, old)
        os.rename(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, target)


def _header(directory: Path, keys_hash: str, rows: int, files: dict, **extra) -> dict:
    """The header of a finished directory: each file's dtype, shape, size and sha256 (each file fsynced)."""
    described = {}
    for name, (dtype, shape) in files.items():
        file = Path(directory) / f"{name}.npy"
        fsync_file(file)
        described[name] = {
            "dtype": np.dtype(dtype).name,
            "shape": list(shape),
            "bytes": file.stat().st_size,
            "sha256": sha256_file(file),
        }
    return {"format": FORMAT, "rows": rows, "keys_sha256": keys_hash, **extra, "files": described}


def _finish(tmp: Path, out: Path, header: dict) -> None:
    with open(tmp / "header.json", "w") as f:
        f.write(json.dumps(header, indent=2) + "\n")
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(tmp)
    _replace_dir(tmp, out)
    fsync_dir(out.parent)


def file_problem(path: Path, header: dict | None = None) -> str | None:
    """Why the feature files at `path` are not what their header says (a missing file, another size, another
    sha256), None when they are."""
    header = header if header is not None else read_header(path)
    if header is None:
        return "no header.json"
    for name, entry in header.get("files", {}).items():
        file = Path(path) / f"{name}.npy"
        if not file.is_file():
            return f"{file} is missing"
        if file.stat().st_size != entry.get("bytes"):
            return f"{file} holds {file.stat().st_size} bytes where {entry.get('bytes')} were written"
        if sha256_file(file) != entry.get("sha256"):
            return f"{file} does not match its sha256"
    return None


def build_embeddings(store, keys: pa.Array, out: Path, keys_hash: str | None = None) -> dict:
    """One encoder's feature files from its store table, in the order of `keys`; returns the header. A row
    that fails its checksum or holds a non-finite value raises DamagedRows (naming every such key) and writes
    nothing. Memory: one chunk of keys' token states (CHUNK_BYTES) at a time."""
    keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    keys_hash = keys_hash or keys_sha256(keys)
    out = Path(out)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    n, dim, pooled_dtype = len(keys), store.dim, np.dtype(store.pooled_dtype)
    files: dict[str, tuple[np.dtype, tuple[int, ...]]] = {"pooled": (pooled_dtype, (n, dim))}
    if store.with_tokens:
        lengths = store.read_lengths(keys)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        np.save(tmp / "offsets.npy", offsets)
        files["tokens"] = (np.dtype(np.float16), (int(offsets[-1]), dim))
        files["offsets"] = (np.dtype(np.int64), (n + 1,))
        # chunks of rows holding about CHUNK_BYTES of token states each
        per_row = max(1.0, offsets[-1] / max(n, 1)) * dim * 2
        step = max(1, int(CHUNK_BYTES // per_row))
        with _open_npy(tmp / "tokens.npy", np.float16, files["tokens"][1]) as f:
            for start in range(0, n, step):
                flat, chunk_offsets = store.read_tokens(keys.slice(start, step), strict=False)
                if not np.array_equal(chunk_offsets, offsets[start : start + step + 1] - offsets[start]):
                    raise DriftError(f"{store.path}: token counts changed while reading; run the build again")
                _write(f, flat)
    else:
        step = max(1, CHUNK_BYTES // (dim * 4))
    with _open_npy(tmp / "pooled.npy", pooled_dtype, (n, dim)) as f:
        for start in range(0, n, step):
            pooled = store.read_pooled(keys.slice(start, step), strict=False)
            _write(f, pooled.astype(pooled_dtype, copy=False))
    if store.damaged:  # never served: the embed stage discards those rows' fragments and computes them again
        shutil.rmtree(tmp, ignore_errors=True)
        raise DamagedRows(store.path, store.damaged)
    header = _header(
        tmp,
        keys_hash,
        n,
        files,
        encoder=store.encoder,
        fingerprint=store.fingerprint,
        store=store.path.name,
        dim=dim,
    )
    _finish(tmp, out, header)
    return header


def build_pixels(slice_path: Path, out: Path, keys_hash: str, rows_per_read: int = 4096) -> dict:
    """The slice table's images as [n, C, H, W] of the dtype it stores (uint8, or float32), read from the
    table in batches; returns the header."""
    n, meta, batches = slice_table_batches(slice_path, ["image"], rows_per_read)
    dtype = image_dtype(slice_path)
    shape = tuple(int(x) for x in meta.get(b"image_shape", b"3,32,32").decode().split(","))
    out = Path(out)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    written = 0
    with _open_npy(tmp / "pixels.npy", dtype, (n, *shape)) as f:
        for batch in batches:
            _write(f, batch.column("image").flatten().to_numpy().reshape(batch.num_rows, *shape))
            written += batch.num_rows
    if written != n:
        raise DriftError(f"{slice_path} changed while its pixels were read: run the build again")
    header = _header(tmp, keys_hash, n, {"pixels": (dtype, (n, *shape))}, image_shape=list(shape))
    _finish(tmp, out, header)
    return header


def is_current(path: Path, keys_hash: str, manifest: StoreManifest | None = None) -> bool:
    """The feature files at `path` were built for these rows (and this encoder's store table), and each still
    holds what was written (size and sha256; a damaged one is named on stderr, and rebuilt by the caller)."""
    header = read_header(path)
    if header is None or header.get("format") != FORMAT or header.get("keys_sha256") != keys_hash:
        return False
    if manifest is not None and (
        header.get("fingerprint") != manifest.fingerprint or header.get("store") != manifest.store
    ):
        return False
    problem = file_problem(path, header)
    if problem:
        print(f"features: {problem}: rebuilding {path}", file=sys.stderr)
        return False
    return True


def ensure_features(
    kind: str,
    slice_path: Path,
    keys,
    out_dir: Path,
    manifest: StoreManifest | None = None,
    cache_dir: Path | ObjectPath | None = None,
    keys_hash: str | None = None,
) -> Path:
    """The feature directory of one input kind ("pixels", or an encoder's embeddings when `manifest` is
    given), built first if missing or stale. Returns its path."""
    keys_hash = keys_hash or keys_sha256(keys)
    if manifest is None:
        path = Path(out_dir) / "pixels"
        if not is_current(path, keys_hash):
            print(f"features: writing {path}", file=sys.stderr)
            build_pixels(slice_path, path, keys_hash)
        return path
    path = Path(out_dir) / manifest.encoder
    if not is_current(path, keys_hash, manifest):
        print(f"features: writing {path} from the store table {manifest.store}", file=sys.stderr)
        assert cache_dir is not None, (
            "an encoder's feature files are built from its store: give the cache_dir"
        )
        build_embeddings(open_store(manifest, cache_dir), _keys_array(keys), path, keys_hash)
    return path


def _keys_array(keys) -> pa.Array:
    if isinstance(keys, pa.ChunkedArray):
        return keys.combine_chunks()
    return keys if isinstance(keys, pa.Array) else pa.array(list(keys), pa.string())


def write_features(
    slice_path: Path,
    encoders: dict[str, StoreManifest],
    cache_dir: Path | ObjectPath,
    out_dir: Path,
    modality: str = "text",
) -> dict:
    """What the embed stage calls after embedding: the feature files of every encoder in its manifest
    ({encoder: manifest}, as data/embeddings/<dataset>.json holds under "encoders"), and the pixels of an
    image dataset, under out_dir (data/features/<dataset>). Directories of encoders no longer listed are
    removed, so the directory is exactly this run's output. Returns {name: header}."""
    out_dir = Path(out_dir)
    keys = _keys_array(read_slice_table(slice_path, columns=["key"]).column("key").combine_chunks())
    keys_hash = keys_sha256(keys)
    wanted = {}
    for name, manifest in encoders.items():
        wanted[name] = ensure_features(
            "embeddings", slice_path, keys, out_dir, manifest, cache_dir, keys_hash
        )
    if modality == "image":
        wanted["pixels"] = ensure_features("pixels", slice_path, keys, out_dir, keys_hash=keys_hash)
    if out_dir.exists():
        for child in out_dir.iterdir():
            if child.is_dir() and child.name not in {p.name for p in wanted.values()}:
                shutil.rmtree(child)
    return {name: read_header(path) for name, path in wanted.items()}


# ---------------------------------------------------------------- filling a store from pulled files

SEED_ROWS = 4096  # rows appended to the store per commit while filling it from feature files


def seed_store(store, features_dir: Path, keys) -> int:
    """Append to `store` the rows it lacks that verified feature files hold: `features_dir/<encoder>/` built
    under the store's fingerprint for exactly these rows (keys in slice-table row order), as `dvc pull` brings
    them to a machine whose store never computed them. Each file is checked against its size and sha256 first;
    a damaged one is named on stderr in one line and not used (its rows are then computed). Returns the number
    of rows added. The floats are the files' own bytes, so features rebuilt from the store are identical."""
    path = Path(features_dir) / store.encoder
    header = read_header(path)
    if (
        header is None
        or header.get("format") != FORMAT
        or header.get("fingerprint") != store.fingerprint
        or header.get("dim") != store.dim
        or ("tokens" in header.get("files", {})) != store.with_tokens
    ):
        return 0
    keys = _keys_array(keys)
    if header.get("keys_sha256") != keys_sha256(keys):
        return 0
    missing = store.missing(keys)
    if not missing:
        return 0
    problem = file_problem(path, header)
    if problem:
        print(
            f"features: {problem}: not used to fill the store {store.path}; its rows are computed instead",
            file=sys.stderr,
        )
        return 0
    rows = pc.index_in(pa.array(missing, pa.string()), value_set=keys).to_numpy()  # first occurrence of each
    pooled = DiskArray(path / "pooled.npy")
    tokens = DiskArray(path / "tokens.npy") if store.with_tokens else None
    offsets = np.load(path / "offsets.npy") if store.with_tokens else None
    for start in range(0, len(rows), SEED_ROWS):
        chunk = rows[start : start + SEED_ROWS]
        chunk_keys = [missing[i] for i in range(start, start + len(chunk))]
        if tokens is None:
            store.append(chunk_keys, pooled.read_rows(chunk))
            continue
        assert offsets is not None  # loaded with the tokens
        lengths = offsets[chunk + 1] - offsets[chunk]
        spans = [np.arange(offsets[r], offsets[r + 1]) for r in chunk]
        flat = (
            tokens.read_rows(np.concatenate(spans))
            if int(lengths.sum())
            else np.zeros((0, store.dim), np.float16)
        )
        store.append(chunk_keys, pooled.read_rows(chunk), flat, lengths)
    return len(rows)

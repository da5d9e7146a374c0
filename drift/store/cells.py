"""The checkpoint and cell cache: train and evaluate compute only what nothing has computed before.

`checkpoint_key` hashes what determines a checkpoint f_k of (model, seed): registry entry, input and outputs; the
seed (not for the closed-form references); the content keys, labels and split of the cutoff's training rows and
the encoder fingerprint; the training parameters; and `code_version`: the stage's code (for one model: its own
model module, not the other heads') with the versions of the libraries it imports. `cell_key` hashes the
checkpoint's bytes, the cell's rows, the metric and the evaluation code. Under embed.cache_dir, outside the
workspace: checkpoints/<key[:2]>/<key>.ckpt (a header line with the sha256 and size, then the state dict's bytes)
and cells/<checkpoint[:2]>/<checkpoint>/<key>.json (score and sha256), written atomically; an entry whose checksum
does not match is a miss, counted in `corrupt` (tests/test_cells.py, tests/test_integrity.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from drift.core.closure import (
    ROOT,
    code_digest,
    import_closure,
    imported_modules,
    module_closure,
    module_path,
)
from drift.core.errors import DriftError
from drift.core.objectstore import location
from drift.store.integrity import fsync_dir, sha256_bytes, write_atomic

VERSION = 2  # bump to invalidate every cached checkpoint and cell at once
MAGIC = b"drift-checkpoint 1"
CHECKPOINT_KEYS = "checkpoints.json"  # data/models/<dataset>/checkpoints.json: {checkpoint file: cache key}


def stage_files(stage: str, root: Path = ROOT, exclude=()) -> list[str]:
    """Stage `stage`'s script and its import closure inside drift/: the files dvc.yaml lists as its code deps
    (less `exclude`, neither listed nor followed)."""
    script = Path(root) / "stages" / f"{stage}.py"
    if not script.exists():
        raise DriftError(
            f"{script} is missing: the caches key on the stage scripts of a checkout of the project"
        )
    return [f"stages/{stage}.py", *import_closure(script, root, exclude)]


def code_version(stage: str, model_module: str | None = None, model_modules=(), root: Path = ROOT) -> str:
    """A digest of what decides what stage `stage` ("train", "evaluate") computes: its files (stage_files) and
    the versions of the libraries they import. For one model (`model_module`, the module defining its class):
    the stage's closure without the other model modules (`model_modules`, the registry's), with its own module,
    so editing one head's module changes the keys of that module's models only. A model module its own imports
    directly stays in."""
    files = set(stage_files(stage, root))
    if model_module is not None:
        own = module_path(model_module, root)
        direct = {module_path(m, root) for m in imported_modules(Path(root) / own, root)}
        others = {module_path(m, root) for m in model_modules} - {own} - direct
        files = {*stage_files(stage, root, others), *module_closure(model_module, root, others)}
    return _hash("code", VERSION, code_digest(files, root))


def _hash(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def row_hashes(keys, labels: list, splits) -> np.ndarray:
    """One 32-byte digest per row of its payload key, label and split (computed once per dataset)."""
    return np.array(
        [hashlib.sha256(f"{k}|{y}|{s}".encode()).digest() for k, y, s in zip(keys, labels, splits)],
        dtype="S32",
    )


def rows_digest(hashes: np.ndarray, rows: np.ndarray) -> str:
    """The content of these rows, in this order."""
    return hashlib.sha256(hashes[np.asarray(rows, dtype=np.int64)].tobytes()).hexdigest()


def checkpoint_key(
    model_spec: str, seed: int | None, rows: str, inputs: str, training: dict, code: str
) -> str:
    return _hash("checkpoint", model_spec, seed, rows, inputs, training, code)


def cell_key(checkpoint: str, rows: str, metric: str, code: str) -> str:
    return _hash("cell", checkpoint, rows, metric, code)


def file_digest(path: Path) -> str:
    """A checkpoint's identity for its cells: the bytes it holds (a reused checkpoint is a copy of them)."""
    return sha256_bytes(Path(path).read_bytes())


def _cell_record(key: str, score) -> dict:
    return {
        "key": key,
        "score": score,
        "sha256": sha256_bytes(json.dumps([key, score], sort_keys=True).encode()),
    }


def _intact(record, key: str) -> bool:
    """A cell record as written for `key` (compared by checksum: a NaN inside a calibration is not equal to itself)."""
    return (
        isinstance(record, dict)
        and record.get("key") == key
        and "score" in record
        and record.get("sha256") == _cell_record(key, record["score"])["sha256"]
    )


class ResultCache:
    """Checkpoints and cell scores by key, under `root` (the embedding store's directory). `corrupt` lists the
    entries this instance found not to match their checksum (each then served as a miss)."""

    def __init__(self, root: Path):
        self.root = location(root)  # a folder, or an s3:// prefix (drift.core.objectstore.ObjectPath)
        self.corrupt: list[str] = []
        self._unsynced: set[Path] = set()

    def checkpoint_file(self, key: str) -> Path:
        return self.root / "checkpoints" / key[:2] / f"{key}.ckpt"

    def cell_file(self, checkpoint: str, key: str) -> Path:
        return self.root / "cells" / checkpoint[:2] / checkpoint / f"{key}.json"

    def _bad(self, path: Path) -> None:
        self.corrupt.append(str(path))

    def checkpoint(self, key: str) -> bytes | None:
        """The checkpoint's bytes (a state dict, as torch.save wrote it) when cached and intact, else None."""
        path = self.checkpoint_file(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        if checkpoint_problem(data):
            self._bad(path)
            return None
        return data[data.index(b"\n") + 1 :]

    def has_checkpoint(self, key: str) -> bool:
        return self.checkpoint(key) is not None

    def put_checkpoint(self, key: str, source: Path) -> None:
        data = Path(source).read_bytes()
        header = MAGIC + f" {sha256_bytes(data)} {len(data)}\n".encode()
        write_atomic(self.checkpoint_file(key), header + data)  # whole or not at all, fsynced

    def place(self, key: str, target: Path) -> None:
        """The cached checkpoint at its place in data/models/ (a copy: DVC owns what is in the workspace)."""
        data = self.checkpoint(key)
        if data is None:
            raise DriftError(
                f"checkpoint {self.checkpoint_file(key)} vanished or was damaged while this stage ran "
                f"(another process collecting the cache?): run the stage again"
            )
        target = Path(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def cell(self, checkpoint: str, key: str):
        """(True, score) when cached and intact (score None: the metric could not score the cell), else
        (False, None)."""
        path = self.cell_file(checkpoint, key)
        try:
            text = path.read_text()
        except FileNotFoundError:
            return False, None
        try:
            record = json.loads(text)
        except ValueError:
            record = None
        if not _intact(record, key):
            self._bad(path)
            return False, None
        return True, record["score"]

    def put_cell(self, checkpoint: str, key: str, score) -> None:
        """Atomic (a rename) and checksummed; durable after `sync()` (an fsync per cell costs 3 ms: one per
        directory instead, and a cell torn by a power cut fails its checksum)."""
        path = self.cell_file(checkpoint, key)
        write_atomic(path, json.dumps(_cell_record(key, score)).encode(), durable=False)
        self._unsynced.add(path.parent)

    def sync(self) -> None:
        """fsync the directories of the cells written since the last call."""
        for directory in sorted(self._unsynced):
            fsync_dir(directory)
        self._unsynced.clear()


def corrupt_line(stage: str, corrupt: list[str], what: str) -> str | None:
    """The one line a stage prints when cached entries failed their checksum and were computed again."""
    if not corrupt:
        return None
    more = f" and {len(corrupt) - 1} more" if len(corrupt) > 1 else ""
    return (
        f"{stage}: {len(corrupt)} cached {what} failed their checksum or content check and were recomputed: {corrupt[0]}{more} "
        f"(`drift cache verify` checks the whole cache)"
    )


def checkpoint_problem(data: bytes) -> str | None:
    """Why the bytes of a cached checkpoint file are not what was written, None when they are."""
    line, sep, body = data.partition(b"\n")
    parts = line.split(b" ")
    if not sep or b" ".join(parts[:2]) != MAGIC or len(parts) != 4 or not parts[3].isdigit():
        return "no checkpoint header"
    if int(parts[3]) != len(body):
        return f"{len(body)} bytes where {int(parts[3])} were written"
    if sha256_bytes(body) != parts[2].decode():
        return "sha256 mismatch"
    return state_dict_problem(body)


def state_dict_problem(body: bytes) -> str | None:
    """Why checkpoint bytes are not a plain state dict (names -> tensors, loadable with weights_only=True), None
    when they are: a pickle of anything else is refused as a damaged entry, never loaded another way."""
    import io

    import torch  # lazy: only where checkpoints are read

    try:
        state = torch.load(io.BytesIO(body), weights_only=True)
    except Exception as e:  # noqa: BLE001 - whatever torch refuses: an unpickling error, a torn zip
        return f"not a plain state dict ({type(e).__name__})"
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        return f"not a plain state dict (a {type(state).__name__})"
    return None


def cell_problem(path: Path) -> str | None:
    """Why a cached cell file is not what was written, None when it is."""
    try:
        record = json.loads(location(path).read_text())
    except (ValueError, OSError) as e:
        return f"unreadable ({type(e).__name__})"
    return None if _intact(record, location(path).stem) else "sha256 mismatch"

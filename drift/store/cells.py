"""The checkpoint and cell cache: train and evaluate compute only what nothing has computed before.

`checkpoint_key` hashes what determines a checkpoint f_k of (model, seed): registry entry, input and outputs; the
seed (not for the closed-form references); the content keys, labels and split of the cutoff's training rows and
the encoder fingerprint; the training parameters; and `code_version` (the stage's code, for one model its own
module, and the versions of the libraries that compute: drift.core.environment.KEY_LIBRARIES). `cell_key`
hashes the checkpoint's bytes, the cell's rows, the metric as scored (Task.cached_as) and the evaluation code;
both name compute.cpu_path when it is native. A cell with no rows is never cached. Under embed.cache_dir,
written atomically, each entry bound to its key:
  checkpoints/<key[:2]>/<key>.ckpt: a line `drift-checkpoint 2 <key> <sha256 of the rest> <size of the rest>`,
    then the state dict's bytes;
  cells/<checkpoint[:2]>/<checkpoint>/<key>.json: {"format": "drift-cell 2", "key", "score", "sha256" of
    [format, key, score]}.
An entry whose checksum fails or that names another key is a miss counted in `corrupt`; another FORMAT a miss."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import NamedTuple, TypedDict

import numpy as np

from drift.core.closure import (
    ROOT,
    code_digest,
    import_closure,
    imported_modules,
    module_closure,
    module_path,
)
from drift.core.environment import cpu_path
from drift.core.errors import DriftError
from drift.core.objectstore import ObjectPath, location
from drift.store.integrity import fsync_dir, sha256_bytes, write_atomic

VERSION = 2  # bump to invalidate every cached checkpoint and cell at once
FORMAT = 2  # the entries' header format: an entry of another one is a plain miss, computed again
CHECKPOINT, CELL = "drift-checkpoint", "drift-cell"  # what an entry's header starts with, then FORMAT
MAGIC = f"{CHECKPOINT} {FORMAT}".encode()
OTHER_FORMAT = ("older format", "newer format")  # how a problem that is only another format starts
CELL_BYTES = 1 << 20  # a file larger than this is no cell drift wrote
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


# the cache key each stage's code version goes into: which libraries' versions it records (KEY_LIBRARIES)
STAGE_KEYS = {"train": "checkpoint", "evaluate": "cell"}


def code_version(stage: str, model_module: str | None = None, model_modules=(), root: Path = ROOT) -> str:
    """A digest of what decides what stage `stage` ("train", "evaluate") computes: its files (stage_files) and
    the versions of the libraries among those they import that compute its checkpoints or cells
    (drift.core.environment.KEY_LIBRARIES, by STAGE_KEYS). For one model (`model_module`, the module defining
    its class): the stage's closure without the other model modules (`model_modules`, the registry's), with
    its own module, so editing one head's module changes the keys of that module's models only. A model module
    its own imports directly stays in."""
    if stage not in STAGE_KEYS:
        raise DriftError(f"no cached stage {stage!r}: name one of {', '.join(STAGE_KEYS)}")
    files = set(stage_files(stage, root))
    if model_module is not None:
        own = module_path(model_module, root)
        direct = {module_path(m, root) for m in imported_modules(Path(root) / own, root)}
        others = {module_path(m, root) for m in model_modules} - {own} - direct
        files = {*stage_files(stage, root, others), *module_closure(model_module, root, others)}
    return _hash("code", VERSION, code_digest(files, root, STAGE_KEYS[stage]))


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


def _native() -> tuple:
    """("cpu_path", "native") on that CPU path (compute.cpu_path), else nothing: the default keys stay as they
    were."""
    return ("cpu_path", "native") if cpu_path() == "native" else ()


def checkpoint_key(
    model_spec: str, seed: int | None, rows: str, inputs: str, training: dict, code: str
) -> str:
    return _hash("checkpoint", model_spec, seed, rows, inputs, training, code, *_native())


def cell_key(checkpoint: str, rows: str, metric: str, code: str) -> str:
    return _hash("cell", checkpoint, rows, metric, code, *_native())


def file_digest(path: Path) -> str:
    """A checkpoint's identity for its cells: the bytes it holds (a reused checkpoint is a copy of them)."""
    return sha256_bytes(Path(path).read_bytes())


def _cell_record(key: str, score) -> dict:
    header = f"{CELL} {FORMAT}"
    return {
        "format": header,
        "key": key,
        "score": score,
        "sha256": sha256_bytes(json.dumps([header, key, score], sort_keys=True).encode()),
    }


def _cell_version(record) -> int | None:
    """The format of a cell record drift wrote (1: before the header named it), None for anything else."""
    if not isinstance(record, dict):
        return None
    if "format" not in record:
        return 1 if set(record) == {"key", "score", "sha256"} else None
    name, _, version = str(record["format"]).partition(" ")
    return int(version) if name == CELL and version.isdigit() else None


def other_format(problem: str | None) -> bool:
    """Whether a problem is only that the entry is of another cache format (a plain miss, not damage)."""
    return bool(problem) and str(problem).startswith(OTHER_FORMAT)


def _format_problem(name: str, version: int) -> str:
    age = "older" if version < FORMAT else "newer"
    return f"{age} format ({name} {version}, this drift reads {FORMAT}): a miss, computed again"


def another_key(key: str) -> str:
    return f"stored under another key ({key[:12]})"


def cell_record_problem(record, key: str) -> str | None:
    """Why a parsed cell record is not the one written for `key` (compared by checksum: a NaN inside a
    calibration is not equal to itself), None when it is."""
    version = _cell_version(record)
    if version is None:
        return "no cell header"
    if version != FORMAT:
        return _format_problem(CELL, version)
    if (
        "score" not in record
        or record.get("sha256") != _cell_record(record.get("key"), record["score"])["sha256"]
    ):
        return "sha256 mismatch"
    return None if record["key"] == key else another_key(str(record["key"]))


class ResultCache:
    """Checkpoints and cell scores by key, under `root` (the embedding store's directory). `corrupt` lists the
    entries this instance found not to match their checksum or their key (each then served as a miss)."""

    def __init__(self, root: Path | ObjectPath):
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
        if problem := checkpoint_problem(data, key):
            if not other_format(problem):
                self._bad(path)
            return None
        return data[data.index(b"\n") + 1 :]

    def has_checkpoint(self, key: str) -> bool:
        return self.checkpoint(key) is not None

    def put_checkpoint(self, key: str, source: Path) -> None:
        data = Path(source).read_bytes()
        write_atomic(
            self.checkpoint_file(key), checkpoint_header(key, data) + data
        )  # whole or not at all, fsynced

    def checkpoint_digest(self, key: str) -> str | None:
        """The sha256 of the bytes the entry under `key` holds, from its header alone, when it is of this
        format and written for `key` (its body unchecked: `checkpoint` checks it), else None."""
        header = read_header(self.checkpoint_file(key))
        return header.sha256 if header and header.version == FORMAT and header.key == key else None

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
        if problem := cell_record_problem(record, key):
            if not other_format(problem):
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


class CorruptTally(TypedDict):
    """A run record's `recomputed`: how many cached entries failed their checksum and were computed again."""

    corrupt: int


def corrupt_line(stage: str, corrupt: list[str], what: str) -> str | None:
    """The one line a stage prints when cached entries failed their checksum and were computed again."""
    if not corrupt:
        return None
    more = f" and {len(corrupt) - 1} more" if len(corrupt) > 1 else ""
    return (
        f"{stage}: {len(corrupt)} cached {what} failed their checksum or content check and were recomputed: {corrupt[0]}{more} "
        f"(`drift cache verify` checks the whole cache)"
    )


class Header(NamedTuple):
    """A checkpoint entry's first line: its format, the key it was written for (None in format 1, which named
    none), the sha256 and size of the bytes after it."""

    version: int
    key: str | None
    sha256: str
    size: int


def checkpoint_header(key: str, body: bytes) -> bytes:
    return MAGIC + f" {key} {sha256_bytes(body)} {len(body)}\n".encode()


def parse_header(line: bytes) -> Header | None:
    """The header of a checkpoint entry in any format drift wrote, None for any other line."""
    parts = line.rstrip(b"\n").decode("ascii", errors="replace").split(" ")
    if parts[0] != CHECKPOINT or len(parts) < 2 or not parts[1].isdigit() or not parts[-1].isdigit():
        return None
    fields = parts[2:]
    if len(fields) == 3:
        return Header(int(parts[1]), fields[0], fields[1], int(fields[2]))
    if len(fields) == 2 and parts[1] == "1":
        return Header(1, None, fields[0], int(fields[1]))
    return None


def _head(path, size: int) -> bytes:
    """The first `size` bytes of a file (all of an object on object storage), b"" when it cannot be read."""
    try:
        if isinstance(path, ObjectPath):
            return path.read_bytes()[:size]
        with open(path, "rb") as f:
            return f.read(size)
    except OSError:
        return b""


def read_header(path) -> Header | None:
    """The header of the checkpoint entry at `path` (its first line), None when it has none."""
    return parse_header(_head(path, 1024).partition(b"\n")[0])


def checkpoint_problem(data: bytes, key: str) -> str | None:
    """Why the bytes of a cached checkpoint file are not what was written for `key`, None when they are."""
    line, sep, body = data.partition(b"\n")
    header = parse_header(line) if sep else None
    if header is None:
        return "no checkpoint header"
    if header.version != FORMAT:
        return _format_problem(CHECKPOINT, header.version)
    if header.size != len(body):
        return f"{len(body)} bytes where {header.size} were written"
    if sha256_bytes(body) != header.sha256:
        return "sha256 mismatch"
    if header.key != key:
        return another_key(str(header.key))
    return state_dict_problem(body)


def state_dict_problem(body: bytes) -> str | None:
    """Why checkpoint bytes are not a plain state dict (names -> tensors, loadable with weights_only=True),
    None when they are: a pickle of anything else is refused as a damaged entry, never loaded another way."""
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
    """Why a cached cell file is not what was written for the key its name says, None when it is."""
    try:
        record = json.loads(location(path).read_text())
    except (ValueError, OSError) as e:
        return f"unreadable ({type(e).__name__})"
    return cell_record_problem(record, location(path).stem)


def written_by_drift(path) -> bool:
    """Whether the file at `path` is a checkpoint or cell entry drift wrote, in any of its formats, damaged or
    not (its header says so): `drift cache gc` deletes nothing else."""
    if read_header(path) is not None:
        return True
    data = _head(path, CELL_BYTES)
    if data.startswith(f'{{"format": "{CELL} '.encode()):  # a cell, whole or torn
        return True
    try:
        return _cell_version(json.loads(data)) is not None
    except (ValueError, RecursionError):  # not JSON, or nested beyond the parser
        return False

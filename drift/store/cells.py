"""The checkpoint and cell cache: train and evaluate compute only what nothing has computed before.

`checkpoint_key` hashes what determines a checkpoint f_k of (model, seed): the registry entry, input and outputs;
the seed (not for the closed-form references); the content keys, labels and split of the cutoff's training rows
in table order and the encoder fingerprint; epochs, batch size, weight decay, learning rate, optimiser, token
cap, engine and thread count; the train stage's import closure. `cell_key` hashes the checkpoint's key, the
content keys and labels of the rows M scores the cell on, the metric and the evaluation code; any change changes
the key (tests/test_cells.py). The cache lives beside the embedding store (embed.cache_dir), outside the
workspace, so DVC's output removal, `dvc exp run --temp` and other checkouts all find it: <cache_dir>/checkpoints/
<key[:2]>/<key>.pt (a state dict), <cache_dir>/cells/<key[:2]>/<key>.json (a score, null if unscorable)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np

from drift.core.closure import ROOT, import_closure
from drift.core.errors import DriftError

VERSION = 1  # bump to invalidate every cached checkpoint and cell at once


def code_version(stage: str, root: Path = ROOT) -> str:
    """A digest of the code that decides what stage `stage` ("train", "evaluate") computes: its script and the
    script's import closure inside drift/, the very files dvc.yaml lists as the stage's code deps."""
    script = Path(root) / "stages" / f"{stage}.py"
    if not script.exists():
        raise DriftError(f"{script} is missing: the caches key on the stage scripts of a checkout of the project")
    digest = hashlib.sha256(str(VERSION).encode())
    for name in [f"stages/{stage}.py", *import_closure(script, root)]:
        digest.update(name.encode())
        digest.update((Path(root) / name).read_bytes())
    return digest.hexdigest()


def _hash(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def row_hashes(keys, labels: list, splits) -> np.ndarray:
    """One 32-byte digest per row of its payload key, label and split (computed once per dataset)."""
    return np.array([hashlib.sha256(f"{k}|{l}|{s}".encode()).digest() for k, l, s in zip(keys, labels, splits)],
                    dtype="S32")


def rows_digest(hashes: np.ndarray, rows: np.ndarray) -> str:
    """The content of these rows, in this order."""
    return hashlib.sha256(hashes[np.asarray(rows, dtype=np.int64)].tobytes()).hexdigest()


def checkpoint_key(model_spec: str, seed: int | None, rows: str, inputs: str, training: dict, code: str) -> str:
    return _hash("checkpoint", model_spec, seed, rows, inputs, training, code)


def cell_key(checkpoint: str, rows: str, metric: str, code: str) -> str:
    return _hash("cell", checkpoint, rows, metric, code)


def file_digest(path: Path) -> str:
    """A checkpoint's identity for its cells: the bytes it holds (a reused checkpoint is a copy of them)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class CellCache:
    """Checkpoints and cell scores by key, under `root` (the embedding store's directory)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, kind: str, key: str, suffix: str) -> Path:
        return self.root / kind / key[:2] / f"{key}{suffix}"

    def checkpoint(self, key: str) -> Path | None:
        path = self._path("checkpoints", key, ".pt")
        return path if path.exists() else None

    def put_checkpoint(self, key: str, source: Path) -> Path:
        path = self._path("checkpoints", key, ".pt")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(source, tmp)
        tmp.replace(path)  # a killed run never leaves half a checkpoint under its key
        return path

    def cell(self, key: str):
        """(True, score) when cached (score None: the metric could not score the cell), else (False, None)."""
        path = self._path("cells", key, ".json")
        if not path.exists():
            return False, None
        return True, json.loads(path.read_text())["score"]

    def put_cell(self, key: str, score: float | None) -> None:
        path = self._path("cells", key, ".json")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"score": score}))
        tmp.replace(path)


def place(source: Path, target: Path) -> None:
    """A cached checkpoint at its place in data/models/ (a copy: DVC owns what is in the workspace)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)

"""One dataset's slice table as the stages after embed read it, without the params (SliceTable): the rows'
keys, slices, splits and labels, the manifest and task, and the embed stage's manifest per encoder. The model
inputs on top of it are drift.models.slice_data's."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from drift.core.stage import require
from drift.protocol.tasks import get_task
from drift.store.cells import row_hashes
from drift.store.features import keys_sha256
from drift.store.slices import read_slice_manifest, read_slice_table


class SliceTable:
    """One dataset's slice table as the stages after embed read it, without the params: its paths, manifest, task
    and the small columns (key, slice, split, label) of every row, and the embed stage's manifests per encoder."""

    def __init__(self, name: str, root: str | Path = "."):
        """`root`: the repository (the working directory of a stage); a missing input names the stage to run."""
        self.root = Path(root).resolve()
        p = self.paths = require(name, "slice_manifest", "embeddings", root=self.root)
        self.name = name
        self.manifest = read_slice_manifest(p["slices"])
        self.task = get_task(self.manifest["task"])
        self.n_outputs = self.task.n_outputs(len(self.manifest["label_names"]))
        self.slice_path = p["slices"]
        # the small columns only: payloads (texts, images) are read from the feature files, batch by batch
        self.table = read_slice_table(p["slices"], columns=["key", "slice", "split", "label"])
        self.keys_sha256 = keys_sha256(self.table.column("key"))
        self.slices = self.table.column("slice").to_numpy()
        self.splits = self.table.column("split").to_numpy(zero_copy_only=False)
        self.labels = self.table.column("label").to_pylist()
        self.usable = [s["usable"] for s in self.manifest["slices"]]
        self.modality = self.manifest.get("modality", "text")
        self.encoders = embedding_manifests(p["embeddings"])
        self._row_hashes = None

    @property
    def row_hashes(self) -> np.ndarray:
        """Each row's content (payload key, label, split) as 32 bytes: what the cell cache keys rows by."""
        if self._row_hashes is None:
            self._row_hashes = row_hashes(self.table.column("key").to_pylist(), self.labels, self.splits)
        return self._row_hashes

    def usable_rows(self) -> np.ndarray:
        return np.flatnonzero(np.isin(self.slices, [s["index"] for s in self.manifest["slices"] if s["usable"]]))


def embedding_manifests(path) -> dict[str, dict]:
    """{encoder name: manifest} from data/embeddings/<dataset>.json."""
    data = json.loads(Path(path).read_text())
    if "encoders" in data:
        return data["encoders"]
    return {data["encoder"]: data} if data.get("encoder") else {}

"""One dataset's slice table as the stages after embed read it, without the params (SliceTable): the rows'
keys, slices, splits and labels, the manifest and task, and the embed stage's manifest per encoder. The model
inputs on top of it are drift.models.slice_data's."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from drift.core.stage import require
from drift.protocol.tasks import get_task
from drift.store.cells import row_hashes
from drift.store.embeddings import EmbeddingsManifest, StoreManifest
from drift.store.features import keys_sha256
from drift.store.slices import SliceManifest, read_slice_manifest, read_slice_table


class SliceTable:
    """One dataset's slice table as the stages after embed read it, without the params: its paths, manifest,
    task and the small columns (key, slice, split, label) of every row, and the embed stage's manifests per
    encoder."""

    def __init__(self, name: str, root: str | Path = "."):
        """`root`: the repository (the working directory of a stage); a missing input names the stage to run."""
        self.root = Path(root).resolve()
        p = self.paths = require(name, "slice_manifest", "embeddings", root=self.root)
        self.slice_path = p["slices"]
        # the manifests first (small, validated: one of another version stops here), then the small columns
        # only: payloads (texts, images) are read from the feature files, batch by batch
        manifest = read_slice_manifest(p["slices"])
        encoders = EmbeddingsManifest.from_file(p["embeddings"], name).encoders
        table = read_slice_table(p["slices"], columns=["key", "slice", "split", "label"])
        self._set_rows(name, manifest, table, encoders)

    def _set_rows(
        self, name: str, manifest: SliceManifest, table, encoders: dict[str, StoreManifest]
    ) -> None:
        """What the rows and manifests say, however they arrived (read here, or shipped to a Ray worker)."""
        self.name, self.manifest, self.table, self.encoders = name, manifest, table, encoders
        self.task = get_task(manifest.task)
        self.n_outputs = self.task.n_outputs(len(manifest.label_names))
        self.keys_sha256 = keys_sha256(table.column("key"))
        self.slices = table.column("slice").to_numpy()
        self.splits = table.column("split").to_numpy(zero_copy_only=False)
        self.labels = table.column("label").to_pylist()
        self.usable = [s.usable for s in manifest.slices]
        self.modality = manifest.modality
        self._row_hashes: np.ndarray | None = None

    @property
    def row_hashes(self) -> np.ndarray:
        """Each row's content (payload key, label, split) as 32 bytes: what the cell cache keys rows by."""
        if self._row_hashes is None:
            self._row_hashes = row_hashes(self.table.column("key").to_pylist(), self.labels, self.splits)
        return self._row_hashes

    def usable_rows(self) -> np.ndarray:
        return np.flatnonzero(np.isin(self.slices, [s.index for s in self.manifest.slices if s.usable]))

"""One dataset's slice table as the train and evaluate stages read it: rows, slices, splits, labels, and the
model inputs (pixels, or the embeddings of the encoder a model reads), read batch by batch from the dataset's
feature files (drift/store/features.py; built here if the embed stage has not written them for these rows)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from drift.core.errors import DriftError
from drift.core.params import Params
from drift.core.stage import require
from drift.models import get_model_info
from drift.models.inputs import Inputs, open_inputs
from drift.models.reference import text_counts
from drift.protocol.tasks import get_task
from drift.store.cells import row_hashes
from drift.store.features import ensure_features, keys_sha256
from drift.store.location import cache_dir
from drift.store.slices import read_slice_manifest, read_slice_table


def embedding_manifests(path) -> dict[str, dict]:
    """{encoder name: manifest} from data/embeddings/<dataset>.json."""
    data = json.loads(path.read_text())
    if "encoders" in data:
        return data["encoders"]
    return {data["encoder"]: data} if data.get("encoder") else {}


class SliceData:
    def __init__(self, params: Params, name: str, root: str | Path = "."):
        """`params`: params.yaml as the stage loaded it (drift.core.params.load_params); `root`: the repository (the
        working directory of a stage)."""
        self.root = Path(root).resolve()
        p = self.paths = require(name, "slice_manifest", "embeddings", root=self.root)
        self.name, self.params = name, params
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
        self._inputs: dict[tuple, Inputs] = {}
        self._row_hashes = None

    def __reduce__(self):
        """Pickled as its recipe (params, name, repository), not its arrays: a Ray task rebuilds it on the worker,
        which reads the same files (drift/core/executor.py checks that it can)."""
        return SliceData, (self.params, self.name, self.root)

    def store_dir(self) -> Path:
        """The embedding store's directory (embed.cache_dir relative to the repository, not the process)."""
        return self.root / cache_dir(self.params.embed)

    @property
    def row_hashes(self) -> np.ndarray:
        """Each row's content (payload key, label, split) as 32 bytes: what the cell cache keys rows by."""
        if self._row_hashes is None:
            self._row_hashes = row_hashes(self.table.column("key").to_pylist(), self.labels, self.splits)
        return self._row_hashes

    def input_id(self, model_name: str) -> str:
        """What a model's inputs are, beyond the rows' payloads: the encoder fingerprint of the embeddings it
        reads and the token cap, or the pixels themselves (their content keys are the rows')."""
        kind, encoder = self.input_kind(model_name), self.encoder_for(model_name)
        if encoder is None:
            return kind
        return f"{kind}:{self.encoders[encoder]['fingerprint']}:{self.params.max_tokens}"

    def usable_rows(self) -> np.ndarray:
        return np.flatnonzero(np.isin(self.slices, [s["index"] for s in self.manifest["slices"] if s["usable"]]))

    def encoder_for(self, model_name: str) -> str | None:
        """The encoder whose embeddings a model reads: its own for a probe, the text encoder for a text head."""
        info = get_model_info(model_name)
        if self.input_kind(model_name) in ("pixels", "text"):
            return None
        if info.input == "pooled":
            return info.name.removeprefix("probe-")
        return self.params.embed.text_encoder

    def input_kind(self, model_name: str) -> str:
        """pixels, tokens, pooled or text (the rows' raw strings); the references read pixels of an image dataset, the text encoder's pooled
        vectors of a text dataset."""
        kind = get_model_info(model_name).input
        if kind == "auto":
            return "pixels" if self.manifest.get("modality") == "image" else "pooled"
        return kind

    def inputs(self, model_name: str) -> Inputs:
        kind, encoder = self.input_kind(model_name), self.encoder_for(model_name)
        if kind == "text" and (kind, None) not in self._inputs:
            if self.modality != "text":
                raise DriftError(f"{model_name} reads raw text; {self.name} is an {self.modality} dataset: "
                                 f"drop {model_name} from train.baselines")
            texts = read_slice_table(self.slice_path, columns=["text"]).column("text").to_pylist()
            self._inputs[kind, None] = Inputs("text", text_counts(texts))
        if (kind, encoder) not in self._inputs:
            manifest = None
            if encoder is not None:
                if encoder not in self.encoders:
                    raise DriftError(f"{model_name} reads embeddings of {encoder}, which embed@{self.name} did not "
                                     f"compute: run `dvc repro embed@{self.name}`")
                manifest = self.encoders[encoder]
            path = ensure_features(kind, self.slice_path, self.table.column("key"), self.paths["features"], manifest,
                                   self.store_dir(), self.keys_sha256)
            self._inputs[kind, encoder] = open_inputs(kind, path, max_tokens=self.params.max_tokens)
        return self._inputs[kind, encoder]

"""One dataset's slice table as the train and evaluate stages read it: rows, slices, splits, labels, and the
model inputs (pixels, or the embeddings of the encoder a model reads), read batch by batch from the dataset's
feature files (drift/store/features.py; built here if the embed stage has not written them for these rows)."""
from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
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
from drift.store.features import ensure_features, is_current, keys_sha256
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
        self.slice_path = p["slices"]
        # the small columns only: payloads (texts, images) are read from the feature files, batch by batch
        self._set_rows(params, name, read_slice_manifest(p["slices"]),
                       read_slice_table(p["slices"], columns=["key", "slice", "split", "label"]),
                       embedding_manifests(p["embeddings"]))
        self._shipped = None

    def _set_rows(self, params: Params, name: str, manifest: dict, table, encoders: dict) -> None:
        self.name, self.params, self.manifest, self.table, self.encoders = name, params, manifest, table, encoders
        self.task = get_task(manifest["task"])
        self.n_outputs = self.task.n_outputs(len(manifest["label_names"]))
        self.keys_sha256 = keys_sha256(table.column("key"))
        self.slices = table.column("slice").to_numpy()
        self.splits = table.column("split").to_numpy(zero_copy_only=False)
        self.labels = table.column("label").to_pylist()
        self.usable = [s["usable"] for s in manifest["slices"]]
        self.modality = manifest.get("modality", "text")
        self._inputs: dict[tuple, Inputs] = {}
        self._feature_dirs: dict[tuple, Path] = {}
        self._row_hashes = None

    def __reduce__(self):
        """Pickled as its recipe (params, name, repository), not its arrays: a Ray task rebuilds it on the worker,
        which reads the same files (drift/core/executor.py checks that it can). Once `ship`ped, as a reference to
        its rows and inputs in Ray's object store instead."""
        if self._shipped is not None:
            return _unship, (self._shipped,)
        return SliceData, (self.params, self.name, self.root)

    def ship(self) -> None:
        """For Ray workers that share no filesystem with this process (the store on object storage): the small
        columns, the manifests and the bytes of every input opened so far (feature files; the term counts of raw
        text) go to Ray's object store once; a worker writes the files to its own temporary folder, checks their
        sizes and sha256 against their header, and reads them there. Open every model's inputs first."""
        import ray  # lazy: ray, only with compute.executor ray

        # one object per file: the stage holds one file's bytes at a time
        files = {kind: {f.name: ray.put(f.read_bytes()) for f in sorted(path.iterdir()) if f.is_file()}
                 for kind, path in self._feature_dirs.items()}
        text = {kind: inputs for kind, inputs in self._inputs.items() if kind not in self._feature_dirs}
        self._shipped = ray.put({"params": self.params, "name": self.name, "manifest": self.manifest,
                                 "table": self.table, "encoders": self.encoders, "files": files, "text": text})

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
            if self.slice_path is None:
                raise DriftError(f"{model_name}'s inputs were not shipped to this Ray worker: open every model's "
                                 "inputs (SliceData.inputs) before SliceData.ship")
            path = ensure_features(kind, self.slice_path, self.table.column("key"), self.paths["features"], manifest,
                                   self.store_dir(), self.keys_sha256)
            self._feature_dirs[kind, encoder] = path
            self._inputs[kind, encoder] = open_inputs(kind, path, max_tokens=self.params.max_tokens)
        return self._inputs[kind, encoder]


_UNSHIPPED: dict[str, SliceData] = {}  # one copy per worker process, whatever number of its tasks read it


def _unship(ref) -> SliceData:
    """On a Ray worker: the SliceData `ship` put in the object store, its feature files in a temporary folder of
    this process (removed at exit), each checked against its header before it is read."""
    if ref.hex() in _UNSHIPPED:
        return _UNSHIPPED[ref.hex()]
    import ray  # lazy: ray, only with compute.executor ray

    bundle = ray.get(ref)
    data = SliceData.__new__(SliceData)
    data._set_rows(bundle["params"], bundle["name"], bundle["manifest"], bundle["table"], bundle["encoders"])
    data.root, data.slice_path, data._shipped = None, None, ref
    folder = Path(tempfile.mkdtemp(prefix="drift-shipped-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    data.paths = {"features": folder}
    for (kind, encoder), files in bundle["files"].items():
        path = folder / f"{kind}-{encoder}"
        path.mkdir()
        for name, body in files.items():
            (path / name).write_bytes(ray.get(body))
        manifest = data.encoders[encoder] if encoder is not None else None
        if not is_current(path, data.keys_sha256, manifest):
            raise DriftError(f"the {kind} inputs of {data.name} shipped to Ray worker {os.uname().nodename} do "
                             "not match their header (damaged in Ray's object store?): run the stage again")
        data._feature_dirs[kind, encoder] = path
        data._inputs[kind, encoder] = open_inputs(kind, path, max_tokens=data.params.max_tokens)
    data._inputs.update(bundle["text"])
    _UNSHIPPED[ref.hex()] = data
    return data

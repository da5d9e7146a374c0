"""One dataset's slice table with the model inputs the train, evaluate and report stages read: pixels, the raw
texts, or the embeddings of the encoder a model reads, batch by batch from the dataset's feature files
(drift/store/features.py; built here if the embed stage has not written them for these rows). It carries no
params: InputSettings, resolved once from them (input_settings), says which encoders and what token cap. A Ray
worker rebuilding it declares the heads and encoders the stage's params.yaml declared
(drift.core.model_registry and encoder_registry DECLARED), so it builds them, and the declared encoders'
probes, as the stage's process does."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from drift.core.encoder_registry import DECLARED as DECLARED_ENCODERS
from drift.core.encoder_registry import register
from drift.core.errors import DriftError
from drift.core.model_registry import DECLARED, declare_models, declare_probes
from drift.core.objectstore import ObjectPath
from drift.core.params import Params, SplitParams
from drift.models import get_model_info
from drift.models.inputs import Inputs, open_inputs
from drift.models.reference import text_counts
from drift.protocol.slicing import id_hash_order, per_slice_draw
from drift.store.features import ensure_features, is_current
from drift.store.location import cache_dir
from drift.store.slice_table import SliceTable
from drift.store.slices import read_slice_table


class InputSettings(NamedTuple):
    """What the model inputs of a run are made of, beyond the rows: the text heads' encoder, the run's other
    encoders (in params order), the token cap of the text heads, the embedding store's directory, and the
    split the slice table was drawn with (what SliceData.split_order draws again; None: not known)."""

    text_encoder: str
    encoders: tuple[str, ...]
    max_tokens: int
    store: Path | ObjectPath  # drift.store.location.cache_dir
    split: SplitParams | None = None


def input_settings(params: Params) -> InputSettings:
    """The run's InputSettings: embed.text_encoder, embed.encoders, the token cap (train.max_tokens, else
    embed.max_length), the store (embed.cache_dir, else $DRIFT_CACHE_DIR or ~/.cache/drift) and `split`."""
    return InputSettings(
        params.embed.text_encoder,
        tuple(params.embed.encoders),
        params.max_tokens,
        cache_dir(params.embed),
        params.split,
    )


class ModelInput(NamedTuple):
    """What one model reads: pixels, tokens, pooled or text, the encoder of its embeddings (None for pixels
    and text) and the token cap of its rows."""

    kind: str
    encoder: str | None
    max_tokens: int


class SliceData(SliceTable):
    def __init__(self, name: str, settings: InputSettings, root: str | Path = "."):
        """Dataset `name`'s slice table (drift.store.slice_table) under `root` (the repository) and the inputs
        `settings` make of it."""
        super().__init__(name, root)
        self.settings = settings
        self._inputs: dict[tuple, Inputs] = {}
        self._feature_dirs: dict[tuple, Path] = {}
        self._shipped: object = None  # Ray's reference to the shipped rows and inputs (ship)
        self._split_order: np.ndarray | None = None  # split_order, once drawn

    def __reduce__(self):
        """Pickled as its recipe (name, settings, repository, and the split's order once drawn), not its
        arrays: a Ray task rebuilds it on the worker, which reads the same files (drift/core/executor.py
        checks that it can). Once `ship`ped, as a reference to its rows and inputs in Ray's object store
        instead. Either way with the declared heads."""
        if self._shipped is not None:
            return _unship, (self._shipped, _declared())
        return _rebuild, (self.name, self.settings, self.root, _declared(), self._split_order)

    def split_order(self) -> np.ndarray:
        """The training rows (indexes into the slice table), slice after slice in time order, each slice's
        rows in the order its split drew them: split.draw per-slice, as train_test_split returned them from
        the slice's rows in the records' order (data/records/<dataset>.parquet, read for its ids); id-hash, in
        the order hashed from id and seed. The draw is made again from `settings.split` and must give the
        table's split, else a one-line error says to run the slice stage."""
        if self._split_order is None:
            self._split_order = self._draw_split_order()
        return self._split_order

    def _draw_split_order(self) -> np.ndarray:
        split = self.settings.split
        if split is None or self.slice_path is None:
            raise DriftError(
                f"the split's row order of {self.name} was not drawn before this copy was made: build "
                "SliceData with input_settings(params) and call split_order() before shipping it"
            )
        ids = read_slice_table(self.slice_path, columns=["id"]).column("id").combine_chunks()
        if split.draw == "id-hash":
            order = id_hash_order(ids.to_pylist(), split.seed)
            train = order[self.splits[order] == "train"]
            return train[np.argsort(self.slices[train], kind="stable")]
        rows = np.argsort(self._records_positions(ids), kind="stable")  # the table's rows in records order
        drawn, train = per_slice_draw(
            self.slices[rows],
            [self.labels[i] for i in rows],
            "label" in split.stratify,
            split.test_fraction,
            split.seed,
        )
        if not np.array_equal(drawn, self.splits[rows]):
            raise DriftError(
                f"the split of {self.slice_path} is not the one split.* draws from {self.paths['records']}: "
                f"run `dvc repro slice@{self.name}`"
            )
        return rows[train]

    def _records_positions(self, ids: pa.Array) -> np.ndarray:
        """Each slice-table row's position in the records (their ids read in batches, not held whole)."""
        path = self.paths["records"]
        if not path.exists():
            raise DriftError(f"{path} is missing: run `dvc repro ingest@{self.name}` first")
        ids = ids.cast(pa.string())
        positions = np.full(len(ids), -1, np.int64)
        seen = 0
        for batch in pq.ParquetFile(path).iter_batches(columns=["id"], batch_size=1 << 20):
            found = pc.index_in(batch.column(0).cast(pa.string()), value_set=ids).fill_null(-1).to_numpy()
            hit = np.flatnonzero(found >= 0)
            positions[found[hit]] = seen + hit
            seen += batch.num_rows
        if (positions < 0).any():
            raise DriftError(
                f"{int((positions < 0).sum())} rows of {self.slice_path} are not in {path}: "
                f"run `dvc repro slice@{self.name}`"
            )
        return positions

    def ship(self) -> None:
        """For Ray workers that share no filesystem with this process (the store on object storage): the small
        columns, the manifests and the bytes of every input opened so far (feature files; the term counts of
        raw text) go to Ray's object store once; a worker writes the files to its own temporary folder, checks
        their sizes and sha256 against their header, and reads them there. Open every model's inputs first."""
        import ray  # lazy: ray, only with compute.executor ray

        # one object per file: the stage holds one file's bytes at a time
        files = {
            kind: {f.name: ray.put(f.read_bytes()) for f in sorted(path.iterdir()) if f.is_file()}
            for kind, path in self._feature_dirs.items()
        }
        text = {kind: inputs for kind, inputs in self._inputs.items() if kind not in self._feature_dirs}
        self._shipped = ray.put(
            {
                "settings": self.settings,
                "name": self.name,
                "manifest": self.manifest,
                "table": self.table,
                "encoders": self.encoders,
                "files": files,
                "text": text,
                "split_order": self._split_order,
            }
        )

    def store_dir(self) -> Path | ObjectPath:
        """The embedding store's directory (relative to the repository, not the process)."""
        return self.root / self.settings.store

    def model_input(self, model_name: str) -> ModelInput:
        """What a model reads: the references read pixels of an image dataset and the text encoder's pooled
        vectors of a text one, a probe its own encoder's pooled vectors, a text head the text encoder's
        tokens."""
        info = get_model_info(model_name)
        kind = info.input
        if kind == "auto":
            kind = "pixels" if self.manifest.modality == "image" else "pooled"
        if kind in ("pixels", "text"):
            encoder = None
        elif info.input == "pooled":
            encoder = info.name.removeprefix("probe-")
        else:
            encoder = self.settings.text_encoder
        return ModelInput(kind, encoder, self.settings.max_tokens)

    def input_id(self, model_name: str) -> str:
        """What a model's inputs are, beyond the rows' payloads: the encoder fingerprint of the embeddings it
        reads and the token cap, or the pixels themselves (their content keys are the rows')."""
        kind, encoder, max_tokens = self.model_input(model_name)
        if encoder is None:
            return kind
        return f"{kind}:{self.encoders[encoder].fingerprint}:{max_tokens}"

    def encoder_for(self, model_name: str) -> str | None:
        """The encoder whose embeddings a model reads: its own for a probe, the text encoder for a text head."""
        return self.model_input(model_name).encoder

    def input_kind(self, model_name: str) -> str:
        """pixels, tokens, pooled or text (the rows' raw strings)."""
        return self.model_input(model_name).kind

    def inputs(self, model_name: str) -> Inputs:
        kind, encoder, max_tokens = self.model_input(model_name)
        if kind == "text" and (kind, None) not in self._inputs:
            if self.modality != "text":
                raise DriftError(
                    f"{model_name} reads raw text; {self.name} is an {self.modality} dataset: "
                    f"drop {model_name} from train.baselines"
                )
            texts = read_slice_table(self.slice_path, columns=["text"]).column("text").to_pylist()
            self._inputs[kind, None] = Inputs("text", text_counts(texts))
        if (kind, encoder) not in self._inputs:
            manifest = None
            if encoder is not None:
                if encoder not in self.encoders:
                    raise DriftError(
                        f"{model_name} reads embeddings of {encoder}, which embed@{self.name} did not "
                        f"compute: run `dvc repro embed@{self.name}`"
                    )
                manifest = self.encoders[encoder]
            if self.slice_path is None:
                raise DriftError(
                    f"{model_name}'s inputs were not shipped to this Ray worker: open every model's "
                    "inputs (SliceData.inputs) before SliceData.ship"
                )
            path = ensure_features(
                kind,
                self.slice_path,
                self.table.column("key"),
                self.paths["features"],
                manifest,
                self.store_dir(),
                self.keys_sha256,
            )
            self._feature_dirs[kind, encoder] = path
            self._inputs[kind, encoder] = open_inputs(kind, path, max_tokens=max_tokens)
        return self._inputs[kind, encoder]


def _declared() -> tuple[dict, list]:
    """What params.yaml declared in this process: the heads as written, the encoders' specs."""
    return dict(DECLARED), list(DECLARED_ENCODERS.values())


def _declare(declared: tuple[dict, list]) -> None:
    """On a worker: the heads and encoders `_declared` gave, registered with the declared encoders' probes."""
    heads, encoders = declared
    declare_models(heads)
    for spec in encoders:
        register(spec)
    declare_probes(encoders)


def _rebuild(
    name: str, settings: InputSettings, root, declared: tuple[dict, list], split_order=None
) -> SliceData:
    """SliceData rebuilt from its recipe, with what params.yaml declared (`declared`) registered."""
    _declare(declared)
    data = SliceData(name, settings, root)
    data._split_order = split_order
    return data


_UNSHIPPED: dict[str, SliceData] = {}  # one copy per worker process, whatever number of its tasks read it


def _unship(ref, declared: tuple[dict, list]) -> SliceData:
    """On a Ray worker: the SliceData `ship` put in the object store, its feature files in a temporary folder
    of this process (removed at exit), each checked against its header before it is read; the heads
    params.yaml declared (`declared`) registered."""
    _declare(declared)
    if ref.hex() in _UNSHIPPED:
        return _UNSHIPPED[ref.hex()]
    import ray  # lazy: ray, only with compute.executor ray

    bundle = ray.get(ref)
    data = SliceData.__new__(SliceData)
    data._set_rows(bundle["name"], bundle["manifest"], bundle["table"], bundle["encoders"])
    data.settings, data._inputs, data._feature_dirs = bundle["settings"], {}, {}
    data._split_order = bundle["split_order"]
    # no checkout on this worker: nothing is read by path (inputs() refuses what was not shipped)
    data.root, data.slice_path, data._shipped = None, None, ref  # type: ignore[assignment]
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
            raise DriftError(
                f"the {kind} inputs of {data.name} shipped to Ray worker {os.uname().nodename} do "
                "not match their header (damaged in Ray's object store?): run the stage again"
            )
        data._feature_dirs[kind, encoder] = path
        data._inputs[kind, encoder] = open_inputs(kind, path, max_tokens=data.settings.max_tokens)
    data._inputs.update(bundle["text"])
    _UNSHIPPED[ref.hex()] = data
    return data

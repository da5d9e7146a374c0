"""One dataset's slice table with the model inputs the train, evaluate and report stages read: pixels, the raw
texts, or the embeddings of the encoder a model reads, batch by batch from the dataset's feature files
(drift/store/features.py; built here if the embed stage has not written them for these rows). It carries no
params: InputSettings, resolved once from them (input_settings), says which encoders and what token cap."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from drift.core.errors import DriftError
from drift.core.params import Params
from drift.models import get_model_info
from drift.models.inputs import Inputs, open_inputs
from drift.models.reference import text_counts
from drift.store.features import ensure_features
from drift.store.location import cache_dir
from drift.store.slice_table import SliceTable
from drift.store.slices import read_slice_table


class InputSettings(NamedTuple):
    """What the model inputs of a run are made of, beyond the rows: the text heads' encoder, the run's other
    encoders (in params order), the token cap of the text heads, and the embedding store's directory."""
    text_encoder: str
    encoders: tuple[str, ...]
    max_tokens: int
    store: object  # Path or drift.core.objectstore.ObjectPath (drift.store.location.cache_dir)


def input_settings(params: Params) -> InputSettings:
    """The run's InputSettings: embed.text_encoder, embed.encoders, the token cap (train.max_tokens, else
    embed.max_length) and the store (embed.cache_dir, else $DRIFT_CACHE_DIR or ~/.cache/drift)."""
    return InputSettings(params.embed.text_encoder, tuple(params.embed.encoders), params.max_tokens,
                         cache_dir(params.embed))


class ModelInput(NamedTuple):
    """What one model reads: pixels, tokens, pooled or text, the encoder of its embeddings (None for pixels and
    text) and the token cap of its rows."""
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

    def __reduce__(self):
        """Pickled as its recipe (name, settings, repository), not its arrays: a Ray task rebuilds it on the
        worker, which reads the same files (drift/core/executor.py checks that it can)."""
        return SliceData, (self.name, self.settings, self.root)

    def store_dir(self) -> Path:
        """The embedding store's directory (relative to the repository, not the process)."""
        return self.root / self.settings.store

    def model_input(self, model_name: str) -> ModelInput:
        """What a model reads: the references read pixels of an image dataset and the text encoder's pooled
        vectors of a text one, a probe its own encoder's pooled vectors, a text head the text encoder's tokens."""
        info = get_model_info(model_name)
        kind = info.input
        if kind == "auto":
            kind = "pixels" if self.manifest.get("modality") == "image" else "pooled"
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
        return f"{kind}:{self.encoders[encoder]['fingerprint']}:{max_tokens}"

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
            self._inputs[kind, encoder] = open_inputs(kind, path, max_tokens=max_tokens)
        return self._inputs[kind, encoder]

"""Cache keys record the versions of the libraries that compute their numbers, and of no other: another
version of click or tqdm (as importlib.metadata reports it) keeps every key, an embedding table's, a
checkpoint's and a cell's; another torch changes them all."""

from __future__ import annotations

from importlib import metadata

import pytest

import drift.core.environment as environment
from drift.core.encoder_registry import get_encoder_spec
from drift.core.environment import KEY_LIBRARIES, library_versions
from drift.core.errors import DriftError
from drift.encoders.fingerprint import Fingerprinted, code_fields
from drift.store.cells import cell_key, checkpoint_key, code_version

MODEL_MODULES = ["drift.models.text_heads", "drift.models.image"]


def stub_encoder(module: str, weights):
    """A Fingerprinted encoder of `module` (its code and libraries are those of that module's closure)."""

    class Stub(Fingerprinted):
        def __init__(self):
            self.spec, self.path = get_encoder_spec("minilm-l6"), weights

        def fingerprint_fields(self) -> dict:
            return {"max_length": 64}

    Stub.__module__ = module
    return Stub()


def keys(weights) -> dict:
    """Every kind of key, computed afresh."""
    train = code_version("train", "drift.models.text_heads", MODEL_MODULES)
    evaluate = code_version("evaluate")
    return {
        "text": stub_encoder("drift.encoders.text", weights).fingerprint_hash(),
        "vision": stub_encoder("drift.encoders.vision", weights).fingerprint_hash(),
        "train": code_version("train"),
        "checkpoint": checkpoint_key("ffn-s", 0, "rows", "inputs", {"epochs": 5}, train),
        "cell": cell_key("checkpoint", "rows", "macro_auc", evaluate),
    }


@pytest.fixture
def bump(monkeypatch):
    """bump(*distributions): importlib.metadata reports another version of each from now on."""
    real = metadata.version

    def bump(*distributions: str) -> None:
        names = {d.lower() for d in distributions}
        monkeypatch.setattr(metadata, "version", lambda d: "99.0.0" if d.lower() in names else real(d))
        environment.package_version.cache_clear()

    environment.package_version.cache_clear()
    yield bump
    monkeypatch.undo()
    environment.package_version.cache_clear()


@pytest.fixture
def weights(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"weights")
    return path


def test_a_library_that_computes_nothing_keeps_every_key(bump, weights):
    before = keys(weights)
    bump(
        "click",
        "tqdm",
        "jinja2",
        "filelock",
        "fsspec",
        "packaging",
        "setuptools",
        "sympy",
        "networkx",
        "rich",
        "pylance",
        "pyarrow",
        "polars",
        "huggingface-hub",
        "nvidia-cudnn-cu13",
        "triton",
    )
    assert keys(weights) == before


@pytest.mark.parametrize("library", ["torch", "numpy"])
def test_a_library_that_computes_changes_every_key(bump, weights, library):
    before = keys(weights)
    bump(library)
    after = keys(weights)
    assert [kind for kind in before if before[kind] == after[kind]] == []


@pytest.mark.compute
def test_each_key_records_only_its_own_libraries(bump, weights):
    before = keys(weights)
    bump("transformers", "tokenizers")  # the text encoder's: its tables only
    after = keys(weights)
    assert [kind for kind in before if before[kind] != after[kind]] == ["text"]
    bump("timm")
    assert [kind for kind in before if before[kind] != keys(weights)[kind]] == ["vision"]
    bump("scikit-learn", "scipy")  # the reference models' and metrics': checkpoints and cells, no table
    assert [kind for kind in before if before[kind] != keys(weights)[kind]] == ["train", "checkpoint", "cell"]


@pytest.mark.compute
def test_the_recorded_libraries_are_those_of_the_table():
    text = code_fields("drift.encoders.text")["libraries"]
    assert (
        {"torch", "transformers", "tokenizers", "safetensors", "numpy"}
        <= set(text)
        <= set(KEY_LIBRARIES["encoder"])
    )
    vision = code_fields("drift.encoders.vision")["libraries"]
    assert {"torch", "timm", "numpy"} <= set(vision) <= set(KEY_LIBRARIES["encoder"])
    assert "click" not in text and "tqdm" not in vision
    everything = library_versions({"transformers"})  # no key: every library and what it requires, as before
    assert {"transformers", "tokenizers", "huggingface-hub"} <= set(everything)


def test_an_unknown_key_or_stage_names_the_valid_ones():
    with pytest.raises(DriftError, match="no cache key 'model': name one of encoder, checkpoint, cell"):
        library_versions({"torch"}, "model")
    with pytest.raises(DriftError, match="no cached stage 'embed': name one of train, evaluate"):
        code_version("embed")

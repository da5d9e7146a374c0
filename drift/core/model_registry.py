"""The models of the study by registry name: family, size, what each reads and how the paper writes it, without
torch, so the check stage validates every roster in a fraction of a second. drift/models builds the models
(`create_model`) and refuses to import when its classes disagree with this table (a name, an input, dropout).

Input kinds: "pixels" (images), "tokens" (a text encoder's token states), "pooled" (a frozen encoder's pooled
vector: probe-<encoder>), "text" (the raw text: baseline-tfidf), "auto" (the references: pixels of an image
dataset, the text encoder's pooled vectors of a text one)."""

from __future__ import annotations

from dataclasses import dataclass

from drift.core.encoder_registry import ENCODERS
from drift.core.errors import DriftError, close_matches


@dataclass(frozen=True)
class ModelInfo:
    name: str  # registry name, e.g. "cnn-m"
    family: str  # as the paper's tables write it, e.g. "CNN", "Recurrent", "Frozen" (the probes)
    size: str  # "S" | "M" | "L", "-" for probes
    input: str  # "pixels" | "tokens" | "pooled" | "text" | "auto"
    display: str  # as the paper writes the model, e.g. "CNN-M", "BiLSTM-Attn-L", "DINOv2-S"
    dropout: bool = False  # has dropout layers (p 0.1 in the authors' runs): ViT and the text heads


# image families (Table 3), each in sizes S, M, L: family as the paper writes it, whether it has dropout
IMAGE_FAMILIES = {
    "mlp": ("MLP", False),
    "cnn": ("CNN", False),
    "resnet": ("ResNet", False),
    "vit": ("ViT", True),
}
# text heads (Tables 11, 19), every one with dropout: family, display, size
TEXT_HEADS = {
    "ffn-s": ("FFN", "FFN-S", "S"),
    "ffn-m": ("FFN", "FFN-M", "M"),
    "ffn-l": ("FFN", "FFN-L", "L"),
    "textcnn-s": ("TextCNN", "TextCNN-S", "S"),
    "textcnn-m": ("TextCNN", "TextCNN-M", "M"),
    "textcnn-l": ("TextCNN", "TextCNN-L", "L"),
    "bigru-s": ("Recurrent", "BiGRU-S", "S"),
    "bilstm-m": ("Recurrent", "BiLSTM-M", "M"),
    "bilstm-attn-l": ("Recurrent", "BiLSTM-Attn-L", "L"),
    "tx-s": ("Transformer", "TX-S", "S"),
    "tx-m": ("Transformer", "TX-M", "M"),
    "tx-l": ("Transformer", "TX-L", "L"),
}
# the references in every matrix (drift.protocol.summary.REFERENCES names them too): input, display
REFERENCE_MODELS = {
    "baseline-prior": ("auto", "Prior"),
    "baseline-linear": ("auto", "Linear"),
    "baseline-tfidf": ("text", "TF-IDF"),
}

MODELS: dict[str, ModelInfo] = {}
for _fam, (_family, _dropout) in IMAGE_FAMILIES.items():
    for _size in "SML":
        _name = f"{_fam}-{_size.lower()}"
        MODELS[_name] = ModelInfo(_name, _family, _size, "pixels", f"{_family}-{_size}", _dropout)
for _name, (_family, _display, _size) in TEXT_HEADS.items():
    MODELS[_name] = ModelInfo(_name, _family, _size, "tokens", _display, True)
for _enc in ENCODERS.values():
    MODELS[f"probe-{_enc.name}"] = ModelInfo(f"probe-{_enc.name}", "Frozen", "-", "pooled", _enc.display)
for _name, (_input, _display) in REFERENCE_MODELS.items():
    MODELS[_name] = ModelInfo(_name, "Reference", "-", _input, _display)
ALIASES = {"probe-minilm": "probe-minilm-l6"}


def resolve(name: str) -> str:
    """The registry name of `name` (aliases resolved); an unknown name lists the valid ones."""
    name = ALIASES.get(name, name)
    if name not in MODELS:
        raise DriftError(f"unknown model '{name}': {close_matches(name, list(MODELS) + list(ALIASES))}")
    return name


def get_model_info(name: str) -> ModelInfo:
    """The registry entry of a model (aliases resolved); an unknown name lists the valid ones."""
    return MODELS[resolve(name)]


def declare_models(declarations: dict) -> None:
    """Register the heads params.yaml declares (`models:` name -> {family, ...size arguments}) beside the
    built-in ones, replacing those an earlier call declared; a bad declaration is a one-line DriftError."""
    if declarations:
        raise DriftError("params.yaml `models:`: declared models are not supported yet")

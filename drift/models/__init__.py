"""Model registry, timm-style: `create_model(name, input_spec, n_outputs)` builds any model of the study.

Three kinds of input:
  "pixels"  images, forward(x) with x [B, C, H, W]                        (mlp, cnn, resnet, vit; Table 3)
  "tokens"  token states, forward(x, mask), x [B, T, D], mask [B, T] bool  (text heads; Tables 11, 19)
  "pooled"  a frozen encoder's pooled vector, forward(x) with x [B, D]     (probe-<encoder>; Tables 4, 12, 20)
  "text"    the rows' raw text, forward(texts) with a sequence of B strings (baseline-tfidf, a reference)
Every model returns [B, n_outputs] and carries `.name`, `.family` and `.input_kind`. `dropout` p reaches the
families that have dropout in the authors' definitions (ViT, every text head); the others have none.

A head (built-in or declared in params.yaml `models:`) is its family's class (CLASSES) called with the size
arguments its registry entry carries (drift.core.model_registry: FAMILIES, BUILT_IN, declare_models); this
package refuses to import when a class's size arguments, dropout or input differ from its family's table.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
import torch.nn as nn

from drift.core.encoder_registry import ENCODERS
from drift.core.errors import DriftError
from drift.core.model_registry import (
    ALIASES,
    FAMILIES,
    MODELS,
    InputKind,
    ModelInfo,
    declared_probes,
    family_of,
    get_model_info,
    resolve,
)
from drift.models import image, text_heads
from drift.models.probe import LinearProbe
from drift.models.reference import LinearBaseline, PriorBaseline, TfidfBaseline
from drift.protocol.summary import REFERENCES

# a registry entry's input "auto": a reference model reads what the dataset offers: pixels of an image
# dataset, or the text encoder's pooled vectors of a text dataset (drift.models.slice_data resolves it)


@dataclass(frozen=True)
class InputSpec:
    kind: InputKind
    shape: tuple  # pixels: (C, H, W); tokens and pooled: (D,), the embedding width
    max_tokens: int = 512  # tokens: longest sequence (rows are cut there; no head has a position table)


CLASSES: dict[str, type[nn.Module]] = {**image.FAMILIES, **text_heads.FAMILIES}  # a FAMILIES key's class
_INPUTS = {image.__name__: "pixels", text_heads.__name__: "tokens"}  # what a head class reads, by its module
_NOT_SIZES = ("spec", "n_outputs", "dropout", "authors")  # a head class's arguments that are no size argument


def family_problems() -> list[str]:
    """Where the head classes disagree with drift.core.model_registry's FAMILIES: a family without its class,
    or a class whose size arguments (names and defaults), dropout or input differ from its family's."""
    problems = [f"family {k} has no class" for k in FAMILIES.keys() - CLASSES.keys()]
    problems += [f"class {CLASSES[k].__name__} has no family" for k in CLASSES.keys() - FAMILIES.keys()]
    for key in CLASSES.keys() & FAMILIES.keys():
        cls, family = CLASSES[key], FAMILIES[key]
        params = inspect.signature(cls).parameters
        args = {n: p.default for n, p in params.items() if n not in _NOT_SIZES}
        table = {n: a.default for n, a in family.args.items()}
        if args != table:
            problems.append(f"{key}: {cls.__name__} takes {args}, the table says {table}")
        if ("dropout" in params) != family.dropout:
            problems.append(
                f"{key}: dropout {not family.dropout} in {cls.__name__}, {family.dropout} in the table"
            )
        if _INPUTS[cls.__module__] != family.input:
            problems.append(
                f"{key}: {cls.__name__} reads {_INPUTS[cls.__module__]}, the table says {family.input}"
            )
    return problems


_DERIVED: dict[str, ModelInfo] = {}  # the probes and references as their classes say: must be in MODELS
_BUILD: dict[str, tuple] = {}  # probe or reference name -> (class, arguments)


def _register(name, family, size, input_kind, display, cls, **kwargs):
    dropout = "dropout" in inspect.signature(cls).parameters
    _DERIVED[name] = ModelInfo(name, family, size, input_kind, display, dropout)
    _BUILD[name] = (cls, kwargs)


# the probes as the table's: a declared encoder's is a LinearProbe too (_construction), registered per load
for _enc in ENCODERS.values():
    if not _enc.declared:
        _register(f"probe-{_enc.name}", "Frozen", "-", "pooled", _enc.display, LinearProbe)
# references in every matrix, fitted in closed form through the same protocol (drift/models/reference.py)
_register(REFERENCES["prior"], "Reference", "-", "auto", "Prior", PriorBaseline)
_register(REFERENCES["linear"], "Reference", "-", "auto", "Linear", LinearBaseline)
_register(REFERENCES["tfidf"], "Reference", "-", "text", "TF-IDF", TfidfBaseline)  # text datasets only
BASELINES = tuple(REFERENCES.values())


def _table_problems() -> list[str]:
    """Where the torch-free table, which the check stage reads, says other than the classes build: the heads'
    families (family_problems), the probes and references (a declared encoder's probe aside)."""
    table = {n: info for n, info in MODELS.items() if n not in declared_probes() and family_of(info) is None}
    differ = sorted(n for n in {*_DERIVED, *table} if _DERIVED.get(n) != table.get(n))
    return family_problems() + ([f"the models {', '.join(differ)}"] if differ else [])


if _table_problems():
    raise RuntimeError(
        f"drift/core/model_registry.py disagrees with the model classes: {'; '.join(_table_problems())}: "
        "make its table say what drift/models builds"
    )
_resolve = resolve


def _construction(info: ModelInfo) -> tuple:
    """(class, arguments) of a registered model: a head's family class with its size arguments, a probe (a
    declared encoder's too) a LinearProbe, a reference its class."""
    family = family_of(info)
    if family is not None:
        return CLASSES[family], dict(info.args)
    if info.name not in _BUILD and info.input == "pooled":
        return LinearProbe, {}
    return _BUILD[info.name]


def model_module(name: str) -> str:
    """The module defining a model's class (drift.models.text_heads for the text heads): what its cache key
    covers of the model code (drift/store/cells.py `code_version`)."""
    return _construction(MODELS[_resolve(name)])[0].__module__


def model_modules() -> list[str]:
    """Every module defining a model class of the registry."""
    return sorted({cls.__module__ for cls in [*CLASSES.values(), *(c for c, _ in _BUILD.values())]})


def list_models() -> list[ModelInfo]:
    """Every model (aliases left out), images first, then text heads, then probes."""
    return list(MODELS.values())


MODULES = ("ours", "authors")


def create_model(
    name: str, input_spec: InputSpec, n_outputs: int, dropout: float = 0.0, modules: str = "ours"
) -> nn.Module:
    """`name` built for this input and number of outputs; `dropout`: p of a model with dropout layers
    (ModelInfo.dropout), ignored by the others. `modules` authors: the CNNs with their convolution biases, the
    ViTs and Transformer heads with their layers deep-copied from one, as the authors' code builds them (the
    same generator state gives their initial weights; the other families are built so already), and the
    TextCNNs' max over every window of the rows padded to input_spec.max_tokens, as theirs."""
    canonical = _resolve(name)
    info = MODELS[canonical]
    spec = input_spec
    want = {"pixels": "(C, H, W)", "text": "(1,)"}.get(spec.kind, "(D,)")
    if info.input == "auto" and spec.kind not in ("pixels", "pooled"):
        raise DriftError(f"model '{name}' reads pixels or pooled vectors; got {spec.kind} input")
    if info.input != "auto" and spec.kind != info.input:
        raise DriftError(f"model '{name}' needs {info.input} input, shape {want}; got {spec.kind} input")
    if len(spec.shape) != (3 if spec.kind == "pixels" else 1) or min(spec.shape) < 1:
        raise DriftError(
            f"model '{name}' needs {info.input} input of shape {want}; got shape {tuple(spec.shape)}"
        )
    if n_outputs < 1:
        raise DriftError(f"model '{name}' needs n_outputs >= 1; got {n_outputs}")
    if not 0 <= dropout < 1:
        raise DriftError(f"dropout must be in [0, 1); got {dropout}")
    if modules not in MODULES:
        raise DriftError(f"modules must be one of {', '.join(MODULES)}; got {modules!r}")
    cls, kwargs = _construction(info)
    if info.dropout:
        kwargs = {**kwargs, "dropout": dropout}
    if modules == "authors" and "authors" in inspect.signature(cls).parameters:
        kwargs = {**kwargs, "authors": True}
    model = cls(spec, n_outputs, **kwargs)
    model.name, model.family, model.input_kind = canonical, info.family, info.input
    return model


def count_params(model: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts."""
    total = sum(p.numel() for p in model.parameters())
    return sum(p.numel() for p in model.parameters() if p.requires_grad), total


def model_params(name: str, input_spec: InputSpec, n_outputs: int) -> tuple[int, int]:
    """count_params of `name` built for this input, on the meta device: shapes only, no memory and no
    initialisation, so a declared head of any size is counted at once."""
    with torch.device("meta"):
        return count_params(create_model(name, input_spec, n_outputs))


def format_params(n: int) -> str:
    """The paper's rounding: 770, 94k, 2.1M."""
    if n < 1000:
        return str(n)
    if n < 999_500:
        return f"{round(n / 1000)}k"
    return f"{n / 1e6:.1f}M"


def reference_spec(name: str, arxiv: bool = False) -> tuple[InputSpec, int]:
    """(InputSpec, n_outputs) of the paper's setting for `name`: images 3x32x32 with 2 classes (Yearbook);
    text heads on 768-d RoBERTa tokens with 1 output (Amazon Reviews), or 7 with arxiv=True (arXiv); probes at
    their encoder's width with 2 classes (vision) or 1 output, 7 with arxiv=True (text)."""
    info = MODELS[_resolve(name)]
    text_outputs = 7 if arxiv else 1
    if info.input == "auto":  # the references: pooled 768-d text vectors (Amazon / arXiv)
        return InputSpec("pooled", (768,)), text_outputs
    if info.input == "text":
        return InputSpec("text", (1,)), text_outputs
    if info.input == "pixels":
        return InputSpec("pixels", (3, 32, 32)), 2
    if info.input == "tokens":
        return InputSpec("tokens", (768,)), text_outputs
    enc = ENCODERS[info.name.removeprefix("probe-")]
    return InputSpec("pooled", (enc.dim,)), 2 if enc.modality == "image" else text_outputs


# The paper's trainable counts, as printed (rounded), at reference_spec(name): Tables 3, 4 (Yearbook) and 11,
# 12 (Amazon Reviews). Probes are a single linear layer, exactly D * n + n; the tables round them.
PAPER_PARAMS: dict[str, int] = {
    # Table 3
    "mlp-s": 98_000,
    "mlp-m": 410_000,
    "mlp-l": 2_100_000,
    "cnn-s": 94_000,
    "cnn-m": 542_000,
    "cnn-l": 2_100_000,
    "resnet-s": 98_000,
    "resnet-m": 400_000,
    "resnet-l": 2_100_000,
    "vit-s": 75_000,
    "vit-m": 545_000,
    "vit-l": 2_200_000,
    # Table 11
    "ffn-s": 99_000,
    "ffn-m": 394_000,
    "ffn-l": 1_600_000,
    "textcnn-s": 88_000,
    "textcnn-m": 461_000,
    "textcnn-l": 1_900_000,
    "bigru-s": 99_000,
    "bilstm-m": 536_000,
    "bilstm-attn-l": 2_200_000,
    "tx-s": 83_000,
    "tx-m": 493_000,
    "tx-l": 1_900_000,
    # Table 4
    "probe-dinov2-s": 770,
    "probe-dinov3-s": 770,
    "probe-vit-s16-in21k": 770,
    "probe-resnet50-in": 4_000,
    "probe-convnext-s": 2_000,
    "probe-eva02-b": 2_000,
    "probe-mae-b": 2_000,
    "probe-clip-b32": 2_000,
    "probe-siglip-b": 2_000,
    # Table 12
    "probe-bert": 769,
    "probe-roberta": 769,
    "probe-deberta-v3": 769,
    "probe-electra": 769,
    "probe-mpnet": 769,
    "probe-modernbert": 769,
    "probe-distilbert": 769,
}

# Tables 19 and 20 (arXiv, 7 labels), at reference_spec(name, arxiv=True).
PAPER_PARAMS_ARXIV: dict[str, int] = {
    "ffn-s": 99_000,
    "ffn-m": 397_000,
    "ffn-l": 1_600_000,
    "textcnn-s": 89_000,
    "textcnn-m": 462_000,
    "textcnn-l": 1_900_000,
    "bigru-s": 100_000,
    "bilstm-m": 537_000,
    "bilstm-attn-l": 2_200_000,
    "tx-s": 83_000,
    "tx-m": 493_000,
    "tx-l": 1_900_000,
    "probe-minilm-l6": 3_000,
    "probe-distilbert": 5_000,
    "probe-electra": 5_000,
    "probe-bert": 5_000,
    "probe-mpnet": 5_000,
    "probe-roberta": 5_000,
    "probe-modernbert": 5_000,
    "probe-deberta-v3": 5_000,
}

__all__ = [
    "InputSpec",
    "ModelInfo",
    "MODELS",
    "ALIASES",
    "BASELINES",
    "create_model",
    "get_model_info",
    "list_models",
    "count_params",
    "model_params",
    "format_params",
    "reference_spec",
    "PAPER_PARAMS",
    "PAPER_PARAMS_ARXIV",
]

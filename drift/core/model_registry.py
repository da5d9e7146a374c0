"""The models of the study by registry name: family, size, what each reads and how the paper writes it,
without torch, so the check stage validates every roster in a fraction of a second. drift/models builds the
models (`create_model`) and refuses to import when its classes disagree with this table (a name, an input,
dropout, a family's size arguments).

Heads are declarations: a family of FAMILIES and its size arguments, each checked against the family's table
of arguments (type, default, bounds). The paper's S/M/L sizes are the shipped declarations (BUILT_IN);
params.yaml `models:` declares more, read by the same code (declare_models, on every load_params: a load
without them drops them). A head's ModelInfo carries every size argument (`args`), so its checkpoint key
changes with its size.

Input kinds: "pixels" (images), "tokens" (a text encoder's token states), "pooled" (a frozen encoder's pooled
vector: probe-<encoder>), "text" (the raw text: baseline-tfidf), "auto" (the references: pixels of an image
dataset, the text encoder's pooled vectors of a text one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from drift.core.encoder_registry import ENCODERS
from drift.core.errors import DriftError, check_name, close_matches

InputKind = Literal["pixels", "tokens", "pooled", "text"]  # what a built model reads (drift.models.InputSpec)
ModelInput = Literal[InputKind, "auto"]  # what a registry entry reads: "auto" for the references
HeadInput = Literal["pixels", "tokens"]  # what a family of heads reads
ModelSize = Literal["S", "M", "L", "-"]  # "-" for probes, references and declared heads
SIZES: dict[str, ModelSize] = {"s": "S", "m": "M", "l": "L"}  # a built-in head's by its name's last letter


@dataclass(frozen=True)
class ModelInfo:
    name: str  # registry name, e.g. "cnn-m"
    family: str  # as the paper's tables write it, e.g. "CNN", "Recurrent", "Frozen" (the probes)
    size: ModelSize
    input: ModelInput
    # as the paper writes the model, e.g. "CNN-M", "BiLSTM-Attn-L", "DINOv2-S"; a declared head's name
    display: str
    dropout: bool = False  # has dropout layers (p 0.1 in the authors' runs): ViT and the text heads
    # a head's size arguments, every one (defaults filled, lists as tuples): what it is built with
    args: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Arg:
    """A size argument of a family: its type ("int"; "ints", a list of ints; "number", an int or a float;
    "bool"; "choice"), its default (the class's own), the bounds of its value or of each item of a list, the
    most items of a list, the values of a choice."""

    type: str
    default: Any
    low: float = 1
    high: float = 4096
    items: int = 8
    choices: tuple[str, ...] = ()

    def accepts(self, value) -> bool:
        def number(v, integer: bool = True) -> bool:
            kinds = int if integer else (int, float)
            return isinstance(v, kinds) and not isinstance(v, bool) and self.low <= v <= self.high

        if self.type == "ints":
            return (
                isinstance(value, (list, tuple)) and 1 <= len(value) <= self.items and all(map(number, value))
            )
        if self.type == "bool":
            return isinstance(value, bool)
        if self.type == "choice":
            return value in self.choices
        return number(value, integer=self.type == "int")

    def wants(self) -> str:
        """What a value must be, in words."""
        bounds = f"in [{self.low:g}, {self.high:g}]"
        return {
            "int": f"an integer {bounds}",
            "ints": f"a list of 1 to {self.items} integers, each {bounds}",
            "number": f"a number {bounds}",
            "bool": "true or false",
            "choice": f"one of {', '.join(self.choices)}",
        }[self.type]


@dataclass(frozen=True)
class Family:
    """A family of heads: as the paper writes it, what it reads, whether it has dropout layers, and its size
    arguments by the class's own names (drift/models: MLP, CNN, ResNet, ViT; FFN, TextCNN, RNNHead,
    TextTransformer)."""

    family: str
    input: HeadInput
    dropout: bool
    args: dict[str, Arg]


WIDTH = Arg("int", 64, 1, 2048)  # a Transformer's, a ViT's, a recurrent head's widths
# the families (Tables 3, 11). The bounds refuse absurd sizes (a typo's extra zeros), not large heads: the
# largest head they allow is about a billion parameters, against the paper's 2 million
FAMILIES: dict[str, Family] = {
    "mlp": Family("MLP", "pixels", False, {"hidden": Arg("ints", (32,), 1, 4096)}),
    "cnn": Family("CNN", "pixels", False, {"channels": Arg("ints", (32, 64, 128), 1, 2048)}),
    "resnet": Family(
        "ResNet",
        "pixels",
        False,
        {"channels": Arg("ints", (16, 32, 64), 1, 1024, 6), "blocks": Arg("ints", (1, 1, 1), 1, 8, 6)},
    ),
    "vit": Family(
        "ViT",
        "pixels",
        True,
        {
            "width": WIDTH,
            "layers": Arg("int", 2, 1, 24),
            "heads": Arg("int", 4, 1, 64),  # dividing width
            "mlp_ratio": Arg("number", 2, 0.25, 4),
            "patch": Arg("int", 4, 1, 64),
        },
    ),
    "ffn": Family("FFN", "tokens", True, {"hidden": Arg("int", 128, 1, 16384)}),
    "textcnn": Family(
        "TextCNN",
        "tokens",
        True,
        {
            "kernels": Arg("ints", (3, 4, 5), 1, 16),
            "filters": Arg("int", 48, 1, 2048),
            "projection": Arg("int", 128, 1, 8192),
        },
    ),
    "recurrent": Family(
        "Recurrent",
        "tokens",
        True,
        {
            "cell": Arg("choice", "gru", choices=("gru", "lstm")),
            "projection": WIDTH,
            "hidden": WIDTH,
            "layers": Arg("int", 1, 1, 4),
            "attention": Arg("bool", False),
        },
    ),
    "transformer": Family(
        "Transformer",
        "tokens",
        True,
        {
            "width": WIDTH,
            "layers": Arg("int", 1, 1, 24),
            "heads": Arg("int", 4, 1, 64),  # dividing width
            "ffn": Arg("int", 128, 1, 8192),
        },
    ),
}

# The paper's sizes, the authors' presets (drift_happens/model/dataset/{image,text}/architectures.py in
# learning-mechanisms/drift-happens, CC BY 4.0), declared as params.yaml declares a head. Trainable counts at
# the reference setting (drift.models.reference_spec; `drift models`): Table 3 (3x32x32 pixels, 2 classes),
# Table 11 (768-d tokens, 1 output). ViT and every text head have dropout (p 0.1 in the authors' runs:
# train.dropout).
BUILT_IN: dict[str, dict[str, Any]] = {
    "mlp-s": {"family": "mlp", "hidden": [32]},  # 98,402
    "mlp-m": {"family": "mlp", "hidden": [128, 128]},  # 410,114
    "mlp-l": {"family": "mlp", "hidden": [512, 512, 512]},  # 2,099,714
    "cnn-s": {"family": "cnn", "channels": [32, 64, 128]},  # 93,730
    "cnn-m": {"family": "cnn", "channels": [48, 96, 192, 192]},  # 541,874
    "cnn-l": {"family": "cnn", "channels": [64, 128, 256, 256, 512]},  # 2,143,298 (theirs: conv biases too)
    "resnet-s": {"family": "resnet", "channels": [18, 36, 72], "blocks": [1, 1, 1]},  # 97,940
    "resnet-m": {"family": "resnet", "channels": [32, 64, 128], "blocks": [2, 2, 1]},  # 400,162
    "resnet-l": {"family": "resnet", "channels": [56, 112, 224], "blocks": [2, 2, 2]},  # 2,125,818
    "vit-s": {"family": "vit", "width": 64, "layers": 2, "heads": 4, "mlp_ratio": 2},  # 74,562
    "vit-m": {"family": "vit", "width": 128, "layers": 4, "heads": 4, "mlp_ratio": 2},  # 545,154
    "vit-l": {"family": "vit", "width": 192, "layers": 6, "heads": 6, "mlp_ratio": 3},  # 2,248,514
    "ffn-s": {"family": "ffn", "hidden": 128},  # 98,561
    "ffn-m": {"family": "ffn", "hidden": 512},  # 394,241
    "ffn-l": {"family": "ffn", "hidden": 2048},  # 1,576,961
    "textcnn-s": {"family": "textcnn", "kernels": [3, 4], "filters": 16, "projection": 64},  # 88,225
    "textcnn-m": {"family": "textcnn", "kernels": [3, 4, 5], "filters": 48, "projection": 128},  # 461,201
    "textcnn-l": {"family": "textcnn", "kernels": [3, 4, 5], "filters": 192, "projection": 256},  # 1,918,017
    "bigru-s": {"family": "recurrent", "cell": "gru", "projection": 64, "hidden": 64},  # 99,265
    "bilstm-m": {"family": "recurrent", "cell": "lstm", "projection": 160, "hidden": 160},  # 535,521
    "bilstm-attn-l": {  # 2,187,362
        "family": "recurrent",
        "cell": "lstm",
        "projection": 224,
        "hidden": 224,
        "layers": 2,
        "attention": True,
    },
    "tx-s": {"family": "transformer", "width": 64, "layers": 1, "heads": 4, "ffn": 128},  # 82,753
    "tx-m": {"family": "transformer", "width": 112, "layers": 4, "heads": 4, "ffn": 224},  # 492,577
    "tx-l": {"family": "transformer", "width": 192, "layers": 5, "heads": 6, "ffn": 512},  # 1,879,361
}
# how the paper writes a built-in head where it is not <Family>-<size> (mlp-s: MLP-S; the size, the name's
# last letter)
PAPER_NAMES = {
    "bigru-s": "BiGRU-S",
    "bilstm-m": "BiLSTM-M",
    "bilstm-attn-l": "BiLSTM-Attn-L",
    **{f"tx-{s.lower()}": f"TX-{s}" for s in "SML"},
}
# the references in every matrix (drift.protocol.summary.REFERENCES names them too): input, display
REFERENCE_MODELS: dict[str, tuple[ModelInput, str]] = {
    "baseline-prior": ("auto", "Prior"),
    "baseline-linear": ("auto", "Linear"),
    "baseline-tfidf": ("text", "TF-IDF"),
}
RESERVED_PREFIXES = ("probe-", "baseline-")  # the probes' and the references' names


def _size_args(where: str, family: str, declaration: dict) -> tuple[tuple[str, Any], ...]:
    """Every size argument of a `family` head, the declaration's or the default, checked (one line naming
    `where`.<argument>); lists as tuples."""
    spec = FAMILIES[family]
    for arg in declaration:
        if arg != "family" and arg not in spec.args:
            raise DriftError(
                f"{where}.{arg}: not an argument of a {family} head: "
                f"{close_matches(str(arg), ['family', *spec.args])}"
            )
    args = {}
    for arg, rule in spec.args.items():
        value = declaration.get(arg, rule.default)
        if not rule.accepts(value):
            raise DriftError(f"{where}.{arg}: must be {rule.wants()}; got {value!r}")
        args[arg] = tuple(value) if rule.type == "ints" else value
    _check_together(where, args)
    return tuple(args.items())


def _check_together(where: str, args: dict) -> None:
    """What one argument asks of another: heads dividing the width, a block count per ResNet stage, a ViT's
    MLP at least one wide."""
    if "heads" in args and args["width"] % args["heads"]:
        raise DriftError(f"{where}.heads: {args['heads']} heads do not divide width {args['width']}")
    if "blocks" in args and len(args["blocks"]) != len(args["channels"]):
        raise DriftError(
            f"{where}.blocks: one count per stage of channels ({len(args['channels'])}); "
            f"got {len(args['blocks'])}"
        )
    if "mlp_ratio" in args and int(args["width"] * args["mlp_ratio"]) < 1:
        raise DriftError(f"{where}.mlp_ratio: width x mlp_ratio must be at least 1; got {args['mlp_ratio']}")


def head_info(
    name: str, declaration, display: str | None = None, size: ModelSize = "-", where: str = ""
) -> ModelInfo:
    """The ModelInfo of head `name` declared as `declaration` ({family, ...size arguments}); `where` names it
    in errors (default `models.<name>`)."""
    where = where or f"models.{name}"
    if not isinstance(declaration, dict):
        raise DriftError(
            f"{where}: a head is declared as {{family: ..., <size arguments>}}, e.g. "
            f"{{family: transformer, layers: 2, width: 512, heads: 8, ffn: 1024}}; got {declaration!r}"
        )
    family = declaration.get("family")
    if family is None:
        raise DriftError(f"{where}.family: missing: name one of {', '.join(FAMILIES)}")
    if not isinstance(family, str) or family not in FAMILIES:
        raise DriftError(f"{where}.family: unknown family {family!r}: {close_matches(str(family), FAMILIES)}")
    spec = FAMILIES[family]
    args = _size_args(where, family, declaration)
    return ModelInfo(name, spec.family, size, spec.input, display or name, spec.dropout, args)


def family_of(info: ModelInfo) -> str | None:
    """The FAMILIES key of a head (None for a probe or a reference)."""
    return next((k for k, f in FAMILIES.items() if f.family == info.family and f.input == info.input), None)


MODELS: dict[str, ModelInfo] = {}
for _name, _declaration in BUILT_IN.items():
    _size = SIZES[_name[-1]]
    _display = PAPER_NAMES.get(_name, f"{FAMILIES[_declaration['family']].family}-{_size}")
    MODELS[_name] = head_info(_name, _declaration, _display, _size)
for _enc in ENCODERS.values():
    MODELS[f"probe-{_enc.name}"] = ModelInfo(f"probe-{_enc.name}", "Frozen", "-", "pooled", _enc.display)
for _name, (_input, _display) in REFERENCE_MODELS.items():
    MODELS[_name] = ModelInfo(_name, "Reference", "-", _input, _display)
ALIASES = {"probe-minilm": "probe-minilm-l6"}
DECLARED: dict[str, dict[str, Any]] = {}  # the heads the last load_params declared, as written


def resolve(name: str) -> str:
    """The registry name of `name` (aliases resolved); an unknown name lists the valid ones."""
    name = ALIASES.get(name, name)
    if name not in MODELS:
        raise DriftError(f"unknown model '{name}': {close_matches(name, list(MODELS) + list(ALIASES))}")
    return name


def get_model_info(name: str) -> ModelInfo:
    """The registry entry of a model (aliases resolved); an unknown name lists the valid ones."""
    return MODELS[resolve(name)]


def _check_declared_name(name) -> None:
    check_name(name, "models")
    if name in ALIASES or (name in MODELS and name not in DECLARED):
        raise DriftError(f"models.{name}: {name} is a built-in model already: name the head otherwise")
    if name.startswith(RESERVED_PREFIXES):
        raise DriftError(
            f"models.{name}: names starting with {' or '.join(RESERVED_PREFIXES)} are the probes' and the "
            "references': name the head otherwise"
        )


def declare_models(declarations) -> None:
    """Register the heads params.yaml declares (`models:` name -> {family, ...size arguments}) beside the
    built-in ones, replacing those an earlier call declared; a bad declaration is a one-line DriftError and
    changes nothing. MODELS is updated in place (every module holding it sees the heads): the built-in heads,
    the declared ones, then the probes and references."""
    if not isinstance(declarations, dict):
        raise DriftError(
            "models: maps each head's name to its declaration, e.g. "
            f"`tx-wide: {{family: transformer, layers: 2, width: 512, heads: 8, ffn: 1024}}`; got {declarations!r}"
        )
    for name in declarations:
        _check_declared_name(name)
    heads = {name: head_info(name, declaration) for name, declaration in declarations.items()}
    rest = [(n, i) for n, i in MODELS.items() if n not in BUILT_IN and n not in DECLARED]
    DECLARED.clear()
    DECLARED.update({name: dict(declaration) for name, declaration in declarations.items()})
    built_in = [(n, MODELS[n]) for n in BUILT_IN]
    MODELS.clear()
    MODELS.update([*built_in, *heads.items(), *rest])


_DECLARED_PROBES: set[str] = set()  # the probes of the encoders the last load_params declared


def add_probe(spec) -> None:
    """probe-<encoder> of a declared encoder (drift.core.encoder_registry.EncoderSpec): a linear probe on its
    pooled vector, as every built-in encoder's."""
    name = f"probe-{spec.name}"
    if name in MODELS and name not in _DECLARED_PROBES:
        raise DriftError(
            f"encoders.{spec.name}: its probe would be {name}, a model already: rename the encoder"
        )
    MODELS[name] = ModelInfo(name, "Frozen", "-", "pooled", spec.display)
    _DECLARED_PROBES.add(name)


def declare_probes(specs) -> None:
    """The probes of the declared encoders `specs` registered, those of an earlier call's dropped (load_params
    calls it after declare_encoders and declare_models)."""
    for name in _DECLARED_PROBES:
        MODELS.pop(name, None)
    _DECLARED_PROBES.clear()
    for spec in specs:
        add_probe(spec)


def declared_probes() -> set[str]:
    """The probes add_probe registered (drift/models builds them as LinearProbe, checked apart from the
    table)."""
    return set(_DECLARED_PROBES)

"""The typed schema of params.yaml: every parameter's name, type and default, checked once before any compute.

`load_params` reads params.yaml through `Params`; every stage and CLI command goes through it, and the library
reads the typed sections (`params.train.epochs`), never a raw dict with a default of its own. The defaults
only fill the keys params.yaml leaves out and equal its values where it sets them (tests/core/test_params.py),
except the run's choices in RUN_CHOICES. Top level: datasets (name -> {input}), one section per dataset (kept
as written here and typed by its module's PARAMS: drift.data.datasets.dataset_cfg), split, embed, train,
report, compute. An unknown key or a wrong type is a one-line DriftError naming it and the closest valid
names; names that need a registry with heavy imports (models, families in train.lr) are checked before any
compute too."""

from __future__ import annotations

import datetime as dt
import math
import re
import types
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Union

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetPydanticSchema,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    create_model,
    model_validator,
)
from pydantic.json_schema import JsonDict
from pydantic_core import ErrorDetails, PydanticCustomError, core_schema

from drift.core.dataset_registry import CORPUS_INPUTS, DATASETS, EMBEDDED, dataset_info
from drift.core.encoder_registry import DECLARED, DTYPES, ENCODERS, POOLINGS, declare_encoders
from drift.core.environment import CPU_PATHS
from drift.core.errors import DriftError, check_name, close_matches
from drift.core.model_registry import declare_models, declare_probes
from drift.core.paths import path_collision

LR_DEFAULT = 0.001  # train.lr's `default` when a per-family mapping leaves it out
LR_MAX = 1.0  # above this Adam and AdamW diverge on every model here: a typo (1 for 0.001, say)

# keys params.yaml sets as the shipped run's choices: no default here equals them (tests/core/test_params.py)
RUN_CHOICES = ("datasets", "train.models", "report.saliency", "amazon.categories")


# ---------------------------------------------------------------- types with one-line errors


def _error(what: str, **ctx) -> PydanticCustomError:
    """`<path> <what>, got <value>`; ctx `sub` names a key below the field, `got` the offending value."""
    return PydanticCustomError("drift_value", what, ctx)


def _number(value):
    """A finite number: NaN and infinity (YAML's .nan, .inf) are never a setting, and would reach the results."""
    if isinstance(value, bool):
        raise _error("must be a number")
    if isinstance(value, str):  # PyYAML reads 1e-3 as a string
        try:
            value = float(value)
        except ValueError:
            raise _error("must be a number") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise _error("must be a finite number")
    return value


def _label(value):
    """Slice labels may be written as numbers: 2001 is the slice "2001"."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


_MARKUP = re.compile(r"[<>&|`\x00-\x1f\x7f]")


def _slice_label(value):
    """A slice label as written (`_label`), without what HTML, Markdown or a terminal would read as markup:
    the label is shown as it is everywhere, never rewritten by a writer."""
    value = _label(value)
    if isinstance(value, str) and (bad := _MARKUP.search(value)):
        raise _error(
            "must not hold {char}: slice labels are shown in HTML, Markdown and terminals",
            char=repr(bad.group()),
            got=repr(value),
        )
    return value


def choice(*values: str) -> GetPydanticSchema:
    """A string among `values` (Annotated metadata): anything else is a one-line error listing them; the JSON
    Schema (params.schema.json) lists them as its enum."""

    def check(value):
        if value not in values:
            raise _error("must be one of {choices}", choices=", ".join(values))
        return value

    return GetPydanticSchema(
        lambda source, handler: core_schema.no_info_after_validator_function(check, handler(source)),
        lambda schema, handler: {**handler(schema), "enum": list(values)},
    )


def _known_keys(valid):
    def check(mapping):
        for key in mapping:
            if key not in valid:
                raise PydanticCustomError(
                    "unknown_key", "unknown parameter {key}", {"key": str(key), "valid": sorted(valid)}
                )
        return mapping

    return AfterValidator(check)


def configured_tables(data) -> list[str]:
    """The datasets of a params.yaml document configured as tables: a name of `datasets` that is not one of
    the table's built-in datasets and whose section says `kind: table` (any other name is unknown)."""
    datasets = data.get("datasets") if isinstance(data, dict) else None
    if not isinstance(datasets, dict):
        return []
    return [
        name
        for name in datasets
        if name not in DATASETS and isinstance(data.get(name), dict) and data[name].get("kind") == "table"
    ]


def _known_datasets(mapping, info: ValidationInfo):
    """A key naming a dataset: one of the table's, or a table configured in this params.yaml (load's context)."""
    valid = sorted([*DATASETS, *((info.context or {}).get("tables", ()))])
    for key in mapping:
        if key not in valid:
            raise PydanticCustomError(
                "unknown_key", "unknown parameter {key}", {"key": str(key), "valid": valid}
            )
    return mapping


def _edge(value):
    if isinstance(value, (str, dt.date)) or isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _error("must be a date (1950-01-01) or a year")


def _one_or_many(value):
    """`categories: Software` means one category."""
    return [value] if isinstance(value, str) else value


def _sha256(value):
    if value is None or isinstance(value, str):
        return value or None
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return dict(value)
    raise _error("must be a sha256 string or a mapping file name -> sha256")


def _rate(value, sub: str | None = None) -> float:
    """A learning rate in (0, LR_MAX]: 0 trains nothing, a negative one climbs the loss, above LR_MAX
    diverges."""
    ctx = {"sub": sub} if sub else {}
    rate = float(_number(value))
    if not 0 < rate <= LR_MAX:  # also NaN
        raise _error(f"must be a learning rate in (0, {LR_MAX:g}], e.g. 0.001", got=repr(value), **ctx)
    return rate


def _lr(value):
    """One rate for every model, or {family: rate} with `default` for the other families (LR_DEFAULT if left
    out)."""
    if isinstance(value, dict):
        rates = {}
        for family, rate in value.items():
            if not isinstance(family, str):
                raise _error("must map model families to rates", got=repr(value))
            try:
                rates[family.lower()] = _rate(rate, family)
            except PydanticCustomError as e:  # a ValueError too: first
                if e.message().startswith("must be a learning rate"):
                    raise
                raise _error("must be a number", sub=family, got=repr(rate)) from None
            except (TypeError, ValueError):
                raise _error("must be a number", sub=family, got=repr(rate)) from None
        return {"default": LR_DEFAULT, **rates}
    try:
        return _rate(value)
    except PydanticCustomError as e:
        if e.message().startswith("must be a learning rate"):
            raise
        raise _error(
            "must be a number or a mapping family -> rate, e.g. {default: 0.001, frozen: 0.01}"
        ) from None
    except (TypeError, ValueError):
        raise _error(
            "must be a number or a mapping family -> rate, e.g. {default: 0.001, frozen: 0.01}"
        ) from None


FITTED_REFERENCES = ("baseline-linear", "baseline-tfidf")  # the references with a C (train.reference_C)
REFERENCE_C_HINT = "cv, or a mapping reference -> cv | C, e.g. {baseline-linear: 0.01, baseline-tfidf: 1.0}"


def _reference_C(value):
    """train.reference_C: cv for both fitted references, or {reference: cv | C > 0} (one left out: cv); always
    returned as the full mapping."""
    if value == "cv":
        return dict.fromkeys(FITTED_REFERENCES, "cv")
    if not isinstance(value, dict):
        raise _error(f"must be {REFERENCE_C_HINT}", got=repr(value))
    for name in value:
        if name not in FITTED_REFERENCES:
            raise _error(f"names no reference with a C: use {', '.join(FITTED_REFERENCES)}", sub=str(name))
    chosen = {}
    for name in FITTED_REFERENCES:
        C = value.get(name, "cv")
        try:
            chosen[name] = C if C == "cv" else float(_number(C))
        except (PydanticCustomError, TypeError, ValueError):
            chosen[name] = math.nan
        if not (chosen[name] == "cv" or chosen[name] > 0):  # also NaN
            raise _error("must be cv or a number C > 0, e.g. 0.01", sub=name, got=repr(C))
    return chosen


def _distinct(values):
    """A list whose items differ: `seeds: [0, 0]` would train one seed twice and report it once."""
    seen = set()
    for value in values:
        if value in seen:
            raise _error("lists {twice} twice: each item must differ", twice=repr(value), got=repr(values))
        seen.add(value)
    return values


def _encoder(value):
    if value not in ENCODERS:
        raise PydanticCustomError(
            "drift_unknown",
            "unknown encoder {got}: {hint}",
            {"got": repr(value), "hint": close_matches(value, ENCODERS)},
        )
    return value


Int = int  # strict (the models below): an integer, never true/false or a string
PositiveInt = Annotated[int, Field(ge=1)]
SEED_MAX = 2**32 - 1  # numpy's generators take seeds in [0, 2**32); torch's are wider
Seed = Annotated[int, Field(ge=0, le=SEED_MAX)]
# sane bounds: work follows the settings, and a value beyond these is a typo (1e8 epochs), refused with the
# limit
MAX_EPOCHS = 10_000
MAX_THREADS = 256  # torch threads of one process
MAX_BATCH = 65_536  # rows per batch (train, embed)
MAX_TOKENS = 8_192  # the longest position table of the registry's encoders (ModernBERT)
MAX_ROWS = 10_000_000  # rows of one chunk, sample or test
# counts from 1 up to their bound
EpochCount = Annotated[int, Field(ge=1, le=MAX_EPOCHS)]
ThreadCount = Annotated[int, Field(ge=1, le=MAX_THREADS)]
BatchSize = Annotated[int, Field(ge=1, le=MAX_BATCH)]
TokenCount = Annotated[int, Field(ge=1, le=MAX_TOKENS)]
RowCount = Annotated[int, Field(ge=1, le=MAX_ROWS)]
Float = Annotated[float, BeforeValidator(_number)]
Label = Annotated[str, BeforeValidator(_label, json_schema_input_type=str | int)]
SliceLabel = Annotated[str, BeforeValidator(_slice_label, json_schema_input_type=str | int)]
Edge = Annotated[Any, PlainValidator(_edge)]
LearningRate = Annotated[
    float | dict[str, float], PlainValidator(_lr, json_schema_input_type=float | dict[str, float])
]
ReferenceC = Annotated[
    dict[str, float | str],
    PlainValidator(_reference_C, json_schema_input_type=Literal["cv"] | dict[str, float | Literal["cv"]]),
]
Sha256 = Annotated[
    str | dict[str, str] | None, PlainValidator(_sha256, json_schema_input_type=str | dict[str, str] | None)
]
Names = Annotated[list[str], BeforeValidator(_one_or_many, json_schema_input_type=str | list[str])]
Encoder = Annotated[str, AfterValidator(_encoder)]


def _nullable(annotation) -> bool:
    return typing.get_origin(annotation) in (Union, types.UnionType) and type(None) in typing.get_args(
        annotation
    )


def _empty(annotation):
    """What `key: null` means for a field that cannot be null: an empty list / mapping / section, or nothing."""
    origin = typing.get_origin(annotation) or annotation
    if origin is list:
        return []
    if origin is dict:
        return {}
    if isinstance(origin, type) and issubclass(origin, Section):
        return {}
    return None


class Section(BaseModel):
    """A mapping of params.yaml: only its own keys, each of its type; `key: null` on a list, mapping or
    section means empty (as `or []` did)."""

    model_config = ConfigDict(strict=True, extra="forbid")
    SECTION: ClassVar[str] = ""  # where its keys live in params.yaml, for the messages of `of`

    @classmethod
    def keys(cls) -> list[str]:
        return sorted(f.alias or n for n, f in cls.model_fields.items())

    @model_validator(mode="before")
    @classmethod
    def _known(cls, data):
        if data is None:
            data = {}
        if not isinstance(data, dict):
            return data  # pydantic says: must be a mapping
        valid = cls._valid_keys(data)
        for key in data:
            if key not in valid:
                raise PydanticCustomError(
                    "unknown_key", "unknown parameter {key}", {"key": str(key), "valid": valid}
                )
        data = cls._before(dict(data))
        for name, field in cls.model_fields.items():
            key = field.alias or name
            if key in data and data[key] is None and not _nullable(field.annotation):
                empty = _empty(field.annotation)
                if empty is not None:
                    data[key] = empty
        return data

    @classmethod
    def _valid_keys(cls, data: dict) -> list[str]:
        return cls.keys()

    @classmethod
    def _before(cls, data: dict) -> dict:
        return data

    @classmethod
    def of(cls, value, where: str | None = None):
        """`value` if it is already this section, else the mapping validated (defaults filled), with one-line
        errors: for an entry point that takes a user's mapping. Library functions take the typed section."""
        if isinstance(value, cls):
            return value
        return parse(cls, value, cls.SECTION if where is None else where)


# ---------------------------------------------------------------- datasets


class SliceSpec(Section):
    """{unit: year | half-year | quarter | month | decade, start, end} or {unit: custom, edges, labels};
    drift.protocol.slicing.slice_edges checks the combination (one-line errors naming the valid units)."""

    unit: str | None = None
    start: Int | None = None
    end: Int | None = None
    edges: list[Edge] | None = None
    labels: list[SliceLabel] | None = None

    def spec(self) -> dict:
        return self.model_dump(exclude_none=True)


class SampleSpec(Section):
    n: Annotated[int, Field(ge=0, le=MAX_ROWS)]  # rows kept, stratified by slice and label; 0: all
    seed: Seed | None = None  # null: split.seed
    # proportional: each (slice, label) stratum's share by largest remainders, rows in the id-hash order;
    # cover-uniform: the first row of every stratum, then polars' seeded uniform sample of the rest (the
    # authors' Amazon sample)
    draw: Annotated[str, choice("proportional", "cover-uniform")] = "proportional"


class DatasetParams(Section):
    """The keys every dataset has: drift.data.ingest and drift.protocol.slicing read them."""

    SECTION: ClassVar[str] = "dataset"
    slices: SliceSpec = Field(default_factory=SliceSpec)
    min_samples: PositiveInt = 1  # slices with fewer rows stay empty in every matrix
    strict: bool = False  # fail at the first bad row instead of quarantining it
    cap_per_slice: PositiveInt | None = None  # a sample per slice, stratified by label (split.seed)
    sample: SampleSpec | None = None  # a sample of the whole dataset, stratified by slice and label


def slices_field(**spec):
    """A dataset section's default `slices` (its params class in drift/data/datasets/<module>.py)."""
    return Field(default_factory=lambda: SliceSpec(**spec))


class CorpusParams(DatasetParams):
    """A real corpus: its files at `source`, downloadable by `drift fetch`. `source` is never written in the
    section: drift.data.datasets.dataset_cfg fills it from `datasets.<name>.input` (else the corpus's
    default)."""

    source: str
    url: str | None = None
    sha256: Sha256 = None


# ---------------------------------------------------------------- split, embed, train, report

STRATA = ("slice", "label")  # split.stratify: what the train/test split of a slice is stratified by


class SplitParams(Section):
    SECTION: ClassVar[str] = "split"
    seed: Seed = 0
    test_fraction: Annotated[Float, Field(gt=0, lt=1)] = 0.3
    stratify: Annotated[list[Annotated[str, choice(*STRATA)]], Field(min_length=1)] = [
        "slice",
        "label",
    ]  # [slice]: by time alone
    # id-hash: each stratum's rows in an order hashed from id and seed, n * f test rows rounded half up
    # (stable under appends); per-slice: the authors' draw (drift.protocol.slicing.per_slice_split), stratify
    # must hold slice
    draw: Annotated[str, choice("id-hash", "per-slice")] = "id-hash"

    @model_validator(mode="after")
    def _per_slice(self):
        if self.draw == "per-slice" and "slice" not in self.stratify:
            raise DriftError(
                f"split.draw per-slice splits each slice: split.stratify must list slice, got {self.stratify}"
            )
        return self


BACKENDS = ("torch", "onnx", "openvino")  # embed.backend: the text encoders' runtime


class EmbedParams(Section):
    SECTION: ClassVar[str] = "embed"
    text_encoder: Encoder = "minilm-l6"  # token states feed the text heads; the pooled vector feeds its probe
    encoders: Annotated[
        list[Encoder], AfterValidator(_distinct)
    ] = []  # more frozen encoders whose pooled vectors feed probe-<encoder>
    weights: Annotated[dict[str, str], _known_keys(ENCODERS)] = {}  # encoder -> local weights file or folder
    max_length: TokenCount = 64  # tokens per text; at most the text encoders' positions
    pooling: Annotated[str, choice(*POOLINGS)] | None = "mean"  # null: each encoder's own
    batch_size: BatchSize = 32
    dtype: Annotated[str, choice(*DTYPES)] = "float32"
    # the encoders' forward pass on a GPU: null computes under autocast in `dtype` (float32: no autocast), a
    # dtype computes in it whatever `dtype` stores (float32: the authors' runs, float16 only when stored)
    compute_dtype: Annotated[str, choice(*DTYPES)] | None = None
    # the stored dtype of the pooled vectors the probes read (the token states are stored in `dtype`):
    # float32, or float16 as the authors' text runs cache them
    pooled_dtype: Annotated[str, choice("float32", "float16")] = "float32"
    cache_dir: str | None = None  # null: $DRIFT_CACHE_DIR or ~/.cache/drift
    device: str | None = None  # null: cuda when available, else cpu
    chunk_rows: RowCount = 512  # rows per commit to the embedding store: the most a killed run can lose
    # the text encoders' runtime: torch, or ONNX Runtime / OpenVINO on the CPU (drift/encoders/backends.py,
    # the `backends` extra), exported once per encoder into <cache_dir>/exports; the vision encoders run in
    # torch
    backend: Annotated[str, choice(*BACKENDS)] = "torch"
    # int8: the backend's model with int8 weights, activations quantised at run time (onnx, openvino only)
    quantize: Annotated[str, choice("int8")] | None = None

    # a sentence-transformers checkpoint's Normalize module applied to its pooled vector (true), or the bare
    # model's pooled vector as it is (false: the authors' masked mean)
    normalize: bool = True
    # what the frozen vision encoders read: pixels / 255 normalised by each encoder's mean and std
    # (normalised), or the 0-255 values upsampled and not normalised (raw: the authors' runs)
    image_input: Annotated[str, choice("normalised", "raw")] = "normalised"
    # vision encoder -> timm global_pool its pooled vector is taken with (token: the CLS token); left out:
    # timm's default
    image_pooling: Annotated[dict[str, Annotated[str, choice("token", "avg")]], _known_keys(ENCODERS)] = {}
    # vision encoder -> the activation its blocks compute (quick_gelu: OpenAI's CLIP, gelu_tanh: SigLIP, as
    # their Hugging Face models); left out: timm's own (exact GELU)
    image_activation: Annotated[
        dict[str, Annotated[str, choice("gelu", "gelu_tanh", "quick_gelu")]], _known_keys(ENCODERS)
    ] = {}
    # vision encoder -> the library its network and weights come from: timm (left out), or torchvision (the
    # registry's torchvision weights, e.g. ConvNeXt-S's IMAGENET1K_V1, as the authors' runs load them)
    image_source: Annotated[
        dict[str, Annotated[str, choice("timm", "torchvision")]], _known_keys(ENCODERS)
    ] = {}
    # vision encoder -> how its position table meets the 224 grid: timm's resampling at load (left out), or
    # dinov2-hub: as DINOv2's torch.hub model interpolates it each forward pass (the authors' DINOv2-S)
    image_pos_embed: Annotated[
        dict[str, Annotated[str, choice("timm", "dinov2-hub")]], _known_keys(ENCODERS)
    ] = {}

    @model_validator(mode="after")
    def _image_source(self):
        served = [name for name, spec in ENCODERS.items() if spec.torchvision]
        for name, source in self.image_source.items():
            if source == "torchvision" and not ENCODERS[name].torchvision:
                raise DriftError(
                    f"embed.image_source.{name}: torchvision serves no weights of {name} here; "
                    f"it serves {', '.join(served)} (others: timm)"
                )
        dinov2 = [name for name, spec in ENCODERS.items() if "dinov2" in spec.hub_id]
        for name, how in self.image_pos_embed.items():
            if how == "dinov2-hub" and (name not in dinov2 or self.image_source.get(name, "timm") != "timm"):
                raise DriftError(
                    f"embed.image_pos_embed.{name}: dinov2-hub is DINOv2's torch.hub resampling, for the timm "
                    f"DINOv2 encoders {', '.join(dinov2)} (others: timm)"
                )
        return self

    def dataset_encoders(self, modality: str) -> list[str]:
        """The encoders the embed stage runs for a dataset of `modality`: the text encoder (text datasets),
        then every encoder of `encoders` of that modality, each once."""
        names = [self.text_encoder] if modality == "text" else []
        names += [e for e in self.encoders if ENCODERS[e].modality == modality]
        return list(dict.fromkeys(names))

    @model_validator(mode="after")
    def _positions(self):
        for name in dict.fromkeys([self.text_encoder, *self.encoders]):
            spec = ENCODERS[name]
            if spec.modality == "text" and self.max_length > spec.positions:
                raise PydanticCustomError(
                    "drift_plain",
                    f"embed.max_length is {self.max_length}, above the {spec.positions} positions of "
                    f"encoder {name}: set it to at most {spec.positions}",
                )
        return self

    @model_validator(mode="after")
    def _quantize(self):
        if self.quantize is not None and self.backend == "torch":
            raise PydanticCustomError(
                "drift_plain",
                f"embed.quantize {self.quantize} needs embed.backend onnx or openvino (torch runs float32): "
                "set one of them, or embed.quantize to null",
            )
        return self


# what a TrainParams field decides (its Field's json_schema_extra): CHECKPOINT, a checkpoint's bytes (a field
# of ModelTraining, so of the checkpoint key, and a DVC param of the train stage); ROSTER, which checkpoints
# exist (a DVC param; the key holds the model and seed themselves). A field deciding neither says why:
# {"decides": None, "why": ...}; tests/core/test_params.py fails on a field without either.
CHECKPOINT: JsonDict = {"decides": "checkpoint"}
ROSTER: JsonDict = {"decides": "roster"}


class TrainParams(Section):
    SECTION: ClassVar[str] = "train"
    epochs: EpochCount = Field(5, json_schema_extra=CHECKPOINT)
    seeds: Annotated[list[Seed], Field(min_length=1), AfterValidator(_distinct)] = Field(
        [0], json_schema_extra=ROSTER
    )
    batch_size: BatchSize = Field(64, json_schema_extra=CHECKPOINT)
    weight_decay: Annotated[Float, Field(ge=0)] = Field(
        0.01, json_schema_extra=CHECKPOINT
    )  # AdamW (text heads and probes)
    lr: LearningRate = Field(
        default_factory=lambda: {"default": LR_DEFAULT, "frozen": 0.01}, json_schema_extra=CHECKPOINT
    )
    # fixed torch threads: bit-identical results
    threads: ThreadCount = Field(1, json_schema_extra=CHECKPOINT)
    # batched: drift/train/engine.py, equal to float tolerance; auto: per family and device kind
    # (train/rates.py)
    engine: Annotated[str, choice("solo", "batched", "auto")] = Field("solo", json_schema_extra=CHECKPOINT)
    # token rows are cut here; null: embed.max_length
    max_tokens: TokenCount | None = Field(None, json_schema_extra=CHECKPOINT)
    # p of the models with dropout layers (ViT, text heads); 0: off
    dropout: Annotated[Float, Field(ge=0, lt=1)] = Field(0.0, json_schema_extra=CHECKPOINT)
    # each model's gradient norm clipped to this; null: none
    grad_clip: Annotated[Float, Field(gt=0)] | None = Field(None, json_schema_extra=CHECKPOINT)
    # regression heads train on targets standardised per cutoff (Standardised)
    standardise_targets: bool = Field(True, json_schema_extra=CHECKPOINT)
    # image models read pixels standardised per channel (PixelStandardised)
    standardise_pixels: bool = Field(True, json_schema_extra=CHECKPOINT)
    # each epoch's batches: bucketed (token rows of similar length share a batch; others a plain shuffle,
    # numpy's generator) or uniform (a shuffling torch DataLoader's uniform permutation, seeded seed + epoch:
    # the authors')
    batch_order: Annotated[str, choice("bucketed", "uniform")] = Field(
        "bucketed", json_schema_extra=CHECKPOINT
    )
    # where a uniform shuffle's draws come from: a generator seeded seed + epoch each epoch (seed-epoch), or
    # the global torch generator's stream right after the model's init, two draws an epoch as a DataLoader
    # without a generator of its own takes them (after-init: the authors' runs)
    shuffle_draws: Annotated[str, choice("seed-epoch", "after-init")] = Field(
        "seed-epoch", json_schema_extra=CHECKPOINT
    )
    # the loss's class / rating weights: from each cutoff's own training rows (cutoff), or once from the whole
    # training split, every slice (split: the authors' runs)
    loss_weights: Annotated[str, choice("cutoff", "split")] = Field("cutoff", json_schema_extra=CHECKPOINT)
    # image models trained from scratch read pixels / 255 in [0, 1] (unit), or the stored 0-255 values (raw:
    # PixelScaled)
    pixel_scale: Annotated[str, choice("unit", "raw")] = Field("unit", json_schema_extra=CHECKPOINT)
    # f_k's seed: offset (seed * 100003 + k) or hash (the first 4 bytes of sha256 of "seed:model:slice", the
    # slice as a year or a half-year counted from 2000: the authors' per-slice seed)
    slice_seed: Annotated[str, choice("offset", "hash")] = Field("offset", json_schema_extra=CHECKPOINT)
    # how the models are built (drift.models.create_model): ours, or authors (the CNNs' convolution biases,
    # the ViT and Transformer heads' layers copied from one, the TextCNNs' max over windows of rows padded to
    # max_tokens)
    modules: Annotated[str, choice("ours", "authors")] = Field("ours", json_schema_extra=CHECKPOINT)
    # the order of a cutoff's training rows before each epoch's shuffle: time (slice, time, id), or split (the
    # split's own order of each slice's rows, stably re-sorted by time: the authors')
    row_order: Annotated[str, choice("time", "split")] = Field("time", json_schema_extra=CHECKPOINT)
    # the C (inverse L2 strength; ridge: alpha = 1 / C) of baseline-linear and baseline-tfidf: cv, chosen per
    # cutoff by stratified 5-fold CV on its training rows (drift/models/reference.py C_GRID), or a fixed
    # number per reference ({baseline-linear: 0.01, baseline-tfidf: 1.0}: the paper presets, the values before
    # cv)
    reference_C: ReferenceC = Field(default_factory=lambda: _reference_C("cv"), json_schema_extra=CHECKPOINT)
    # references in every matrix; baseline-tfidf reads raw text, so an image dataset's roster leaves it out
    baselines: list[str] = Field(
        ["baseline-prior", "baseline-linear", "baseline-tfidf"], json_schema_extra=ROSTER
    )
    models: Annotated[dict[str, list[str]], AfterValidator(_known_datasets)] = Field(
        {}, json_schema_extra=ROSTER
    )  # dataset -> model names

    @model_validator(mode="after")
    def _shuffle_draws(self):
        if self.shuffle_draws == "after-init" and self.batch_order != "uniform":
            raise DriftError(
                f"train.shuffle_draws after-init draws a uniform shuffle's seeds, and train.batch_order is "
                f"{self.batch_order}: set train.batch_order to uniform, or train.shuffle_draws to seed-epoch"
            )
        return self

    @classmethod
    def deciding(cls, what: dict) -> list[str]:
        """The fields that decide `what` (CHECKPOINT or ROSTER), in the schema's order."""
        return [
            n
            for n, f in cls.model_fields.items()
            if isinstance(f.json_schema_extra, dict) and f.json_schema_extra.get("decides") == what["decides"]
        ]

    def lr_for(self, family: str) -> float:
        """The learning rate of a model of `family`: train.lr, or its family's entry of a per-family mapping
        (else `default`, always there)."""
        if isinstance(self.lr, dict):
            return float(self.lr.get(family.lower(), self.lr["default"]))
        return float(self.lr)


class ModelTraining(BaseModel):
    """One model's training, resolved from TrainParams (model_training): every CHECKPOINT field as it acts on
    this model, plus its optimiser. What the checkpoint key hashes and what the optimiser and loop read."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    epochs: int
    batch_size: int
    weight_decay: float
    lr: float
    optimizer: Literal["adam", "adamw"]  # Adam for an image dataset's models, AdamW for a text one's
    threads: int
    engine: Literal["solo", "batched"]
    max_tokens: int  # train.max_tokens, else embed.max_length
    dropout: float  # 0 for a model without dropout layers
    grad_clip: float | None
    standardise_targets: bool
    standardise_pixels: bool
    batch_order: Literal["bucketed", "uniform"]
    shuffle_draws: Literal["seed-epoch", "after-init"]
    loss_weights: Literal["cutoff", "split"]
    pixel_scale: Literal["unit", "raw"]  # unit on a text dataset: no pixels to scale
    slice_seed: Literal["offset", "hash"]
    modules: Literal["ours", "authors"]
    row_order: Literal["time", "split"]
    # train.reference_C on a reference (family Reference), None on every other model
    reference_C: dict[str, float | str] | None


def model_training(
    train: TrainParams,
    family: str,
    modality: str,
    has_dropout: bool,
    max_tokens: int,
    engine: str | None = None,
) -> ModelTraining:
    """The training of one model of `family` (with dropout layers or not) on a `modality` dataset whose token
    rows are cut at `max_tokens`; `engine` is the one train.engine auto chose for it (else train.engine)."""
    engine = engine or train.engine
    if engine not in ("solo", "batched"):
        raise DriftError(f"train.engine {engine} is resolved per model before training: solo or batched")
    return ModelTraining(
        epochs=train.epochs,
        batch_size=train.batch_size,
        weight_decay=float(train.weight_decay),
        lr=train.lr_for(family),
        optimizer="adam" if modality == "image" else "adamw",
        threads=train.threads,
        engine=engine,
        max_tokens=max_tokens,
        dropout=float(train.dropout) if has_dropout else 0.0,
        grad_clip=None if train.grad_clip is None else float(train.grad_clip),
        standardise_targets=train.standardise_targets,
        standardise_pixels=train.standardise_pixels,
        batch_order=train.batch_order,
        shuffle_draws=train.shuffle_draws,
        loss_weights=train.loss_weights,
        pixel_scale=train.pixel_scale if modality == "image" else "unit",
        slice_seed=train.slice_seed,
        modules=train.modules,
        row_order=train.row_order,
        reference_C=dict(train.reference_C) if family == "Reference" else None,
    )


EXECUTORS = ("local", "ray")  # compute.executor


class ComputeParams(Section):
    """Where train, evaluate and embed run their heavy part (drift/core/executor.py): the same results either
    way; and on which CPU code path (cpu_path), which may change them."""

    SECTION: ClassVar[str] = "compute"
    executor: Annotated[str, choice(*EXECUTORS)] = "local"  # local: in the stage's process; ray: Ray tasks
    address: str | None = (
        None  # the Ray cluster to join; null: $RAY_ADDRESS, else a local cluster of this machine
    )
    cpus_per_task: Annotated[Float, Field(gt=0)] = (
        1.0  # CPUs each training / evaluation task and embed actor holds
    )
    gpus_per_task: Annotated[Float, Field(ge=0)] = (
        0.0  # GPUs each holds (fractional: 0.25 packs four on a GPU)
    )
    embed_actors: ThreadCount = 1  # encoders loaded at once by the embed stage, each fed chunks of rows
    # portable: the same bits on every x86-64 CPU with AVX2; native: the BLAS / ATen / numpy code paths the
    # machine's libraries pick, faster, recorded in every key and metric (drift/core/environment.py)
    cpu_path: Annotated[str, choice(*CPU_PATHS)] = "portable"


class SaliencyGrid(Section):
    SECTION: ClassVar[str] = "report.saliency.<dataset>"
    models: list[str] | None = None  # null: every image model of the roster
    cells: list[list[SliceLabel]] | None = (
        None  # [trained through, evaluated on] slice labels; null: a spread
    )
    n: RowCount = 64  # portraits averaged per map


class PolicyParams(Section):
    """Retraining policies replayed from the drift matrices (drift/analysis/policy.py): their parameter lists."""

    SECTION: ClassVar[str] = "report.policy"
    every: list[PositiveInt] = [2, 3, 4]  # retrain every n periods, one policy per n
    shift_thresholds: list[Float] | None = (
        None  # retrain when the coming period's shift exceeds one; null: its quartiles
    )
    drop_thresholds: list[Float] | None = (
        None  # retrain when the estimated score drops by more; null: its quartiles
    )
    seconds_per_row: Annotated[Float, Field(gt=0)] | None = (
        None  # turns the cost (training rows x epochs) into seconds
    )


class ShiftParams(Section):
    """Drift without labels (drift/analysis/shift.py, drift/analysis/novelty.py): the shift matrix's test and
    the novel rows."""

    SECTION: ClassVar[str] = "report.shift"
    n: Annotated[int, Field(ge=2, le=MAX_ROWS)] = 200  # rows per side of each cell's two-sample test
    permutations: Annotated[int, Field(ge=0, le=MAX_ROWS)] = (
        200  # permutation test per cell; 0: no p or q values
    )
    alpha: Annotated[Float, Field(gt=0, lt=1)] = 0.05  # Benjamini-Hochberg level over the K x K cells
    seed: Seed = 0
    novelty_quantile: Annotated[Float, Field(gt=0, lt=1)] = (
        0.95  # novel: farther than this quantile of held-out rows
    )
    max_rows: RowCount = 500  # query rows per period and per calibration set
    max_index_rows: RowCount = 100_000  # training rows searched for nearest neighbours
    top: RowCount = 5  # most novel examples shown per period


class EvaluateParams(Section):
    """How a drift matrix's cells are scored (drift/protocol/matrix.py, drift/protocol/metrics.py)."""

    SECTION: ClassVar[str] = "evaluate"
    # a cell whose rows are none (a slice with no test rows, on and after its cutoff): empty (null in every
    # matrix), or zero (0.0, the authors' accuracy of an empty set, averaged like any cell)
    empty_cell: Annotated[str, choice("empty", "zero")] = "empty"
    # what macro AUC ranks: the logits (float64), or float32 sigmoids of them as the authors' (ties near 1)
    auc_scores: Annotated[str, choice("logits", "sigmoid32")] = "logits"


class ReportParams(Section):
    SECTION: ClassVar[str] = "report"
    saliency: Annotated[dict[str, SaliencyGrid], AfterValidator(_known_datasets)] = {}
    policy: PolicyParams = Field(default_factory=PolicyParams)
    shift: ShiftParams = Field(default_factory=ShiftParams)


class DatasetEntry(Section):
    """One dataset of the run (params.yaml `datasets.<name>`): its raw input, the one place its files are
    named. DVC tracks it (new or changed files re-run the dataset's ingest) and the reader reads it (a
    corpus's file or folder, a table's file or folder); an embedded dataset's corpus comes from a pinned
    package, so its input is requirements.lock. The reader is the dataset's own
    (drift/core/dataset_registry.py), never written here."""

    SECTION: ClassVar[str] = "datasets.<name>"
    input: Annotated[str, Field(min_length=1)]


EMBEDDED_INPUT = "requirements.lock"  # what an embedded dataset's ingest depends on: the pinned packages


def dataset_entry_form(name: str, entry=None) -> str:
    """The current form of `datasets.<name>`, for the one-line errors that show it."""
    if name in EMBEDDED:  # its corpus is a pinned package's, whatever an earlier form named
        return f"`datasets.{name}: {{input: {EMBEDDED_INPUT}}}`"
    path = entry.get("input") if isinstance(entry, dict) else entry if isinstance(entry, str) else None
    return f"`datasets.{name}: {{input: {path or CORPUS_INPUTS.get(name, '<file or folder>')}}}`"


def _earlier_forms(data: dict) -> None:
    """params.yaml written in an earlier form: one line each, showing the current one. A dataset's files are
    named once, as `datasets.<name>.input`; its reader is the project's, not a path to type."""
    for name, entry in data["datasets"].items():
        if entry is None or isinstance(entry, str):
            raise PydanticCustomError(
                "drift_plain",
                f"params.yaml `datasets.{name}: {entry}` is an earlier form: write {dataset_entry_form(name, entry)}",
            )
        if isinstance(entry, dict) and "reader" in entry:
            rest = {k: v for k, v in entry.items() if k != "reader"}
            raise PydanticCustomError(
                "drift_plain",
                f"params.yaml `datasets.{name}.reader` is an earlier form: a dataset's reader comes with it "
                f"(built in, or `kind: table` in its section); write {dataset_entry_form(name, rest)}",
            )
        if name not in DATASETS and name not in data["tables"] and isinstance(data.get(name), dict):
            raise PydanticCustomError(
                "drift_plain",
                f"`{name}` is not a built-in dataset ({', '.join(DATASETS)}): a table of your own says "
                f"`kind: table` in its section `{name}:` (`drift init` writes it)",
            )
        section = data.get(name) if name in DATASETS else data["tables"].get(name)
        if isinstance(section, dict) and "source" in section:
            where = entry.get("input") if isinstance(entry, dict) else None
            raise PydanticCustomError(
                "drift_plain",
                f"params.yaml `{name}.source` is an earlier form: a dataset's files are named once, in "
                f"`datasets.{name}.input`; drop {name}.source and write "
                f"{dataset_entry_form(name, {'input': where or section['source']})}",
            )


def _check_names(data: dict) -> None:
    """Every dataset and model name params.yaml writes is an identifier (drift.core.errors.check_name): names
    become file names and dvc.yaml command arguments; a dataset name has no '.' (DVC reads `params: [a.b]` as
    a nested key) and no two datasets' paths clash (drift.core.paths.path_collision). A one-line DriftError
    names the field."""
    for name in data["datasets"]:
        check_name(name, "datasets", dots=False)
        if name in _Params.keys():
            raise PydanticCustomError(
                "drift_plain", f"datasets: {name!r} is a section of params.yaml itself: rename the dataset"
            )
    clash = path_collision(data["datasets"])
    if clash:
        raise PydanticCustomError("drift_plain", f"datasets: {clash}: rename one of them")
    train = data["train"] if isinstance(data.get("train"), dict) else {}
    models = train.get("models")
    for dataset, names in models.items() if isinstance(models, dict) else ():
        check_name(dataset, "train.models", dots=False)
        for model in names if isinstance(names, list) else [names] if isinstance(names, str) else ():
            check_name(model, f"train.models.{dataset}")
    baselines = train.get("baselines")
    for model in baselines if isinstance(baselines, list) else ():
        check_name(model, "train.baselines")
    report = data["report"] if isinstance(data.get("report"), dict) else {}
    saliency = report.get("saliency")
    for dataset, grid in saliency.items() if isinstance(saliency, dict) else ():
        check_name(dataset, "report.saliency", dots=False)
        chosen = grid.get("models") if isinstance(grid, dict) else None
        for model in chosen if isinstance(chosen, list) else ():
            check_name(model, f"report.saliency.{dataset}.models")


class _Params(Section):
    datasets: Annotated[dict[str, DatasetEntry], AfterValidator(_known_datasets)]
    split: SplitParams = Field(default_factory=SplitParams)
    embed: EmbedParams = Field(default_factory=EmbedParams)
    train: TrainParams = Field(default_factory=TrainParams)
    evaluate: EvaluateParams = Field(default_factory=EvaluateParams)
    report: ReportParams = Field(default_factory=ReportParams)
    compute: ComputeParams = Field(default_factory=ComputeParams)
    # frozen encoders and heads of the user's own, name -> declaration, in the form of the built-in ones
    # (drift.core.encoder_registry.declare_encoders, drift.core.model_registry.declare_models check and
    # register them)
    encoders: dict[str, dict[str, Any]] = {}
    models: dict[str, dict[str, Any]] = {}
    # the sections of the datasets configured as tables (configured_tables), as written; not a params.yaml key
    tables: dict[str, dict[str, Any]] = {}
    # dataset -> the train / embed settings its own section overrides (OVERRIDABLE); not a params.yaml key
    overrides: dict[str, dict[str, Any]] = {}

    @classmethod
    def _valid_keys(cls, data: dict) -> list[str]:
        datasets = data["datasets"] if isinstance(data.get("datasets"), dict) else {}
        # a section for every name of `datasets`: a table's, or one _earlier_forms names the fix of
        return [k for k in cls.keys() if k not in ("tables", "overrides")] + [
            n for n in datasets if n not in DATASETS
        ]

    @classmethod
    def _before(cls, data: dict) -> dict:
        tables = configured_tables(data)
        data["tables"] = {name: data.pop(name, None) or {} for name in tables}
        datasets = data.get("datasets")
        if not isinstance(datasets, dict):
            raise PydanticCustomError(
                "drift_plain",
                "params.yaml `datasets` must map each dataset to its raw input, e.g. "
                f"`amazon: {{input: {CORPUS_INPUTS['amazon']}}}`",
            )
        _check_names(data)
        _earlier_forms(data)
        # before `embed` and the rosters are checked against them; a declared encoder's files are looked for
        # in embed.weights.<name> first
        embed = data["embed"] if isinstance(data.get("embed"), dict) else {}
        weights = embed["weights"] if isinstance(embed.get("weights"), dict) else {}
        declare_encoders(data.get("encoders") or {}, weights)
        declare_models(data.get("models") or {})
        declare_probes(DECLARED.values())
        return data

    @property
    def max_tokens(self) -> int:
        """The token cap of the text heads (the token rows they read): train.max_tokens,
        else embed.max_length, the tokens the encoder keeps."""
        return self.train.max_tokens or self.embed.max_length

    def section(self, name: str) -> dict:
        """Dataset `name`'s section of params.yaml as written (drift.data.datasets.dataset_cfg types it)."""
        if name in self.tables:
            return self.tables[name]
        dataset_info(name)
        return getattr(self, name.replace("-", "_"))

    def info(self, name: str):
        """Dataset `name`'s row of the dataset table: a built-in one's, or a configured table's from its
        section."""
        return dataset_info(name, self.tables.get(name))


# params.yaml: the sections above, and one mapping per dataset of the table (drift/core/dataset_registry.py),
# kept as written: its params class lives with its reader (drift/data/datasets/<module>.py), which types and
# checks it
_DATASET_SECTIONS: dict[str, Any] = {
    name.replace("-", "_"): (dict[str, Any], Field(default_factory=dict, alias=name)) for name in DATASETS
}
if TYPE_CHECKING:
    # mypy cannot follow a class made by a call: it types Params as the class of the sections above (code
    # reads a dataset's section through `section`, never as an attribute)
    Params = _Params
else:
    Params = create_model("Params", __base__=_Params, __doc__="params.yaml.", **_DATASET_SECTIONS)


# ---------------------------------------------------------------- one-line errors

WHAT = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}
BOUNDS = {
    "greater_than_equal": ("ge", "at least"),
    "greater_than": ("gt", "greater than"),
    "less_than": ("lt", "less than"),
    "less_than_equal": ("le", "at most"),
}


def _path(loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out


def message(error: ErrorDetails, where: str = "") -> str:
    """One pydantic error as one line of plain words, its location written as params.yaml's dotted keys."""
    loc = ((where,) if where else ()) + tuple(error["loc"])
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == "drift_plain":
        return error["msg"]
    if kind == "unknown_key":
        section = _path(loc)
        key = ctx["key"]
        return (
            f"unknown parameter {f'{section}.{key}' if section else key}: "
            f"{close_matches(key, ctx['valid'], prefix=f'{section}.' if section else '')}"
        )
    path = _path(loc + ((ctx["sub"],) if "sub" in ctx else ()))
    got = ctx.get("got", repr(error.get("input")))
    if kind == "drift_unknown":
        return f"{path}: {error['msg']}"
    if kind == "drift_value":
        return f"{path} {error['msg']}, got {got}"
    if kind == "missing":
        return f"{path} is missing"
    if kind in WHAT:
        return f"{path} must be {WHAT[kind]}, got {got}"
    if kind in BOUNDS:
        key, words = BOUNDS[kind]
        return f"{path} must be {words} {ctx[key]}, got {got}"
    if kind == "too_short":
        n = ctx.get("min_length", 1)
        return f"{path} must list at least {n} item{'s' if n != 1 else ''}, got {got}"
    return f"{path}: {error['msg']}, got {got}"


def parse(model: type[Section], data: Any, where: str = "", context: dict | None = None):
    """`data` validated as `model`, or a one-line DriftError (every problem, joined by '; ')."""
    try:
        return model.model_validate({} if data is None else data, context=context)
    except ValidationError as e:
        raise DriftError("; ".join(dict.fromkeys(message(err, where) for err in e.errors()))) from None


def plain(data: Any) -> Any:
    """A YAML document (ruamel's commented maps and sequences included) as plain dicts and lists."""
    if isinstance(data, dict):
        return {k: plain(v) for k, v in data.items()}
    if isinstance(data, list):
        return [plain(v) for v in data]
    return data


# the sections a dataset's own section may override for that dataset alone (`fastapi: {train: {epochs: 20}}`)
OVERRIDABLE = ("train", "embed")


def _merged(base: Any, override: Any) -> Any:
    """`override` laid over `base`: mappings merge key by key, anything else is replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        return {**base, **{k: _merged(base.get(k), v) for k, v in override.items()}}
    return override


def _split_overrides(data: dict) -> tuple[dict, dict[str, dict]]:
    """The document without the `train:` / `embed:` keys of its datasets' sections, and those keys per
    dataset."""
    overrides: dict[str, dict] = {}
    datasets = data.get("datasets")
    for name in datasets if isinstance(datasets, dict) else {}:
        section = data.get(name)
        if isinstance(section, dict) and any(key in section for key in OVERRIDABLE):
            overrides[name] = {key: section[key] for key in OVERRIDABLE if key in section}
            data = {**data, name: {k: v for k, v in section.items() if k not in OVERRIDABLE}}
    return data, overrides


def _document(data: dict, dataset: str | None = None) -> Params:
    """The document typed; with `dataset`, its `train` and `embed` as that dataset's section overrides them.
    Every dataset's overrides are checked either way (one line naming the dataset)."""
    data, overrides = _split_overrides(plain(data))
    context = {"tables": configured_tables(data)}
    params = parse(Params, data, context=context)
    for name, override in overrides.items():
        for key, value in override.items():
            if not isinstance(value, dict):
                raise DriftError(
                    f"{name}.{key} must be a mapping of {key} settings for {name}, got {value!r}"
                )
        merged = {**data, **{key: _merged(data.get(key) or {}, value) for key, value in override.items()}}
        try:
            typed = parse(Params, merged, context=context)
        except DriftError as e:
            raise DriftError(f"in {name}.{'/'.join(override)}, {name}'s own settings: {e}") from None
        if name == dataset:
            params = typed
    params.overrides = overrides
    return params


# ---------------------------------------------------------------- reading params.yaml


class _UniqueKeys(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that names a key twice (PyYAML keeps the last silently) and
    any alias (`*name`, `<<: *name`): aliases of aliases expand a small file into gigabytes, and params.yaml
    needs none. `file` is the file the messages name."""

    file = "params.yaml"

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise DriftError(
                f"{self.file} line {event.start_mark.line + 1} uses the YAML alias *{event.anchor}: aliases are "
                "refused (nested ones expand a small file into gigabytes); write the values out"
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen: dict[object, int] = {}  # each key's line
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int)) and key in seen:
                raise DriftError(
                    f"{self.file} names {key!r} twice in one mapping (lines {seen[key]} and "
                    f"{key_node.start_mark.line + 1}): keep one"
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def load_params(source: str | Path | dict = "params.yaml", dataset: str | None = None) -> Params:
    """params.yaml typed and checked: the one way the stages, the CLI, plan and rehearse read the
    configuration. `source` is the file's path or a document already read (a preset merged in memory, an edit
    about to be written). With `dataset`, `train` and `embed` are that dataset's: the global sections with its
    section's own `train:` / `embed:` laid over them. An unknown key or a wrong type is a one-line DriftError
    here, before any compute; the dataset sections stay as written until drift.data.datasets.dataset_cfg types
    one."""
    if isinstance(source, dict):
        return _document(source, dataset)
    path = Path(source)
    if not path.exists():
        raise DriftError(f"no {path} here: run from the repository root (where dvc.yaml is)")
    return _document(read_yaml(path) or {}, dataset)


def read_yaml(path: str | Path, text: str | None = None):
    """A YAML file of the user's (params.yaml, a preset) as plain data, read the one way: PyYAML's safe
    loader, refusing a key named twice in one mapping and any alias, with one-line errors naming the file.
    `text`: the file's text already read."""
    path = Path(path)
    loader = type("Loader", (_UniqueKeys,), {"file": str(path)})
    try:
        return yaml.load(path.read_text() if text is None else text, Loader=loader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as e:
        raise DriftError(f"{path} is not valid YAML: {' '.join(str(e).split())}") from None


TEXT_REFERENCES = ("baseline-tfidf",)  # references that read raw text: no image dataset gets them


def roster(train: TrainParams, name: str, modality: str | None = None) -> list[str]:
    """The models a dataset's run trains and reports: `train.models.<name>`, then the references
    (`train.baselines`, all three by default) that give every matrix a floor; on an image dataset (`modality`
    "image") the text-only references are left out."""
    models = list(train.models.get(name) or [])  # a dataset without models: drift.data.validate says so
    return models + [
        b for b in train.baselines if b not in models and not (modality == "image" and b in TEXT_REFERENCES)
    ]

"""Frozen encoders by registry name: the study's seventeen (paper Tables 4, 12, 20) and those params.yaml
declares (`encoders:`), both declarations of one form that one function turns into an EncoderSpec
(`make_spec`).

A declaration names its `library` (LIBRARIES) and its `id` (a Hugging Face or timm id, or a local folder or
file), and may set `revision`, `pooling`, `normalize`, `prefix` and `allow_remote_code` (FIELDS). What the
model is (its width, its position table, its image size) is read from its own config (config.json, a
sentence-transformers modules.json and Pooling config) with json alone, in a local folder or the Hugging Face
cache: never typed by the user, never downloaded, no torch. The built-ins ship those facts (BUILT_IN: the
registry knows them before their weights are fetched). ENCODERS is the built-ins plus the declarations of the
last load_params, updated in place, so every module holding it sees them. The encoders stay frozen; their
weights come from a local folder or the Hugging Face cache, never from the network at run time."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from drift.core.artefact import Modality
from drift.core.errors import DriftError, check_name, close_matches

# embed.pooling: token mean, first token, the model's own pooler output
TextPooling = Literal["mean", "cls", "pooler"]
POOLINGS: tuple[TextPooling, ...] = ("mean", "cls", "pooler")
DTYPES = ("float32", "bfloat16", "float16")  # embed.dtype: bfloat16 / float16 use autocast on a GPU

EncoderSource = Literal["sentence-transformers", "hf", "timm"]  # "hf": transformers
# a text encoder's (TextPooling), or an image encoder's: "timm" (the model's own), "token", "avg"
Pooling = Literal[TextPooling, "timm", "token", "avg"]
# library -> (EncoderSpec.source, the poolings it gives; the first is a declaration's default). "timm" pooling
# is the model's own head pooling taken before its classifier, "token" / "avg" timm's global_pool
LIBRARIES: dict[str, tuple[EncoderSource, tuple[Pooling, ...]]] = {
    "sentence-transformers": ("sentence-transformers", ("mean", "cls")),
    "transformers": ("hf", ("mean", "cls", "pooler")),
    "timm": ("timm", ("timm", "token", "avg")),
}
FIELDS = (
    "library",
    "id",
    "revision",
    "pooling",
    "normalize",
    "prefix",
    "allow_remote_code",
    "trust_remote_code",
)
# what a sentence-transformers checkpoint may chain: the model, its pooling, a normalisation (a Dense is not
# applied)
ST_MODULES = ("Transformer", "Pooling", "Normalize")
# position tables that start after the padding index (RoBERTa's 514 rows hold 512 tokens)
OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert", "mpnet", "longformer", "data2vec-text")
# a model without a position table: the most tokens params.yaml's embed.max_length allows
MAX_POSITIONS = 8_192
SAFETENSORS_HEADER_MAX = 100_000_000  # bytes: the safetensors format's own bound on a header


def autocast_dtype(dtype: str, compute_dtype: str | None, device: str) -> str | None:
    """The dtype an encoder's forward pass autocasts to, or None for plain float32: `compute_dtype` when set,
    else the stored `dtype` (embed.compute_dtype null); never on the CPU, which computes in float32."""
    compute = compute_dtype or dtype
    return None if compute == "float32" or device == "cpu" else compute


@dataclass(frozen=True)
class EncoderSpec:
    name: str  # registry name, e.g. "minilm-l6"
    display: str  # as the paper writes it, e.g. "MiniLM-L6"; a declared encoder's name
    modality: Modality
    source: EncoderSource
    hub_id: str  # Hugging Face / timm id, or a declared local folder or file
    dim: int  # width of the pooled vector (and of token states, for text)
    pooling: Pooling
    image_size: int = 0  # vision: input resolution the 32x32 portraits are resized to
    positions: int = 512  # text: the most tokens its position table holds (embed.max_length's bound)
    # vision: the same network in torchvision, "<builder>:<weights enum>.<member>" (embed.image_source
    # torchvision)
    torchvision: str = ""
    # a declaration's own (params.yaml `encoders:`); the built-ins leave them at these defaults
    revision: str = ""  # the commit of a Hugging Face id
    prefix: str = ""  # text: prepended to every text before tokenising (e5's "query: ")
    normalize: bool | None = None  # L2-normalise the pooled vector; None: embed.normalize's rule
    allow_remote_code: bool = False  # run the code the model's folder ships (transformers' trust_remote_code)
    folder: str = ""  # where its config was found: a local folder (or a weights file beside it)
    declared: bool = False  # from params.yaml, not shipped

    @property
    def library(self) -> str:
        return next(lib for lib, (source, _) in LIBRARIES.items() if source == self.source)


def _vision(display: str, timm_id: str, dim: int, params: int, **extra) -> dict:
    shipped = {"display": display, "dim": dim, "image_size": 224, "params": params, **extra}
    return {"library": "timm", "id": timm_id, "shipped": shipped}


def _text(display: str, hf_id: str, dim: int, params: int, library: str = "transformers", **extra) -> dict:
    return {
        "library": library,
        "id": hf_id,
        "shipped": {"display": display, "dim": dim, "params": params, **extra},
    }


# The study's encoders as declarations, with what their configs say shipped beside them: the display name as
# the paper writes it, the width, the image size or position table, the frozen parameter count (paper Tables
# 4, 12, 20: total minus the trainable head, for `drift models` without loading any weights) and, for
# ConvNeXt-S, the torchvision build of the same network (embed.image_source). Text encoders pool by the token
# mean.
BUILT_IN: dict[str, dict[str, Any]] = {
    # vision (Table 4): linear probe on the pooled features
    "dinov2-s": _vision("DINOv2-S", "vit_small_patch14_dinov2.lvd142m", 384, 22_100_000),
    "dinov3-s": _vision("DINOv3-S", "vit_small_patch16_dinov3.lvd1689m", 384, 21_600_000),
    "clip-b32": _vision("CLIP-B32", "vit_base_patch32_clip_224.openai", 768, 87_500_000),
    "siglip-b": _vision("SigLIP-B", "vit_base_patch16_siglip_224.webli", 768, 92_900_000),
    # ImageNet-1k weights, as the paper: timm's fb_in1k is the ConvNeXt authors' own IN-1k run; the authors of
    # the study load torchvision's IMAGENET1K_V1, another training of the same network (embed.image_source)
    "convnext-s": _vision(
        "ConvNeXt-S",
        "convnext_small.fb_in1k",
        768,
        49_500_000,
        torchvision="convnext_small:ConvNeXt_Small_Weights.IMAGENET1K_V1",
    ),
    "resnet50-in": _vision("ResNet50-IN", "resnet50.a1_in1k", 2048, 23_500_000),
    "vit-s16-in21k": _vision("ViT-S16-IN21k", "vit_small_patch16_224.augreg_in21k", 384, 21_700_000),
    "mae-b": _vision("MAE-B", "vit_base_patch16_224.mae", 768, 85_800_000),
    "eva02-b": _vision("EVA02-B", "eva02_base_patch14_224.mim_in22k", 768, 85_800_000),
    # text (Tables 12, 20): linear probe on the pooled vector; token states feed the text heads
    "bert": _text("BERT", "bert-base-uncased", 768, 109_500_000),
    "roberta": _text("RoBERTa", "roberta-base", 768, 124_600_000),
    "deberta-v3": _text("DeBERTa-v3", "microsoft/deberta-v3-base", 768, 183_800_000),
    "electra": _text("ELECTRA", "google/electra-base-discriminator", 768, 108_900_000),
    "mpnet": _text("MPNet", "microsoft/mpnet-base", 768, 109_500_000),
    "modernbert": _text("ModernBERT", "answerdotai/ModernBERT-base", 768, 149_000_000, positions=8192),
    "distilbert": _text("DistilBERT", "distilbert-base-uncased", 768, 66_400_000),
    "minilm-l6": _text(
        "MiniLM-L6",
        "sentence-transformers/all-MiniLM-L6-v2",
        384,
        22_700_000,
        library="sentence-transformers",
    ),
}
ENCODER_PARAMS = {name: entry["shipped"]["params"] for name, entry in BUILT_IN.items()}


# ---------------------------------------------------------------- a declaration's fields


def _field(name: str, key: str) -> str:
    return f"encoders.{name}.{key}"


def _checked(name: str, declaration) -> dict[str, Any]:
    """The declaration's fields, each of its type, library and id present; a one-line DriftError names the
    field."""
    if not isinstance(declaration, dict):
        raise DriftError(
            f"encoders.{name} must be a mapping of {', '.join(FIELDS[:-1])}, got {declaration!r} "
            "(e.g. {library: sentence-transformers, id: BAAI/bge-small-en-v1.5})"
        )
    for key in declaration:
        if key not in FIELDS:
            raise DriftError(
                f"unknown parameter {_field(name, str(key))}: "
                f"{close_matches(str(key), FIELDS, prefix=f'encoders.{name}.')}"
            )
    for key in ("library", "id"):
        if key not in declaration:
            raise DriftError(f"{_field(name, key)} is missing: {_choices(key)}")
    for key in ("library", "id", "revision", "pooling", "prefix"):
        if key in declaration and not isinstance(declaration[key], str):
            raise DriftError(f"{_field(name, key)} must be a string, got {declaration[key]!r}")
    for key in ("normalize", "allow_remote_code", "trust_remote_code"):
        if key in declaration and not isinstance(declaration[key], bool):
            raise DriftError(f"{_field(name, key)} must be true or false, got {declaration[key]!r}")
    if declaration["library"] not in LIBRARIES:
        raise DriftError(
            f"{_field(name, 'library')}: unknown library {declaration['library']!r}: "
            f"{close_matches(declaration['library'], LIBRARIES)}"
        )
    if not declaration["id"].strip():
        raise DriftError(f"{_field(name, 'id')} is empty: {_choices('id')}")
    return declaration


def _choices(key: str) -> str:
    if key == "library":
        return f"one of {', '.join(LIBRARIES)}"
    return "a Hugging Face or timm id (BAAI/bge-small-en-v1.5), or a local folder"


def _check_fields(name: str, declaration: dict, modality: str) -> str:
    """The pooling the declaration asks of its library (checked), and its text-only and remote-code fields."""
    library = declaration["library"]
    poolings = LIBRARIES[library][1]
    pooling = declaration.get("pooling", "")
    if pooling and pooling not in poolings:
        raise DriftError(
            f"{_field(name, 'pooling')} must be one of {', '.join(poolings)} for library {library}, got {pooling!r}"
        )
    if modality == "image" and "prefix" in declaration:
        raise DriftError(f"{_field(name, 'prefix')}: a timm encoder reads images, not text: drop prefix")
    if declaration.get("trust_remote_code") and not declaration.get("allow_remote_code"):
        raise DriftError(remote_code_refused(name, declaration["id"], "trust_remote_code is true"))
    return pooling


def remote_code_refused(name: str, model_id: str, why: str) -> str:
    return (
        f"{_field(name, 'trust_remote_code')}: {why}, which runs the Python code {model_id} ships with your "
        f"permissions; set {_field(name, 'allow_remote_code')}: true if you trust it (valid: true, false)"
    )


# ---------------------------------------------------------------- the model's files and config, json only


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise DriftError(f"cannot read {path}: {' '.join(str(e).split())[:200]}") from None
    if not isinstance(data, dict):
        raise DriftError(f"{path} is not a JSON object")
    return data


def _is_path(model_id: str) -> bool:
    return model_id.startswith(("/", "./", "../", "~")) or Path(model_id).expanduser().exists()


def hub_repo_of(library: str, model_id: str) -> str:
    """The Hugging Face repository a declared id names: timm's ids live under timm/ unless they say otherwise."""
    model_id = model_id.removeprefix("hf-hub:")
    return model_id if library != "timm" or "/" in model_id else f"timm/{model_id}"


def fetch_command(library: str, model_id: str, revision: str = "") -> str:
    at = f" --revision {revision}" if revision else ""
    return f"huggingface-cli download {hub_repo_of(library, model_id)}{at}"


def find_files(name: str, declaration: dict, weights: str | None) -> Path:
    """The local folder holding a declared encoder's config (or a weights file with its config beside it):
    embed.weights.<name>, else the `id` when it is a path, else the Hugging Face cache (a lookup, no network).
    """
    library, model_id, revision = declaration["library"], declaration["id"], declaration.get("revision", "")
    if weights:
        path = Path(weights).expanduser()
        if not path.exists():
            raise DriftError(
                f"embed.weights.{name} names {path}, which is not there: fix embed.weights.{name}"
            )
        return path
    if _is_path(model_id):
        path = Path(model_id).expanduser()
        if revision:
            raise DriftError(f"{_field(name, 'revision')}: {model_id} is a local path, which has no revision")
        if not path.exists():
            raise DriftError(f"{_field(name, 'id')}: no folder or file at {path}: fix the path")
        return path
    from huggingface_hub import (
        try_to_load_from_cache,  # lazy: only a declared hub id needs the cache's layout
    )

    try:
        hit = try_to_load_from_cache(hub_repo_of(library, model_id), "config.json", revision=revision or None)
    except (ValueError, OSError):  # an id the cache cannot hold (huggingface_hub's validation): not here
        hit = None
    if isinstance(hit, str):
        return Path(hit).parent
    at = f" at revision {revision}" if revision else ""
    raise DriftError(
        f"encoders.{name}: no local files of {model_id}{at} (config.json): set embed.weights.{name} (or the id) "
        f"to a local folder, or fetch them on a machine with a network (`{fetch_command(library, model_id, revision)}`)"
    )


def config_folder(path: Path) -> Path:
    """The folder of a declared encoder's config: the folder itself, or the one a weights file lies in."""
    return path if path.is_dir() else path.parent


def st_modules(folder: Path) -> dict[str, Any]:
    """A sentence-transformers folder's modules.json read: {transformer: its subfolder ("" for the folder
    itself), pooling: the Pooling config's mode (mean, cls, or what else it says; None without one),
    normalize: whether a Normalize module ends it, others: the module types drift does not apply}. No
    modules.json: a bare model."""
    out: dict[str, Any] = {"transformer": "", "pooling": None, "normalize": False, "others": []}
    path = folder / "modules.json"
    if not path.is_file():
        return out
    try:
        modules = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise DriftError(f"cannot read {path}: {' '.join(str(e).split())[:200]}") from None
    for module in modules if isinstance(modules, list) else []:
        kind = str(module.get("type", "")).rpartition(".")[2] if isinstance(module, dict) else ""
        sub = str(module.get("path", "")) if isinstance(module, dict) else ""
        if kind == "Transformer":
            out["transformer"] = sub
        elif kind == "Pooling" and (folder / sub / "config.json").is_file():
            out["pooling"] = _pooling_mode(_read_json(folder / sub / "config.json"))
        elif kind == "Normalize":
            out["normalize"] = True
        else:
            out["others"].append(kind or str(module))
    return out


def _pooling_mode(config: dict) -> str:
    modes = [
        key.removeprefix("pooling_mode_")
        for key, on in config.items()
        if key.startswith("pooling_mode_") and on
    ]
    named = {"cls_token": "cls", "mean_tokens": "mean"}
    return named.get(modes[0], modes[0]) if len(modes) == 1 else "+".join(modes) or "none"


def _remote_code(config: dict) -> bool:
    return "auto_map" in config


def _text_facts(name: str, declaration: dict, folder: Path) -> dict[str, Any]:
    """Width, position table and pooling of a declared text encoder, from its config files."""
    modules = st_modules(folder) if declaration["library"] == "sentence-transformers" else None
    if modules and modules["others"]:
        raise DriftError(
            f"encoders.{name}: modules.json chains {', '.join(modules['others'])}, which drift does not apply "
            f"(it applies {', '.join(ST_MODULES)}): declare library: transformers to embed with the bare model"
        )
    config_path = folder / (modules["transformer"] if modules else "") / "config.json"
    if not config_path.is_file():
        raise DriftError(
            f"encoders.{name}: no config.json in {config_path.parent}: a local folder needs the model's config, "
            f"tokenizer and weights (`{fetch_command(declaration['library'], declaration['id'])}` fetches them)"
        )
    config = _read_json(config_path)
    if _remote_code(config) and not declaration.get("allow_remote_code"):
        raise DriftError(
            remote_code_refused(name, declaration["id"], f"{config_path} names its own code (auto_map)")
        )
    dim = next((config[k] for k in ("hidden_size", "dim", "d_model") if isinstance(config.get(k), int)), None)
    if dim is None:
        raise DriftError(f"encoders.{name}: {config_path} gives no width (hidden_size, dim or d_model)")
    positions = config.get("max_position_embeddings")
    if isinstance(positions, int) and config.get("model_type") in OFFSET_POSITIONS:
        positions -= int(config.get("pad_token_id") or 0) + 1
    pooling = declaration.get("pooling") or (modules or {}).get("pooling") or "mean"
    if pooling not in LIBRARIES[declaration["library"]][1]:
        raise DriftError(
            f"encoders.{name}: its Pooling config pools by {pooling}, which drift does not compute: set "
            f"{_field(name, 'pooling')} to one of {', '.join(LIBRARIES[declaration['library']][1])}"
        )
    return {
        "dim": dim,
        "positions": positions if isinstance(positions, int) else MAX_POSITIONS,
        "pooling": pooling,
    }


def timm_config(folder: Path) -> dict:
    """A timm model's config.json (as timm's save_for_hf and the hub's timm repositories write it)."""
    return _read_json(folder / "config.json")


def _image_facts(name: str, declaration: dict, folder: Path) -> dict[str, Any]:
    """Width and image size of a declared timm encoder, from its config.json."""
    path = folder / "config.json"
    if not path.is_file():
        raise DriftError(
            f"encoders.{name}: no config.json in {folder}: a timm folder holds config.json beside its weights "
            f"(timm's save_for_hf writes both; `{fetch_command('timm', declaration['id'])}` fetches them)"
        )
    config = timm_config(folder)
    pretrained = config.get("pretrained_cfg") if isinstance(config.get("pretrained_cfg"), dict) else config
    size = pretrained.get("input_size") if isinstance(pretrained, dict) else None
    if not isinstance(config.get("architecture"), str) or not isinstance(config.get("num_features"), int):
        raise DriftError(f"encoders.{name}: {path} gives no architecture and num_features: not a timm config")
    if not (isinstance(size, list) and size and isinstance(size[-1], int)):
        raise DriftError(f"encoders.{name}: {path} gives no input_size in its pretrained_cfg")
    return {
        "dim": config["num_features"],
        "image_size": size[-1],
        "pooling": declaration.get("pooling") or "timm",
    }


# ---------------------------------------------------------------- declarations to specs


def make_spec(
    name: str, declaration: dict, weights: str | None = None, shipped: dict | None = None
) -> EncoderSpec:
    """The EncoderSpec of one declaration: its fields checked, then its facts (width, positions, image size,
    pooling) from what it ships (`shipped`: a built-in's) or else its config files. `weights`:
    embed.weights.<name>, where a declared encoder's files are looked for first."""
    declaration = _checked(name, declaration)
    library = declaration["library"]
    source = LIBRARIES[library][0]
    modality: Modality = "image" if library == "timm" else "text"
    pooling = _check_fields(name, declaration, modality)
    if shipped is not None:
        facts = {"pooling": pooling or LIBRARIES[library][1][0], **shipped}
        facts.pop("params")
        folder = ""
    else:
        path = find_files(name, declaration, weights)
        read = _image_facts if modality == "image" else _text_facts
        facts = {"display": name, **read(name, declaration, config_folder(path))}
        folder = str(path)
    return EncoderSpec(
        name=name,
        modality=modality,
        source=source,
        hub_id=declaration["id"],
        revision=declaration.get("revision", ""),
        prefix=declaration.get("prefix", ""),
        normalize=declaration.get("normalize"),
        allow_remote_code=bool(declaration.get("allow_remote_code")),
        folder=folder,
        declared=shipped is None,
        **facts,
    )


BUILT_IN_SPECS: dict[str, EncoderSpec] = {
    name: make_spec(name, {k: v for k, v in entry.items() if k != "shipped"}, shipped=entry["shipped"])
    for name, entry in BUILT_IN.items()
}
DECLARED: dict[str, EncoderSpec] = {}  # the encoders the last load_params declared
ENCODERS: dict[str, EncoderSpec] = dict(BUILT_IN_SPECS)  # every encoder by name: built-in, then declared


def get_encoder_spec(name: str) -> EncoderSpec:
    if name not in ENCODERS:
        raise DriftError(f"unknown encoder {name!r}: {close_matches(name, ENCODERS)}")
    return ENCODERS[name]


def declare_encoders(declarations, weights: dict | None = None) -> None:
    """Register the encoders params.yaml declares (`encoders:` name -> declaration) beside the built-in ones,
    replacing those an earlier call declared (a load without them drops them). `weights`: embed.weights as
    written, where each declared encoder's files are looked for first. Every declaration is checked before any
    is registered; a bad one is a one-line DriftError naming its field."""
    if not isinstance(declarations, dict):
        raise DriftError(
            f"params.yaml `encoders:` must map each name to a declaration, got {declarations!r} "
            "(e.g. encoders: {bge-small: {library: sentence-transformers, id: BAAI/bge-small-en-v1.5}})"
        )
    specs = {}
    for name, declaration in declarations.items():
        check_name(name, "encoders")
        if name in BUILT_IN:
            raise DriftError(
                f"encoders.{name}: {name} is a built-in encoder: name the declaration otherwise "
                f"(built-in: {', '.join(BUILT_IN)})"
            )
        path = (weights or {}).get(name)
        specs[name] = make_spec(name, declaration, path if isinstance(path, str) else None)
    for name in DECLARED:
        ENCODERS.pop(name, None)
    DECLARED.clear()
    DECLARED.update(specs)
    ENCODERS.update(specs)


def frozen_params(spec: EncoderSpec) -> int | None:
    """The encoder's own parameter count, without loading it: a built-in's as the paper prints it, a declared
    one's from its safetensors headers (None where its weights are not safetensors files here)."""
    if not spec.declared:
        return ENCODER_PARAMS.get(spec.name)
    path = Path(spec.folder)
    files = [path] if path.is_file() else sorted(path.rglob("*.safetensors"))
    total = 0
    for file in files:
        if file.suffix != ".safetensors":
            return None
        try:
            with open(file, "rb") as f:
                size = int.from_bytes(f.read(8), "little")
                if size > SAFETENSORS_HEADER_MAX:
                    return None
                header = json.loads(f.read(size))
            total += sum(_count(t["shape"]) for key, t in header.items() if key != "__metadata__")
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None
    return total or None


def _count(shape: list[int]) -> int:
    n = 1
    for size in shape:
        n *= size
    return n


def register(spec: EncoderSpec) -> None:
    """A declared encoder's spec made known in another process (a Ray worker) as load_params made it here."""
    if spec.declared and ENCODERS.get(spec.name) != spec:
        DECLARED[spec.name] = ENCODERS[spec.name] = spec

"""Frozen vision encoders (timm, or torchvision where embed.image_source says): the 32x32 portraits in, one
pooled vector per image out.

Weights load from a local file or directory (`embed.weights.<name>` in params), the Hugging Face cache (timm)
or torch's hub cache (torchvision), by a file-system lookup only: nothing downloads and nothing waits on a
network. Preprocessing follows the model's own timm data config (mean, std); the small inputs are resized to
the registry's image size, bilinearly. A declared encoder (params.yaml `encoders:`, library timm) is built
from its folder's config.json as timm's save_for_hf and the hub's timm repositories write it: its
architecture, arguments, pretrained config (image size, mean, std) and head.
"""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import cast
from urllib.parse import urlparse

import numpy as np
import timm
import timm.data
import torch
import torch.nn.functional as F
from huggingface_hub import try_to_load_from_cache
from safetensors import safe_open

from drift.core.encoder_registry import (
    DTYPES,
    autocast_dtype,
    config_folder,
    fetch_command,
    get_encoder_spec,
    timm_config,
)
from drift.core.errors import DriftError
from drift.encoders.fingerprint import Fingerprinted

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")  # what timm's repos on the Hugging Face hub hold
# the activations a vision encoder's blocks may be built with (timm's act_layer): gelu (erf), gelu_tanh (the
# tanh approximation, SigLIP's in Hugging Face), quick_gelu (x * sigmoid(1.702 x), OpenAI CLIP's)
ACTIVATIONS = ("gelu", "gelu_tanh", "quick_gelu")
# how a ViT's position table reaches the grid it is fed at: resampled by timm once at load (bicubic,
# antialiased), or as DINOv2's torch.hub model interpolates it at every forward pass (dinov2_hub_pos_embed)
POS_EMBEDS = ("timm", "dinov2-hub")
DINOV2_HUB_OFFSET = 0.1  # the hub model's interpolate_offset: its scale factor is (grid + 0.1) / M


def hub_repo(arch: str) -> str:
    """The Hugging Face repository timm loads `arch` from, e.g. timm/resnet50.a1_in1k."""
    cfg = timm.models.get_pretrained_cfg(arch)
    return cfg.hf_hub_id if cfg and cfg.hf_hub_id else f"timm/{arch}"


def resolve_weights(spec, weights: str | None = None) -> Path:
    """The local weight file of a vision encoder, or a one-line error saying how to provide it."""
    if weights:
        path = Path(weights).expanduser()
        if path.is_dir():
            for name in WEIGHT_FILES:
                if (path / name).is_file():
                    return path / name
            raise DriftError(f"no {' or '.join(WEIGHT_FILES)} in {path}: fix embed.weights.{spec.name}")
        if not path.is_file():
            raise DriftError(f"weights for {spec.name} not found at {path}: fix embed.weights.{spec.name}")
        return path
    if spec.folder:  # a declared encoder: its file, or the weights in the folder its config was read from
        path = Path(spec.folder)
        for name in () if path.is_file() else WEIGHT_FILES:
            if (path / name).is_file():
                return path / name
        if path.is_file():
            return path
        raise DriftError(
            f"no {' or '.join(WEIGHT_FILES)} in {path}: set embed.weights.{spec.name} to the weights, or fetch "
            f"them on a machine with a network (`{fetch_command('timm', spec.hub_id, spec.revision)}`)"
        )
    # a pure cache lookup: unlike hf_hub_download it never opens a connection, whatever HF_HUB_OFFLINE says
    repo = hub_repo(spec.hub_id)
    for name in WEIGHT_FILES:
        hit = try_to_load_from_cache(repo, name)
        if isinstance(hit, str):
            return Path(hit)
    raise DriftError(
        f"no local weights for encoder {spec.name} ({repo}): set embed.weights.{spec.name} to a local weight file "
        f"or directory, or download them on a machine with a network (`hf download {repo}`)"
    )


def size_kwargs(arch: str, image_size: int) -> dict:
    """ViT-style models bake the input grid into their position embeddings: build them at the size we feed
    (timm resamples a checkpoint's embeddings on load). CNNs take any size and have no such argument."""
    with torch.device("meta"):  # no memory, no init cost: only the class is wanted
        cls = type(timm.create_model(arch, pretrained=False))
    return (
        {"img_size": image_size}
        if image_size and "img_size" in inspect.signature(cls.__init__).parameters
        else {}
    )


def has_classifier(arch: str, weights_file: Path) -> bool:
    """Whether the checkpoint keeps timm's classifier (as the hub's do) or is a backbone export without it."""
    cfg = timm.models.get_pretrained_cfg(arch)
    # timm types classifier as a str; distilled models' configs hold a tuple (DeiT's head and head_dist)
    classifier: str | tuple[str, ...] | None = cfg.classifier if cfg else None
    if not cfg or not cfg.num_classes or not classifier or weights_file.suffix != ".safetensors":
        return True  # nothing to drop, or only a full load could tell: assume the hub's layout
    heads = (classifier,) if isinstance(classifier, str) else classifier
    with safe_open(str(weights_file), "pt") as f:  # reads the header only
        return any(key.startswith(f"{head}.") for key in f.keys() for head in heads)


def declared_arguments(config: dict) -> tuple[dict, dict]:
    """(create_model arguments, pretrained config) of a timm config.json: its model_args and its
    pretrained_cfg's timm fields, with the head of the checkpoint (its num_classes) so that its load stays
    strict."""
    known = {f.name for f in dataclasses.fields(timm.models.PretrainedCfg)}
    pretrained = config.get("pretrained_cfg") or {}
    overlay = {k: v for k, v in pretrained.items() if k in known and k not in ("url", "hf_hub_id", "source")}
    kwargs = dict(config.get("model_args") or {})
    if "num_classes" in config:
        kwargs["num_classes"] = overlay["num_classes"] = config["num_classes"]
    return kwargs, overlay


def build_model(
    arch: str,
    image_size: int,
    weights_file: Path,
    global_pool: str | None = None,
    activation: str | None = None,
    config: dict | None = None,
) -> torch.nn.Module:
    """timm model `arch` with the weights in weights_file and no classifier, built for image_size, pooling
    with timm's `global_pool` and its blocks' `activation` (timm's act_layer; None: the architecture's
    defaults); `config`: a declared encoder's config.json, whose arguments and pretrained config it is built
    with."""
    declared, pretrained = declared_arguments(config) if config is not None else ({}, {})
    kwargs = {**declared, **size_kwargs(arch, image_size)}
    if activation is not None:
        kwargs["act_layer"] = activation
    # timm's own loader applies the architecture's checkpoint filter (renames, position-embedding resampling).
    # Loading with the checkpoint's own classifier (or none, when it has none) keeps the load strict: a wrong
    # file fails here instead of leaving layers at their random init.
    overlay = {**pretrained, "file": str(weights_file), "custom_load": weights_file.suffix == ".npz"}
    if config is None and not has_classifier(arch, weights_file):
        kwargs["num_classes"] = overlay["num_classes"] = 0
    try:
        model = timm.create_model(arch, pretrained=True, pretrained_cfg_overlay=overlay, **kwargs)
    except (RuntimeError, KeyError, ValueError, OSError) as e:
        reason = " ".join(str(e).split())[:300]
        raise DriftError(f"weights {weights_file} do not load into timm model {arch}: {reason}") from e
    # every timm model defines reset_classifier; create_model is typed as returning a plain nn.Module
    reset_classifier = cast(Callable[..., None], model.reset_classifier)
    reset_classifier(0)  # keeps the head's pooling (CLS token, attention pool, average), drops the logits
    if global_pool is not None:
        reset_classifier(0, global_pool)
    return model


def torchvision_weights(spec):
    """The torchvision weights enum member of a registry entry (spec.torchvision "<builder>:<Enum>.<member>")."""
    import torchvision  # lazy: only encoders of embed.image_source torchvision need it

    enum, _, member = spec.torchvision.partition(":")[2].rpartition(".")
    return getattr(getattr(torchvision.models, enum), member)


def torchvision_file_name(spec) -> str:
    """The file name torchvision keeps a registry entry's weights under (the last part of their URL)."""
    return Path(urlparse(torchvision_weights(spec).url).path).name


def resolve_torchvision_weights(spec, weights: str | None = None) -> Path:
    """The local file of a torchvision encoder's weights: embed.weights.<name> (the file, or a folder holding
    it under torchvision's own file name), else torch's hub cache, where torchvision keeps what it downloaded;
    or a one-line error saying how to provide it. A file-system lookup only: nothing downloads."""
    file_name = torchvision_file_name(spec)
    if weights:
        path = Path(weights).expanduser()
        if path.is_dir() and (path / file_name).is_file():
            return path / file_name
        if path.is_file():
            return path
        raise DriftError(
            f"no torchvision weights of {spec.name} at {path} (a file, or a folder with {file_name}): "
            f"fix embed.weights.{spec.name}"
        )
    path = Path(torch.hub.get_dir()) / "checkpoints" / file_name
    if path.is_file():
        return path
    builder, _, member = spec.torchvision.partition(":")
    raise DriftError(
        f"no local torchvision weights for encoder {spec.name} ({member}, {path}): set embed.weights.{spec.name} "
        f'to the file, or download them on a machine with a network (`python -c "import torchvision; '
        f"torchvision.models.{builder}(weights='{member.rpartition('.')[2]}')\"`)"
    )


class TorchvisionConvNeXt(torch.nn.Module):
    """A torchvision ConvNeXt up to its pooled vector, as its classifier reads it: the features, the average
    pool, the classifier's LayerNorm2d, flattened (the classifier's Linear left out)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.features = cast(torch.nn.Module, model.features)
        self.avgpool = cast(torch.nn.Module, model.avgpool)
        self.norm = cast(torch.nn.Sequential, model.classifier)[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.norm(self.avgpool(self.features(x))), 1)


def build_torchvision_model(spec, weights_file: Path) -> torch.nn.Module:
    """torchvision's network of `spec` with the weights in weights_file (strict), cut at its pooled vector."""
    import torchvision  # lazy: as torchvision_weights

    builder = spec.torchvision.partition(":")[0]
    model = getattr(torchvision.models, builder)(weights=None)
    try:
        model.load_state_dict(torch.load(weights_file, map_location="cpu", weights_only=True))
    except (RuntimeError, KeyError, ValueError, OSError, pickle.UnpicklingError) as e:
        reason = " ".join(str(e).split())[:300]
        raise DriftError(f"weights {weights_file} do not load into torchvision's {builder}: {reason}") from e
    return TorchvisionConvNeXt(model)


def dinov2_hub_pos_embed(table: torch.Tensor, grid: int, prefix: int = 1) -> torch.Tensor:
    """A DINOv2 position table [1, prefix + M * M, D] at a grid x grid patch grid, as DINOv2's torch.hub model
    computes it in each forward pass: the prefix (class token) rows kept, the M x M patch rows resampled in
    float32, bicubic, by the scale factor (grid + 0.1) / M on both axes, no antialiasing, align_corners False;
    a table already at the grid comes back unchanged. The result has the table's dtype and device."""
    patches = table.shape[1] - prefix
    side = int(round(patches**0.5))
    if table.ndim != 3 or table.shape[0] != 1 or side * side != patches:
        raise DriftError(
            f"a position table of shape {list(table.shape)} is not a square grid after {prefix} token"
        )
    if side == grid:
        return table
    dim = table.shape[-1]
    square = table[:, prefix:].float().reshape(1, side, side, dim).permute(0, 3, 1, 2)
    scale = (grid + DINOV2_HUB_OFFSET) / side
    resampled = F.interpolate(square, scale_factor=(scale, scale), mode="bicubic", antialias=False)
    if resampled.shape[-2:] != (grid, grid):
        raise DriftError(
            f"resampling a {side} x {side} position table gave {list(resampled.shape[-2:])}, not {grid}"
        )
    patch_rows = resampled.permute(0, 2, 3, 1).reshape(1, grid * grid, dim)
    return torch.cat([table[:, :prefix].float(), patch_rows], dim=1).to(table.dtype)


def hub_positions(model: torch.nn.Module, image_size: int, name: str) -> None:
    """Bring a timm ViT built at its checkpoint's own size (the table as trained, not resampled at load) to
    `image_size` with the position table DINOv2's torch.hub model uses there (dinov2_hub_pos_embed), on the
    model's device."""
    pos_embed = getattr(model, "pos_embed", None)
    set_input_size = getattr(model, "set_input_size", None)
    if not isinstance(pos_embed, torch.Tensor) or set_input_size is None:
        raise DriftError(f"embed.image_pos_embed.{name}: {name} has no learned position table to resample")
    prefix = 0 if getattr(model, "no_embed_class", False) else int(cast(int, model.num_prefix_tokens))
    patch = int(cast(tuple, cast(torch.nn.Module, model.patch_embed).patch_size)[0])
    resampled = dinov2_hub_pos_embed(pos_embed.detach(), image_size // patch, prefix)
    set_input_size(img_size=(image_size, image_size))  # the patch grid; timm's own table is replaced below
    with torch.no_grad():
        cast(torch.Tensor, model.pos_embed).copy_(resampled)


def head_pooling(model: torch.nn.Module) -> str:
    """How the timm model pools before its classifier: token, avg, map, ... (for the fingerprint)."""
    pool = getattr(model, "global_pool", None)
    if pool is None:
        pool = getattr(getattr(model, "head", None), "global_pool", None)
    return str(getattr(pool, "pool_type", pool))  # SelectAdaptivePool2d keeps its kind in pool_type


class VisionEncoder(Fingerprinted):
    """Runs a frozen timm encoder over 0-255 images [n, C, H, W] (uint8, or float32 unrounded values); returns
    the pooled float32 [n, D]. `image_input` normalised: pixels / 255 normalised by the encoder's mean and
    std; raw: the 0-255 values as they are (the authors' runs). `global_pool`: timm's pooling of the head
    (None: the architecture's). `activation`: the blocks' activation, one of ACTIVATIONS (None: the
    architecture's; timm builds OpenAI's CLIP with gelu where the weights were trained with quick_gelu, SigLIP
    with gelu where Hugging Face's is gelu_tanh). `compute_dtype` (embed.compute_dtype): the forward pass's
    dtype on a GPU; None autocasts to `dtype`. `pos_embed`: timm's position table (resampled at load), or
    dinov2-hub (DINOv2's torch.hub resampling)."""

    def __init__(
        self,
        name: str,
        batch_size: int = 64,
        dtype: str = "float32",
        device: str | None = None,
        weights: str | None = None,
        image_input: str = "normalised",
        global_pool: str | None = None,
        compute_dtype: str | None = None,
        activation: str | None = None,
        source: str = "timm",
        pos_embed: str = "timm",
    ):
        self.spec = get_encoder_spec(name)
        if self.spec.modality != "image":
            raise DriftError(f"{name} is a {self.spec.modality} encoder; image datasets need an image one")
        if dtype not in DTYPES:
            raise DriftError(f"embed.dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        self.batch_size, self.dtype = int(batch_size), dtype
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if compute_dtype is not None and compute_dtype not in DTYPES:
            raise DriftError(f"embed.compute_dtype must be one of {', '.join(DTYPES)}, got {compute_dtype!r}")
        self.compute_dtype = compute_dtype
        self.autocast = autocast_dtype(dtype, compute_dtype, self.device)  # None: float32
        if activation is not None and activation not in ACTIVATIONS:
            raise DriftError(
                f"the activation of {name} must be one of {', '.join(ACTIVATIONS)}, got {activation!r}"
            )
        if image_input not in ("normalised", "raw"):
            raise DriftError(f"embed.image_input must be normalised or raw, got {image_input!r}")
        if source not in ("timm", "torchvision"):
            raise DriftError(f"embed.image_source.{name} must be timm or torchvision, got {source!r}")
        if pos_embed not in POS_EMBEDS or (pos_embed != "timm" and source != "timm"):
            raise DriftError(
                f"embed.image_pos_embed.{name} must be one of {', '.join(POS_EMBEDS)} on a timm encoder, "
                f"got {pos_embed!r} ({source})"
            )
        self.pos_embed = pos_embed
        self.image_input, self.global_pool, self.activation, self.source = (
            image_input,
            global_pool,
            activation,
            source,
        )
        if source == "torchvision":
            if global_pool is not None or activation is not None:
                raise DriftError(
                    f"{name} from torchvision pools and activates as torchvision builds it: drop "
                    f"embed.image_pooling.{name} and embed.image_activation.{name}"
                )
            self.path = resolve_torchvision_weights(self.spec, weights)
            self.model = build_torchvision_model(self.spec, self.path)
            transform = torchvision_weights(self.spec).transforms()
            self.dim, self.image_size = self.spec.dim, self.spec.image_size
            self.mean, self.std = [float(m) for m in transform.mean], [float(s) for s in transform.std]
        else:
            self.path = resolve_weights(self.spec, weights)
            # dinov2-hub: built at the checkpoint's own size, so its position table loads as trained
            size = 0 if pos_embed == "dinov2-hub" else self.spec.image_size
            # a declared encoder: its config.json's architecture and arguments, its declared pooling by
            # default
            config = timm_config(config_folder(Path(self.spec.folder))) if self.spec.folder else None
            arch = config["architecture"] if config else self.spec.hub_id
            if global_pool is None and self.spec.pooling in ("token", "avg"):
                global_pool = self.global_pool = self.spec.pooling
            self.model = build_model(arch, size, self.path, global_pool, activation, config)
            # timm's width, an int (nn.Module types an attribute it does not declare as Tensor | Module)
            self.dim = int(cast(int, self.model.num_features))
            config = timm.data.resolve_data_config({}, model=self.model)
            self.image_size = self.spec.image_size or int(config["input_size"][-1])
            self.mean = [float(m) for m in config["mean"]]
            self.std = [float(s) for s in config["std"]]
        self.model.eval().requires_grad_(False).to(self.device)
        if pos_embed == "dinov2-hub":  # on the device it runs on, as the hub model's forward pass
            hub_positions(self.model, self.image_size, name)
        self._mean = torch.tensor(self.mean, device=self.device).view(1, 3, 1, 1)
        self._std = torch.tensor(self.std, device=self.device).view(1, 3, 1, 1)

    def fingerprint_fields(self) -> dict:
        pooling = (
            "torchvision:avg+norm" if self.source == "torchvision" else f"timm:{head_pooling(self.model)}"
        )
        fields = {
            "pooling": pooling,
            "image_size": self.image_size,
            "resize": "bilinear",
            "mean": self.mean,
            "std": self.std,
            "dtype": self.dtype,
        }
        if self.image_input != "normalised":  # off the default only: a default run's fingerprints stay
            fields["input"] = self.image_input
        if self.compute_dtype is not None:
            fields["compute_dtype"] = self.compute_dtype
        if self.activation is not None:  # off the default only, as input
            fields["activation"] = self.activation
        if (
            self.source != "timm"
        ):  # off the default only, as input: the network and weights of another library
            fields["source"] = f"{self.source}:{self.spec.torchvision}"
        if self.pos_embed != "timm":  # off the default only, as input
            fields["pos_embed"] = self.pos_embed
        if self.spec.normalize is not None:  # a declaration's own: L2-normalised pooled vectors, or not
            fields["normalize"] = self.spec.normalize
        return fields

    def preprocess(self, images: np.ndarray) -> torch.Tensor:
        """uint8 or float32 [n, C, H, W] -> float [n, 3, S, S] on the device: normalised, or 0-255
        (image_input raw). A float32 array is copied, never divided in place."""
        x = torch.from_numpy(np.ascontiguousarray(images)).to(self.device)
        x = x.clone() if x.dtype == torch.float32 else x.float()
        if self.image_input == "raw":
            if x.shape[1] == 1:
                x = x.expand(-1, 3, -1, -1)
            if x.shape[-2:] != (self.image_size, self.image_size):
                x = F.interpolate(
                    x, size=(self.image_size, self.image_size), mode="bilinear", align_corners=False
                )
            return x
        x = x.div_(255)
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)  # grayscale: the encoders were all trained on RGB
        if x.shape[-2:] != (self.image_size, self.image_size):
            x = F.interpolate(
                x, size=(self.image_size, self.image_size), mode="bilinear", align_corners=False
            )
        return (x - self._mean) / self._std

    @torch.inference_mode()
    def encode_batch(self, images: np.ndarray) -> np.ndarray:
        """One forward pass: pooled [n, D] float32 for uint8 or float32 images [n, C, H, W] (C = 1 or 3)."""
        images = np.asarray(images)
        if images.ndim != 4 or images.dtype not in (np.uint8, np.float32) or images.shape[1] not in (1, 3):
            raise DriftError(
                f"{self.spec.name} takes uint8 or float32 images [n, 1|3, H, W], "
                f"got {images.dtype} {list(images.shape)}"
            )
        if len(images) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        x = self.preprocess(images)
        # mixed precision on a GPU only (self.autocast): on the CPU the same code runs in float32
        with torch.autocast(
            self.device.split(":")[0],
            dtype=getattr(torch, self.autocast or "float32"),
            enabled=self.autocast is not None,
        ):
            pooled = self.model(x).float()
        if self.spec.normalize:
            pooled = F.normalize(pooled, dim=-1)
        return pooled.cpu().numpy()

    def encode(self, images: np.ndarray, on_batch=None) -> np.ndarray:
        """encode_batch over images in batches of self.batch_size; on_batch(n) after each. A CUDA
        out-of-memory error halves the batch size for the rest of the run and retries the batch."""
        pooled, start = [], 0
        while start < len(images):
            batch = images[start : start + self.batch_size]
            try:
                pooled.append(self.encode_batch(batch))
            except torch.cuda.OutOfMemoryError:
                if self.batch_size == 1:
                    raise
                self.batch_size //= 2
                torch.cuda.empty_cache()
                continue
            start += len(batch)
            if on_batch is not None:
                on_batch(len(batch))
        return np.concatenate(pooled) if pooled else np.zeros((0, self.dim), dtype=np.float32)

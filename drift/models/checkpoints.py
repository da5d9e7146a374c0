"""Checkpoints: where f_k of a model and seed is kept, how a head is built for a task, and how it is read
back.

The one place that names checkpoint files (`<models>/<model>/seed<s>/cutoff<kkk>.pt`) and builds the module a
checkpoint holds, so train, evaluate and saliency cannot disagree.

Two wrappers hold per-cutoff statistics in the checkpoint: regression heads are wrapped in `Standardised`
(they train on targets standardised per cutoff and map their outputs back to the rating scale), image models
in `PixelStandardised` (pixels standardised per channel). Each says why, with the measurement. `PixelScaled`
holds no statistic: it gives an image model the stored 0-255 values (the authors' scale).

A trained checkpoint also keeps its training's curve, the mean training loss of each epoch (`epoch_losses`),
in its state dict's metadata: it travels with the file's bytes, through the checkpoint cache too.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import cast

import numpy as np
import torch
import torch.nn as nn

from drift.core.errors import DriftError, disk_full, is_disk_full
from drift.models import InputSpec, create_model
from drift.models.inputs import Inputs


class _Wrapped(nn.Module):
    """A model around `inner` that keeps per-cutoff statistics as buffers, and answers to the registry's
    attributes (name, family, input_kind) as the model it wraps."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner
        for attr in ("name", "family", "input_kind"):
            if hasattr(inner, attr):
                setattr(self, attr, getattr(inner, attr))


class Standardised(_Wrapped):
    """A regression head whose raw output lives in standardised target units: forward returns
    inner(x) * scale + shift, with shift and scale the weighted mean and standard deviation of its cutoff's
    training targets (under the loss's weights w_r = n / n_r)."""

    shift: torch.Tensor  # buffers (register_buffer)
    scale: torch.Tensor

    def __init__(self, inner: nn.Module):
        super().__init__(inner)
        self.register_buffer("shift", torch.zeros(()))
        self.register_buffer("scale", torch.ones(()))

    def fit_scale(self, targets: torch.Tensor) -> None:
        y = targets.reshape(-1).double().numpy()
        _, inverse, counts = np.unique(y, return_inverse=True, return_counts=True)
        w = len(y) / counts[inverse]  # w_r = n / n_r, the loss's weights (eq. 5)
        mean = float(np.sum(w * y) / np.sum(w))
        std = float(np.sqrt(np.sum(w * (y - mean) ** 2) / np.sum(w)))
        self.shift.fill_(mean)
        self.scale.fill_(std if std > 1e-6 else 1.0)

    def forward(self, *args):
        return self.inner(*args) * self.scale + self.shift


class PixelStandardised(_Wrapped):
    """An image model reading pixels standardised per channel (not per pixel, so gradient saliency maps keep
    their spatial meaning) with its cutoff's training statistics."""

    mean: torch.Tensor  # buffers (register_buffer)
    std: torch.Tensor

    def __init__(self, inner: nn.Module, channels: int):
        super().__init__(inner)
        self.register_buffer("mean", torch.zeros(channels))
        self.register_buffer("std", torch.ones(channels))

    @torch.no_grad()
    def fit_inputs(self, batches) -> None:
        """Per-channel mean and std over the training rows, given as an iterable of [B, C, H, W] batches."""
        total: torch.Tensor | None = None
        total_sq: torch.Tensor | None = None
        n = 0
        for (x,) in batches:
            x = x.double().transpose(0, 1).reshape(x.shape[1], -1)
            total = x.sum(1) if total is None else total + x.sum(1)
            total_sq = (x * x).sum(1) if total_sq is None else total_sq + (x * x).sum(1)
            n += x.shape[1]
        if n:
            assert total is not None and total_sq is not None  # summed over the batches that gave the n rows
            mean = total / n
            # numpy's sqrt (IEEE, exact on every CPU), not torch's (MKL's vector math, CPU-dependent last
            # bits)
            std = torch.from_numpy(np.sqrt((total_sq / n - mean * mean).clamp(min=0).numpy()))
            self.mean.copy_(mean.float())
            self.std.copy_(torch.where(std > 1e-6, std, torch.ones_like(std)).float())

    def forward(self, x):
        return self.inner((x - self.mean[:, None, None]) / self.std[:, None, None])


class PixelScaled(_Wrapped):
    """An image model reading the stored 0-255 values (train.pixel_scale: raw, the authors' scale). It is
    handed them as stored (reading_inputs: Inputs.as_stored), never divided and multiplied back; the
    `pixel_factor` buffer (255, the scale against [0, 1]) marks a checkpoint as such (_wrappers)."""

    pixel_factor: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, inner: nn.Module, factor: float = 255.0):
        super().__init__(inner)
        self.register_buffer("pixel_factor", torch.tensor(float(factor)))

    def forward(self, x):
        return self.inner(x)


def reads_stored(model: nn.Module) -> bool:
    """Whether `model` reads pixels as stored (a PixelScaled anywhere in it), not divided by 255."""
    return any(isinstance(m, PixelScaled) for m in model.modules())


def reading_inputs(model: nn.Module, inputs: Inputs) -> Inputs:
    """`inputs` as `model` reads them: the stored pixel values for a model of train.pixel_scale raw, else as
    they are (pixels / 255, or not pixels)."""
    return inputs.as_stored() if reads_stored(model) else inputs


def build_model(
    name: str,
    spec: InputSpec,
    n_outputs: int,
    task_name: str,
    dropout: float = 0.0,
    standardise_targets: bool = True,
    standardise_pixels: bool = True,
    pixel_scale: str = "unit",
    modules: str = "ours",
    reference_C: dict | None = None,
) -> nn.Module:
    """The module a checkpoint of `name` holds for this task (untrained); `dropout` changes no parameter, so a
    checkpoint loads into the model built with any p; the wrappers as train.standardise_targets,
    train.standardise_pixels (both on by default; off in the paper presets, as the authors' runs) and
    train.pixel_scale (raw: PixelScaled outside PixelStandardised) say; `modules` as create_model's;
    `reference_C` (train.reference_C, {reference: cv | C}) the C a reference it names fits with (else its
    own)."""
    model = create_model(name, spec, n_outputs, dropout, modules)
    if getattr(model, "closed_form", False):  # the references standardise in their own closed form
        if reference_C and model.name in reference_C:  # a reference with a C (reference.py use_C)
            cast(Callable[[float | str], nn.Module], model.use_C)(reference_C[model.name])
        return model
    if spec.kind == "pixels" and standardise_pixels:
        model = PixelStandardised(model, spec.shape[0])
    if spec.kind == "pixels" and pixel_scale == "raw":
        model = PixelScaled(model)
    if task_name == "regression" and standardise_targets:
        return Standardised(model)
    return model


def _wrappers(state: dict) -> tuple[bool, bool, str]:
    """(targets standardised, pixels standardised, pixel scale) of a saved state dict: the wrappers' buffers
    at its top."""

    def wraps(prefix: str, buffers: tuple[str, ...]) -> bool:
        return all(prefix + b in state for b in buffers) and all(
            k in {prefix + b for b in buffers} or k.startswith(prefix + "inner.")
            for k in state
            if k.startswith(prefix)
        )

    targets = wraps("", ("shift", "scale"))
    prefix = "inner." if targets else ""
    raw = wraps(prefix, ("pixel_factor",))
    return targets, wraps(prefix + "inner." if raw else prefix, ("mean", "std")), "raw" if raw else "unit"


def chosen_C(path: Path) -> float | list | None:
    """The C a reference's checkpoint was fitted with (drift/models/reference.py `chosen_C`: a number, one per
    label for multilabel, None where nothing was fitted), from its state dict's metadata; None for any other
    checkpoint."""
    state = torch.load(path, weights_only=True)
    return getattr(state, "_metadata", {}).get("", {}).get("chosen_C")


# a trained model's attribute (keep_losses) and its checkpoint's metadata key: the mean training loss of each
# epoch
EPOCH_LOSSES = "epoch_losses"


def keep_losses(model: nn.Module, losses: list[float]) -> nn.Module:
    """`model` carrying its training's curve (the mean loss of each epoch, in order), which save_checkpoint
    keeps."""
    vars(model)[EPOCH_LOSSES] = [float(x) for x in losses]  # a plain attribute, as nn.Module keeps a list
    return model


def epoch_losses(path: Path) -> list[float] | None:
    """The mean training loss of each epoch of the checkpoint at `path`, from its state dict's metadata; None
    for one that has none (a reference's closed-form fit, or a checkpoint saved before curves were kept)."""
    state = torch.load(path, weights_only=True, mmap=True)  # mmap: the tensors are not read
    losses = getattr(state, "_metadata", {}).get("", {}).get(EPOCH_LOSSES)
    return None if losses is None else [float(x) for x in losses]


def checkpoint_path(models_dir: Path, model: str, seed: int, cutoff: int) -> Path:
    return Path(models_dir) / model / f"seed{seed}" / f"cutoff{cutoff:03d}.pt"


def list_checkpoints(models_dir: Path, model: str) -> dict[int, dict[int, Path]]:
    """{seed: {cutoff: path}} of the checkpoints written for a model, in order."""
    found: dict[int, dict[int, Path]] = {}
    for seed_dir in sorted((Path(models_dir) / model).glob("seed*"), key=lambda d: int(d.name[4:])):
        found[int(seed_dir.name[4:])] = {int(p.stem[6:]): p for p in sorted(seed_dir.glob("cutoff*.pt"))}
    return found


def loss_curves(models_dir: Path, model: str) -> dict[int, dict[int, list[float]]]:
    """{seed: {cutoff: its mean training loss of each epoch}} of a model's checkpoints that keep one
    (epoch_losses)."""
    return {
        seed: {k: curve for k, path in cutoffs.items() if (curve := epoch_losses(path)) is not None}
        for seed, cutoffs in list_checkpoints(models_dir, model).items()
    }


def save_checkpoint(model: nn.Module, path: Path) -> None:
    """Written whole or not at all: a full disk or a kill leaves no half checkpoint at `path` or beside it.
    The curve the model carries (keep_losses) goes into the state dict's metadata (epoch_losses reads it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # the same file name in a folder of its own: torch.save names the archive's records after the file
    tmp = path.parent / f".tmp-{os.getpid()}" / path.name
    tmp.parent.mkdir(exist_ok=True)
    state = model.state_dict()
    # the root module's metadata: load_state_dict ignores a key it does not read
    if EPOCH_LOSSES in vars(model):
        state._metadata[""][EPOCH_LOSSES] = vars(model)[EPOCH_LOSSES]  # type: ignore[attr-defined]
    try:
        torch.save(state, tmp)
        tmp.replace(path)
        tmp.parent.rmdir()
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        tmp.parent.rmdir()
        if is_disk_full(e) or (isinstance(e, RuntimeError) and "unexpected pos" in str(e)):
            # torch's writer reports a short write (ENOSPC) as "unexpected pos"
            raise disk_full(path, needed=sum(t.numel() * t.element_size() for t in state.values())) from None
        raise


def load_checkpoint(name: str, spec: InputSpec, n_outputs: int, task_name: str, path: Path) -> nn.Module:
    """The model a checkpoint holds. A file that is not a plain state dict (damaged, or a pickle of anything
    else) is a one-line DriftError naming it; it is never loaded another way (no weights_only=False)."""
    try:
        state = torch.load(path, weights_only=True)
        ok = isinstance(state, dict) and all(isinstance(v, torch.Tensor) for v in state.values())
        why = "" if ok else f"a {type(state).__name__}, not a state dict"
    except Exception as e:  # noqa: BLE001 - an unpickling error, a torn archive, a missing file: the same line
        why = type(e).__name__
    if why:
        raise DriftError(
            f"checkpoint {path} is not a plain state dict ({why}): delete it and run "
            f"`dvc repro -f train@<dataset>` to train or place it again"
        )
    targets, pixels, scale = _wrappers(state)  # the checkpoint says which wrappers it was trained in
    model = build_model(name, spec, n_outputs, task_name, 0.0, targets, pixels, scale)
    if set(state) != set(model.state_dict()):  # the authors' modules: other tensors (conv biases) or names
        authors = build_model(
            name, spec, n_outputs, task_name, 0.0, targets, pixels, scale, modules="authors"
        )
        model = authors if set(state) == set(authors.state_dict()) else model
    model.load_state_dict(state)
    return model.eval()

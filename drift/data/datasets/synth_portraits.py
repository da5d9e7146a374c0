"""Synthetic portraits with controllable drift: the testbed for the paper's Section 5.1 claim.

Each 3x32x32 image holds a background, a face-like ellipse and two small "eye" marks. The class (0/1) is told
by a strong local cue (eye marks vertical for class 1, horizontal for class 0, slightly shifted: a locality
prior picks it up quickly) and a weak global cue that never drifts (class 1 faces slightly brighter, noisy).
Drift over the slices, t from 0 to 1, each knob from 0 (off) to 1: covariate_drift (background colour and
stripes change), label_drift (the share of class 1 moves from 0.5 - label_drift/2 to 0.5 + label_drift/2),
concept_drift (both classes' marks rotate by concept_drift * t * 90 degrees: P(y | local cue) changes, the
global cue holds). Deterministic from `seed`; cfg (params.yaml `synth-portraits`): k, per_slice, seed,
start_year, covariate_drift, label_drift, concept_drift, global_cue, noise, pixels (the stored values, 0-255:
uint8 rounded, or float32 as drawn). Slice t is dated Jan 1 of start_year + t."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, ClassVar

import numpy as np

from drift.core.params import (
    DatasetParams,
    Float,
    Int,
    PositiveInt,
    SliceSpec,
    choice,
    slices_field,
)


class SynthPortraitsParams(DatasetParams):
    """params.yaml `synth-portraits:`."""

    SECTION: ClassVar[str] = "synth-portraits"
    k: PositiveInt = 8  # time slices, one a year from start_year
    start_year: Int = 2000
    per_slice: PositiveInt = 300
    seed: Int = 0
    covariate_drift: Float = 0.5  # 0 = off, 1 = strong
    label_drift: Float = 0.3
    concept_drift: Float = 1.0
    global_cue: Float = 0.06
    noise: Float = 0.12
    pixels: Annotated[str, choice("uint8", "float32")] = (
        "uint8"  # the stored 0-255 values: rounded, or as drawn
    )
    slices: SliceSpec = slices_field(unit="year", start=2000, end=2008)
    min_samples: PositiveInt = 40


PARAMS = SynthPortraitsParams
SIZE = 32
CUE = 7  # side of an eye mark, pixels


def label_names(cfg: dict) -> list[str]:
    return ["class-0", "class-1"]


def _bar(angle: float, size: int = 7) -> np.ndarray:
    """A size x size mask of a bar through the centre at `angle` radians (0 = horizontal)."""
    c = (size - 1) / 2
    yy, xx = np.mgrid[0:size, 0:size] - c
    # distance of each pixel from the line through the centre with direction (cos, sin)
    dist = np.abs(-np.sin(angle) * xx + np.cos(angle) * yy)
    return (dist <= 0.7).astype(np.float32)


def make_slice(t_index: int, cfg: SynthPortraitsParams) -> tuple[np.ndarray, np.ndarray]:
    """Images [n, 3, 32, 32] (0-255, dtype cfg.pixels) and labels int [n] of slice t_index, reproducible from
    cfg.seed (`cfg`: the synth-portraits section of params.yaml, drift.core.params or its mapping)."""
    k, n = cfg.k, cfg.per_slice
    t = t_index / max(k - 1, 1)
    rng = np.random.default_rng([cfg.seed, t_index])
    p1 = 0.5 + cfg.label_drift * (t - 0.5)
    labels = (rng.random(n) < p1).astype(np.int64)

    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32)
    # background: a colour and diagonal stripes whose hue and frequency move with covariate drift
    cov = cfg.covariate_drift * t
    hue = np.array([0.55 - 0.35 * cov, 0.45, 0.35 + 0.35 * cov], dtype=np.float32)
    stripes = 0.5 + 0.5 * np.sin((xx + yy) * (0.3 + 0.9 * cov))
    background = hue[:, None, None] * (0.75 + 0.25 * stripes)[None]

    face = (((xx - 15.5) / 9.0) ** 2 + ((yy - 16.5) / 12.0) ** 2 <= 1.0).astype(np.float32)
    angle_shift = cfg.concept_drift * t * np.pi / 2
    marks = {y: _bar((np.pi / 2 if y == 1 else 0.0) + angle_shift, CUE) for y in (0, 1)}
    global_cue, noise = cfg.global_cue, cfg.noise

    images = np.empty((n, 3, SIZE, SIZE), dtype=np.float32)
    for i in range(n):
        y = labels[i]
        skin = 0.55 + 0.1 * rng.standard_normal() + (global_cue if y == 1 else -global_cue)
        img = background * (1 - face) + skin * face
        dx, dy = rng.integers(-2, 3, size=2)
        for ex in (10, 21):  # two eyes, 11 px apart
            r0, c0 = 12 + dy - CUE // 2, ex + dx - CUE // 2
            img[:, r0 : r0 + CUE, c0 : c0 + CUE] -= 0.6 * marks[y][None]
        images[i] = img + noise * rng.standard_normal(img.shape).astype(np.float32)
    scaled = np.clip(images, 0, 1) * 255
    if getattr(cfg, "pixels", "uint8") == "float32":
        return scaled.astype(np.float32), labels
    return scaled.round().astype(np.uint8), labels


def read(cfg: SynthPortraitsParams, ledger):
    for t_index in range(cfg.k):
        images, labels = make_slice(t_index, cfg)
        when = dt.datetime(cfg.start_year + t_index, 1, 1)
        for i, (image, label) in enumerate(zip(images, labels)):
            yield {"id": f"synth-{t_index:03d}-{i:05d}", "time": when, "label": int(label), "image": image}


def planned_rows(cfg, n_slices: int) -> tuple[int, int, str]:
    """drift plan: (rows, non-empty slices, how it knows): the generator makes per_slice rows in each of its k
    years."""
    non_empty = min(cfg.k, n_slices)
    return cfg.per_slice * non_empty, non_empty, f"synth-portraits.per_slice x k = {non_empty}"

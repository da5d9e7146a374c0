"""The train stage's run record (TrainRun, .drift/runs/train/<dataset>.json)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from drift.core.artefact import Artefact, Executor, Number


class Recomputed(BaseModel):
    """Cached checkpoints that failed their checksum and were trained again."""

    model_config = ConfigDict(extra="forbid")

    corrupt: int


class TrainTiming(BaseModel):
    """One training task's time (the training loop's on_trained callback): its model, checkpoints trained,
    rows passed through (training rows x epochs) and seconds where it ran; `drift rehearse` reads them."""

    model_config = ConfigDict(extra="forbid")
    model: str
    checkpoints: int
    row_passes: int
    seconds: Number


class TrainRun(Artefact):
    """.drift/runs/train/<dataset>.json: checkpoints trained and copied from the cache, the cached ones
    trained again because they failed their checksum, the executor and its workers, each model's engine (solo
    or batched); `timings`: seconds per training task, when the run timed them."""

    WRITER = "train"
    WHAT = "train run record"

    dataset: str
    trained: int
    reused: int
    recomputed: Recomputed
    executor: Executor
    workers: int
    engines: dict[str, Literal["solo", "batched"]]
    timings: list[TrainTiming] | None = None

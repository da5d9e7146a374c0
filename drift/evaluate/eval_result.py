"""What the evaluate stage writes: one EvalResult per model (data/eval/<dataset>/<model>.json, a DVC output
the report stage reads) and its run record (EvaluateRun, .drift/runs/evaluate/<dataset>.json)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from drift.core.artefact import Artefact, Executor, MetricName, Number
from drift.core.errors import DriftError
from drift.protocol.matrix import from_json
from drift.protocol.summary import mean_over_seeds

# a K x K drift matrix as JSON rows: cell (i, j) rounded to 6 digits, null for a cell no metric scores
MatrixRows = list[list[Number | None]]
EstimateMethod = Literal["atc", "doc"]  # drift.evaluate.estimate.METHODS
ClassMetric = Literal["recall", "auc", "mse"]
# what a cell's per-class scores are, per task (drift.evaluate.fill_matrices.class_scores)
CLASS_METRICS: dict[str, ClassMetric] = {
    "binary": "recall",
    "multiclass": "recall",
    "multilabel": "auc",
    "regression": "mse",
}
MAX_RATINGS = 20  # a regression target with more distinct values is no set of ratings: no per-class scores


class ClassScores(BaseModel):
    """An eval file's `per_class`: each class's own score of every cell (`metric`: binary and multiclass the
    recall of each class, multilabel each label's AUC, regression the MSE of each rating), per seed one K x K
    matrix per class, in the order of `classes` (the slice manifest's label names, or the ratings); and the
    confusion counts of one cell (`cell`: [i, j], the last cutoff on the last usable slice) per seed."""

    model_config = ConfigDict(extra="forbid")

    metric: ClassMetric
    classes: list[str]
    seeds: dict[str, list[MatrixRows]]
    cell: list[int] | None = None
    confusion: dict[str, list[list[int]]] | None = None


class EvalResult(Artefact):
    """data/eval/<dataset>/<model>.json: the model's drift matrices, one per seed (`seeds`: {seed: K x K
    rows}), with what a reader needs to interpret them: its family, the metric and its direction, the slice
    labels and which slices are usable; `estimated`: the label-free estimates of each matrix ({method: {seed:
    rows}}, no method for a task without one); `also`: the task's other metrics' matrices (multiclass:
    macro_f1); `per_class`: each class's score of every cell and one cell's confusion counts (ClassScores;
    absent from older files)."""

    WRITER = "evaluate"
    WHAT = "drift-matrix file"

    dataset: str
    model: str
    family: str
    metric: MetricName
    higher_is_better: bool
    labels: list[str]
    usable: list[bool]
    seeds: dict[str, MatrixRows]
    estimated: dict[EstimateMethod, dict[str, MatrixRows]]
    also: dict[MetricName, dict[str, MatrixRows]] | None = None
    per_class: ClassScores | None = None

    @cached_property
    def per_seed(self) -> list[np.ndarray]:
        """The matrices, one per seed, NaN for an empty cell."""
        return [from_json(m) for m in self.seeds.values()]

    @cached_property
    def matrix(self) -> np.ndarray:
        """The seeds' cell-wise mean."""
        return mean_over_seeds(self.per_seed)


def read_eval(eval_dir: Path, model: str) -> EvalResult:
    """data/eval/<dataset>/<model>.json, validated, with at least one seed; else one DriftError line."""
    dataset = Path(eval_dir).name
    path = Path(eval_dir) / f"{model}.json"
    if not path.exists():
        raise DriftError(f"no drift matrices at {path}: run `dvc repro evaluate@{dataset}` first")
    result = EvalResult.from_file(path, dataset)
    if not result.seeds:
        raise DriftError(f"{path} holds no seed: re-run `dvc repro evaluate@{dataset}`")
    return result


class CellCounts(BaseModel):
    model_config = ConfigDict(extra="forbid")

    computed: int
    reused: int


class Recomputed(BaseModel):
    """Cached results that failed their checksum and were computed again."""

    model_config = ConfigDict(extra="forbid")

    corrupt: int


class EvaluateTiming(BaseModel):
    """One (model, seed) evaluation's time (evaluate_roster's on_evaluated callback): checkpoints, rows
    predicted, cells scored and seconds where it ran; `drift rehearse` reads them."""

    model_config = ConfigDict(extra="forbid")
    model: str
    seed: int
    checkpoints: int
    rows: int
    cells: int
    seconds: Number


class EvaluateRun(Artefact):
    """.drift/runs/evaluate/<dataset>.json: cells computed and reused (and the label-free estimates alike),
    the cached cells recomputed because they failed their checksum, the executor and its workers; `timings`:
    seconds per (model, seed) task, when the run timed them."""

    WRITER = "evaluate"
    WHAT = "evaluate run record"

    dataset: str
    computed: int
    reused: int
    estimates: CellCounts
    recomputed: Recomputed
    executor: Executor
    workers: int
    timings: list[EvaluateTiming] | None = None

"""What the report stage writes per model: ModelMetrics (metrics/<dataset>/<model>.json, a DVC metric
committed to git), read back by drift.report.results, the CLI and `dvc metrics show`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from drift.core.artefact import Artefact, MetricName, Number

Stat = Number | None  # None: no filled cell in the region
Interval = tuple[Stat, Stat]


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class IdFutureDecay(_Part):
    id: Stat
    future: Stat
    decay: Stat


class WildTime(_Part):
    """Wild-Time's Eval-Fix (trained through `eval_fix_split`) and Eval-Stream (the next period)."""

    eval_fix_split: int | None
    eval_fix_average: Stat
    eval_fix_worst: Stat
    eval_stream_average: Stat
    eval_stream_worst: Stat
    eval_fix_split_label: str | None = None


class Clear(_Part):
    """CLEAR's in-domain, next-domain, backward and forward transfer."""

    in_domain: Stat
    next_domain: Stat
    backward_transfer: Stat
    forward_transfer: Stat


class Protocols(_Part):
    """The peers' summaries of the same seed-averaged matrix (drift.protocol.peers)."""

    wild_time: WildTime = Field(alias="wild-time")
    clear: Clear


class Estimate(_Part):
    """The label-free estimate of the matrix (ATC where the task has it, else DoC) and its mean absolute error
    over the future cells."""

    method: Literal["atc", "doc"]
    mae_future: Stat


class ModelMetrics(Artefact):
    """metrics/<dataset>/<model>.json: ID, Future and Decay of the seed-averaged matrix (decay positive = a
    loss, whatever the metric's direction), their seed spread (std, None with one seed; a bootstrap 95%
    interval), the metric and its direction, k slices, the seeds, the family, whether it is a reference; the
    peers' summaries, the task's other metrics (`also`); for a model that is not a reference its ID margins
    over the references (positive = better; None when that reference is absent) and `beats_prior`; for
    baseline-linear and baseline-tfidf the C each cutoff's fit used (`chosen_C`, train.reference_C); the
    dvc.lock hash the numbers came from (and cpu_path "native" when that CPU path computed them), and the
    label-free estimate's error."""

    WRITER = "report"
    WHAT = "metrics file"

    id: Stat
    future: Stat
    decay: Stat
    metric: MetricName
    higher_is_better: bool
    k: int
    seeds: int
    family: str
    reference: bool
    id_std: Stat
    future_std: Stat
    decay_std: Stat
    id_ci95: Interval
    future_ci95: Interval
    decay_ci95: Interval
    protocols: Protocols
    also: dict[MetricName, IdFutureDecay] | None = None
    margin_prior: Stat = None
    margin_linear: Stat = None
    margin_tfidf: Stat = None
    beats_prior: bool | None = None
    # baseline-linear / baseline-tfidf: the C each cutoff's fit used, in cutoff order (a list per label for
    # multilabel; None where nothing was fitted), from the checkpoints (drift.models.checkpoints.chosen_C)
    chosen_C: list[Number | list[Number | None] | None] | None = None
    lock_sha256: str | None  # None: no dvc.lock
    cpu_path: Literal["native"] | None = (
        None  # set on compute.cpu_path native only (drift/core/environment.py)
    )
    estimate: Estimate | None = None

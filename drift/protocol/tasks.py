"""Task kinds: what a head outputs, its loss and its drift-matrix metric (paper Sections 4.3-4.4, Appendix B).

| task       | dataset        | outputs  | loss                                       | metric       | better |
| ---------- | -------------- | -------- | ------------------------------------------ | ------------ | ------ |
| binary     | Yearbook       | 2 logits | cross-entropy (two-class softmax)          | accuracy     | higher |
| multiclass | a table        | C logits | cross-entropy (C-class softmax)            | accuracy     | higher |
| regression | Amazon Reviews | 1 value  | weighted MSE, w_r = n / n_r (eq. 4-5)      | balanced_mse | lower  |
| multilabel | arXiv          | C logits | BCE with logits, w_c = neg / pos (eq. 2-3) | macro_auc    | higher |

Multiclass also reports macro-F1 (`also`). The class weights are fixed once per training cutoff from its
whole (cumulative) training set: `loss = task.loss(train_targets)`, then `loss(outputs, targets)` per batch.
How a cell is scored follows params.yaml `evaluate:` (`Task.scoring`): `empty_cell`, what a cell with no rows
reads (drift.protocol.metrics.empty_score), and `auc_scores`, what macro AUC ranks (the logits, or
`sigmoid32`: float32 sigmoids of them, as the authors' code computes them)."""

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F

from drift.core.artefact import MetricName, TaskName
from drift.core.errors import DriftError, close_matches
from drift.protocol.metrics import METRICS, empty_score

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
AUC_SCORES = ("logits", "sigmoid32")  # evaluate.auc_scores


def _as_numpy(labels) -> np.ndarray:
    """Labels as stored (list, numpy, torch, pyarrow; ints, floats or lists of 0/1) -> a numpy array."""
    if isinstance(labels, torch.Tensor):
        return labels.detach().cpu().numpy()
    if hasattr(labels, "to_pylist"):  # pyarrow Array / ChunkedArray
        labels = labels.to_pylist()
    arr = np.asarray(labels)
    if arr.dtype == object:  # ragged or nested sequences, e.g. a column of lists
        try:
            arr = np.stack([np.asarray(x, dtype=np.float64) for x in arr])
        except ValueError as e:
            raise DriftError(f"labels have unequal lengths or odd types ({e}); check the label column") from e
    return arr


def sigmoid32(logits) -> np.ndarray:
    """Float32 sigmoids of the logits, as the authors score macro AUC: torch.sigmoid on float32 outputs.
    Logits past about 17 all round to 1.0, so rows the logits order become ties."""
    return torch.sigmoid(torch.as_tensor(np.asarray(logits), dtype=torch.float32)).numpy()


def class_weights(Y: torch.Tensor) -> torch.Tensor:
    """Multi-label positive weights w_c = |{i: y_ic = 0}| / |{i: y_ic = 1}| (eq. 3). A class with no positives
    gets 1.0 (nothing to up-weight); a class that is always positive gets 0.0, as the formula says."""
    Y = Y.reshape(len(Y), -1).to(torch.float64)
    pos = Y.sum(0)
    neg = len(Y) - pos
    return torch.where(pos > 0, neg / pos.clamp(min=1), torch.ones_like(pos)).to(torch.float32)


def rating_weights(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Regression weights w_r = n / n_r (eq. 5) for each rating r in the training targets.
    Returns (levels, weights): the sorted distinct ratings and their weights."""
    y = y.reshape(-1).to(torch.float32)
    levels, counts = torch.unique(y, return_counts=True)  # sorted
    return levels, (len(y) / counts.to(torch.float64)).to(torch.float32)


@dataclass(frozen=True)
class Task:
    name: TaskName
    metric: MetricName  # the primary one
    higher_is_better: bool
    # more metrics of METRICS reported beside the primary, each its own matrix
    also: tuple[MetricName, ...] = ()
    empty_cell: str = "empty"  # evaluate.empty_cell: what a cell with no rows reads (`empty_score`)
    auc_scores: str = "logits"  # evaluate.auc_scores: what macro AUC ranks

    def scoring(self, empty_cell: str, auc_scores: str) -> "Task":
        """This task scoring under evaluate.empty_cell and evaluate.auc_scores; a value outside their choices
        is a one-line DriftError."""
        empty_score(self.metric, empty_cell)  # checks empty_cell
        if auc_scores not in AUC_SCORES:
            raise DriftError(f"evaluate.auc_scores is {auc_scores!r}: write one of {', '.join(AUC_SCORES)}")
        return replace(self, empty_cell=empty_cell, auc_scores=auc_scores)

    def empty_score(self) -> float | None:
        """What a cell with no rows reads: None (empty), or 0.0 under empty_cell "zero" where the metric has
        one."""
        return empty_score(self.metric, self.empty_cell)

    def cached_as(self, what: str) -> str:
        """What the cell cache calls `what` (a metric, "estimates", "calibration") of this task: with
        "/sigmoid32" when macro AUC ranks float32 sigmoids (a multilabel task's estimates anchor on that AUC),
        else the plain name, the key every cache written before holds. empty_cell changes no cached value:
        the cache holds only cells with rows."""
        return f"{what}/sigmoid32" if self.metric == "macro_auc" and self.auc_scores == "sigmoid32" else what

    def n_outputs(self, n_labels: int) -> int:
        """Width of the head: 2 logits (two-class softmax), 1 rating, or one logit per class or label."""
        return {"binary": 2, "multiclass": n_labels, "regression": 1, "multilabel": n_labels}[self.name]

    def loss(self, train_targets: torch.Tensor) -> Loss:
        """The training loss of Section 4.3, its weights computed once from the cutoff's whole training set."""
        if self.name in ("binary", "multiclass"):
            return lambda outputs, targets: F.cross_entropy(outputs, targets)

        if len(train_targets) == 0:
            raise DriftError(
                f"{self.name} loss: the training set is empty, so its class weights are undefined"
            )

        if self.name == "regression":
            levels, weights = rating_weights(train_targets)

            def weighted_mse(outputs, targets):
                # L = 1/n sum_i w_{y_i} (y_i - yhat_i)^2 (eq. 4); a rating unseen in training has weight 0.
                outputs, targets = outputs.reshape(-1), targets.reshape(-1).to(outputs.dtype)
                lv, w = levels.to(outputs.device), weights.to(outputs.device, outputs.dtype)
                idx = torch.searchsorted(lv, targets.to(lv.dtype)).clamp(max=len(lv) - 1)
                wi = torch.where(lv[idx] == targets.to(lv.dtype), w[idx], torch.zeros_like(w[idx]))
                return (wi * (outputs - targets) ** 2).mean()

            return weighted_mse

        if self.name == "multilabel":
            pos_weight = class_weights(train_targets)

            def weighted_bce(outputs, targets):
                # eq. 2 with w_c on the positive term. PyTorch's mean runs over n*C terms where eq. 2 sums
                # over classes: a constant factor 1/C, which Adam/AdamW updates do not see.
                return F.binary_cross_entropy_with_logits(
                    outputs,
                    targets.to(outputs.dtype),
                    pos_weight=pos_weight.to(outputs.device, outputs.dtype),
                )

            return weighted_bce

        raise DriftError(f"unknown task {self.name!r}; {close_matches(self.name, TASKS)}")

    def score(self, y, outputs) -> float | None:
        """The task's metric (Appendix B) on raw model outputs, macro AUC on their float32 sigmoids under
        auc_scores "sigmoid32"; None when the cell cannot be scored."""
        outputs = _as_numpy(outputs)
        if self.metric == "macro_auc" and self.auc_scores == "sigmoid32":
            outputs = sigmoid32(outputs)
        return METRICS[self.metric](_as_numpy(y), outputs)

    def target_tensor(self, labels) -> torch.Tensor:
        """Labels as stored -> the tensor the loss expects: int64 [n] class ids, float32 [n] ratings, or
        float32 [n, C] 0/1 label vectors."""
        y = _as_numpy(labels)
        if self.name == "binary":
            if y.size and not np.isin(y, (0, 1)).all():
                raise DriftError(f"binary labels must be 0 or 1, got values {np.unique(y)[:5].tolist()}")
            return torch.as_tensor(y.reshape(-1).astype(np.int64))
        if self.name == "multiclass":
            if y.size and not (np.issubdtype(y.dtype, np.integer) and y.min() >= 0):
                raise DriftError(
                    f"multiclass labels must be class ids 0..C-1, got values {np.unique(y)[:5].tolist()}"
                )
            return torch.as_tensor(y.reshape(-1).astype(np.int64))
        if self.name == "regression":
            y = y.astype(np.float32).reshape(-1)
            if not np.isfinite(y).all():
                raise DriftError("regression labels contain NaN or inf; clean the rating column")
            return torch.as_tensor(y)
        if self.name == "multilabel":
            if y.ndim != 2:
                raise DriftError(f"multilabel labels must be [n, C] lists of 0/1, got shape {y.shape}")
            if y.size and not np.isin(y, (0, 1)).all():
                raise DriftError("multilabel labels must hold only 0 and 1")
            return torch.as_tensor(y.astype(np.float32))
        raise DriftError(f"unknown task {self.name!r}; {close_matches(self.name, TASKS)}")


TASKS = {
    "binary": Task("binary", "accuracy", higher_is_better=True),
    "multiclass": Task("multiclass", "accuracy", higher_is_better=True, also=("macro_f1",)),
    "regression": Task("regression", "balanced_mse", higher_is_better=False),
    "multilabel": Task("multilabel", "macro_auc", higher_is_better=True),
}


def get_task(name: str) -> Task:
    """The task called `name`; an unknown name is a DriftError listing the close matches."""
    if name not in TASKS:
        raise DriftError(f"unknown task {name!r}; {close_matches(name, TASKS)}")
    return TASKS[name]

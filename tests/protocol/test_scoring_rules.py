"""params.yaml `evaluate:`, how a drift matrix's cells are scored: `empty_cell` (a cell with no rows left
empty, or 0.0 as the authors' code scores an empty set) and `auc_scores` (macro AUC of the logits, or of their
float32 sigmoids as the authors'); the cell cache never serves a cell scored under one rule to the other;
`drift paper yearbook` sets our run beside the published one under the published rule."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from drift.core.errors import DriftError
from drift.core.params import EvaluateParams
from drift.core.stage import write_json
from drift.evaluate.fill_matrices import EvalJob, evaluate_seed
from drift.models import get_model_info
from drift.models.checkpoints import list_checkpoints
from drift.protocol.matrix import drift_matrix, to_json
from drift.protocol.summary import id_future_decay
from drift.protocol.tasks import get_task
from drift.report.published import load_published
from drift.store.cells import code_version, row_hashes
from drift.store.slices import hand_manifest
from drift.train.loop import train_roster
from tests.helpers import drift_cli
from tests.train.test_engine import CFG, N, make_inputs

# four slices; slice 1 is a one-portrait year: kept (trainable) but with no test row, so not usable
SLICES = np.array([0, 0, 0, 1, 2, 2, 2, 3, 3, 3])
SPLITS = np.array(["train", "test", "test", "train", "train", "test", "test", "train", "test", "test"])
USABLE, TRAINABLE = [True, False, True, True], [True, True, True, True]


def test_a_slice_without_test_rows_scored_both_ways():
    labels = np.array([0, 1, 0, 1, 1, 0, 1, 0, 1, 1])
    logits = np.stack([1 - labels, labels], axis=1).astype(np.float32)  # every prediction right
    outputs = {i: logits for i in range(4)}
    binary = get_task("binary")
    empty = drift_matrix(outputs, labels, SLICES, SPLITS, USABLE, binary, trainable=TRAINABLE)
    zero = drift_matrix(
        outputs, labels, SLICES, SPLITS, USABLE, binary.scoring("zero", "logits"), trainable=TRAINABLE
    )
    assert np.isnan(empty[:, 1]).all()
    # the cells with no rows, (i, 1) for i >= 1, read 0.0; (0, 1), the future, has a row but its column is not
    # usable: empty under both rules, as is every other cell unchanged
    assert zero[1:, 1].tolist() == [0.0, 0.0, 0.0] and np.isnan(zero[0, 1])
    keep = np.ones((4, 4), dtype=bool)
    keep[1:, 1] = False
    np.testing.assert_array_equal(zero[keep], empty[keep])
    # the diagonal's 0.0 enters ID (and Decay); the cells below it enter neither
    a, b = id_future_decay(empty, True), id_future_decay(zero, True)
    assert (a["id"], b["id"]) == (1.0, 0.75) and a["future"] == b["future"] == 1.0
    assert (a["decay"], b["decay"]) == (0.0, -0.25)
    # macro-F1 scores an empty set 0.0 too (the authors' f1_score_macro of an all-zero confusion matrix)
    f1 = drift_matrix(
        outputs,
        labels,
        SLICES,
        SPLITS,
        USABLE,
        replace(binary.scoring("zero", "logits"), metric="macro_f1"),
        trainable=TRAINABLE,
    )
    assert f1[1:, 1].tolist() == [0.0, 0.0, 0.0]
    # a slice below min_samples (not trainable) stays empty in every matrix, whatever the rule
    small = drift_matrix(
        outputs,
        labels,
        SLICES,
        SPLITS,
        USABLE,
        binary.scoring("zero", "logits"),
        trainable=[True, False, True, True],
    )
    np.testing.assert_array_equal(small, empty)
    # a row with no model (an untrained cutoff) gets no 0.0 either
    partial = drift_matrix(
        {0: logits, 3: logits},
        labels,
        SLICES,
        SPLITS,
        USABLE,
        binary.scoring("zero", "logits"),
        trainable=TRAINABLE,
    )
    assert partial[3, 1] == 0.0 and np.isnan(partial[1:3]).all()


def test_balanced_mse_and_macro_auc_keep_an_empty_cell_empty():
    """The authors' balanced MSE and macro AUC of an empty set are NaN, left out of their logs: empty under
    both rules (a 0.0 would read as a perfect MSE, or an AUC below chance)."""
    ratings = np.array([1, 5, 3, 4, 2, 5, 1, 3, 4, 2], dtype=np.float32)
    regression = get_task("regression").scoring("zero", "logits")
    assert regression.empty_score() is None
    M = drift_matrix(
        {i: ratings.reshape(-1, 1) for i in range(4)},
        ratings,
        SLICES,
        SPLITS,
        USABLE,
        regression,
        trainable=TRAINABLE,
    )
    assert np.isnan(M[:, 1]).all() and np.isfinite(M[:, [0, 2, 3]]).all()
    assert get_task("multilabel").scoring("zero", "sigmoid32").empty_score() is None
    assert (
        get_task("binary").empty_score() is None
        and get_task("multiclass").scoring("zero", "logits").empty_score() == 0.0
    )


def test_a_rule_outside_the_choices_is_a_one_line_error():
    for args, where in (
        (("nought", "logits"), "evaluate.empty_cell is 'nought': write one of empty, zero"),
        (("zero", "sigmoid"), "evaluate.auc_scores is 'sigmoid': write one of logits, sigmoid32"),
    ):
        with pytest.raises(DriftError) as e:
            get_task("binary").scoring(*args)
        assert str(e.value) == where


def authors_macro_auc(Y: np.ndarray, logits: np.ndarray) -> float:
    """The authors' way: torch.sigmoid on float32 outputs, then scikit-learn's roc_auc_score per class with
    both a positive and a negative, averaged."""
    probs = torch.sigmoid(torch.from_numpy(logits.astype(np.float32))).numpy()
    return float(
        np.mean(
            [
                roc_auc_score(Y[:, c], probs[:, c])
                for c in range(Y.shape[1])
                if Y[:, c].min() == 0 and Y[:, c].max() == 1
            ]
        )
    )


def test_sigmoid32_auc_is_the_authors_and_differs_from_the_logits_where_sigmoids_tie():
    task = get_task("multilabel")
    sigmoid32 = task.scoring("empty", "sigmoid32")
    # class 0: positives at logits 20 and 18, negatives at 17.5 and 0; all three above 17 round to 1.0 in
    # float32
    Y = np.array([[1, 0], [1, 1], [0, 0], [0, 1]])
    logits = np.array([[20.0, -3.0], [18.0, 2.0], [17.5, -1.0], [0.0, 1.0]], dtype=np.float32)
    assert task.score(Y, logits) == 1.0
    assert sigmoid32.score(Y, logits) == authors_macro_auc(Y, logits) == pytest.approx((0.75 + 1.0) / 2)
    # large margins: many positives tie at 1.0, the AUC moves; with small ones the two agree
    rng = np.random.default_rng(3)
    Y = (rng.random((400, 5)) < 0.3).astype(int)
    wide = np.where(Y == 1, rng.normal(14, 6, Y.shape), rng.normal(-4, 9, Y.shape)).astype(np.float32)
    assert sigmoid32.score(Y, wide) == pytest.approx(authors_macro_auc(Y, wide), abs=1e-12)
    assert sigmoid32.score(Y, wide) != task.score(Y, wide)
    narrow = wide / 8
    assert sigmoid32.score(Y, narrow) == pytest.approx(task.score(Y, narrow), abs=1e-12)
    assert (
        task.cached_as("macro_auc") == "macro_auc"
        and sigmoid32.cached_as("macro_auc") == "macro_auc/sigmoid32"
    )
    assert get_task("binary").scoring("zero", "sigmoid32").cached_as("accuracy") == "accuracy"


class Rows:
    """What train_roster and evaluate_seed read of a SliceData: four slices of synthetic pooled rows, slice 1
    without a test row (trainable, not usable) for a binary task."""

    def __init__(self, task: str):
        rng = np.random.default_rng(11)
        self.task = get_task(task)
        self.slices = np.repeat(np.arange(4), N // 4)
        self.splits = np.where(rng.random(N) < 0.7, "train", "test").astype(object)
        if task == "binary":
            self.labels = rng.integers(0, 2, N).tolist()
            self.splits[self.slices == 1] = "train"
            self.usable, names = [True, False, True, True], ["0", "1"]
        else:
            self.labels = (rng.random((N, 3)) < 0.4).astype(int).tolist()
            self.usable, names = [True] * 4, ["a", "b", "c"]
        self.manifest = hand_manifest("rows", ["0", "1", "2", "3"], task=task, label_names=names)
        self.row_hashes = row_hashes([f"key{i}" for i in range(N)], self.labels, self.splits)
        self.paths = {"slices": Path("."), "features": Path(".")}
        self.modality = "text"
        self.n_outputs = self.task.n_outputs(len(names))
        self._inputs = make_inputs("pooled", rng)

    def inputs(self, name):
        return self._inputs

    def usable_rows(self):
        return np.arange(N)

    def input_id(self, name):
        return "pooled"


@pytest.mark.compute
@pytest.mark.parametrize(
    "task, rules", [("binary", ("empty", "zero")), ("multilabel", ("logits", "sigmoid32"))]
)
def test_the_cell_cache_never_serves_a_cell_scored_under_the_other_rule(tmp_path, task, rules):
    data = Rows(task)
    train_roster(data, ["baseline-linear"], CFG.model_copy(update={"seeds": [0]}), tmp_path / "models")
    checkpoints = list_checkpoints(tmp_path / "models", "baseline-linear")[0]
    field = "empty_cell" if task == "binary" else "auc_scores"

    def evaluate(rule: str):
        job = EvalJob(
            data,
            "baseline-linear",
            0,
            checkpoints,
            tmp_path / "cells",
            1,
            code_version("evaluate"),
            rules=EvaluateParams(**{field: rule}),
        )
        matrix, _, counts, _ = evaluate_seed(job)
        return matrix, counts

    default, counts = evaluate(rules[0])
    cells = counts["computed"]
    assert counts["reused"] == 0 and cells == sum(data.usable) * 4
    other, counts = evaluate(rules[1])
    if task == "binary":
        # the cache holds only cells with rows: each is the same under both rules and read back; the cells
        # without rows are the rule's, never cached
        assert (counts["computed"], counts["reused"]) == (0, cells)
        assert [row[1] for row in default] == [None] * 4 and [row[1] for row in other] == [
            None,
            0.0,
            0.0,
            0.0,
        ]
    else:
        # macro AUC of float32 sigmoids is cached under its own key: every cell computed again
        assert (counts["computed"], counts["reused"]) == (cells, 0)
    again, counts = evaluate(rules[0])
    assert again == default and (counts["computed"], counts["reused"]) == (0, cells)
    # each matches its rule scored from scratch
    for rule, matrix in ((rules[0], default), (rules[1], other)):
        fresh = EvalJob(
            data,
            "baseline-linear",
            0,
            checkpoints,
            tmp_path / f"fresh-{rule}",
            1,
            code_version("evaluate"),
            rules=EvaluateParams(**{field: rule}),
        )
        assert evaluate_seed(fresh)[0] == matrix


def write_eval(root: Path, model: str, matrix: np.ndarray, labels: list[str]):
    """Our evaluate stage's output, data/eval/yearbook/<model>.json, as stages/evaluate.py writes it."""
    write_json(
        root / "data" / "eval" / "yearbook" / f"{model}.json",
        {
            "dataset": "yearbook",
            "model": model,
            "family": get_model_info(model).family,
            "metric": "accuracy",
            "higher_is_better": True,
            "labels": labels,
            "usable": [x != "1924" for x in labels],
            "seeds": {"0": to_json(matrix)},
            "estimated": {},
        },
    )


@pytest.mark.parametrize("ours", ["empty", "zero"])
def test_drift_paper_yearbook_compares_like_with_like(tmp_path, ours):
    data = load_published("yearbook")
    pub = next(m for m in data["models"] if m["name"] == "cnn-s")
    K, j = len(data["slices"]), data["slices"].index("1924")
    assert (pub["matrix"][j:, j] == 0).all()  # the published rule: 0.0 from row 1924 on
    matrix = pub["matrix"] / 100
    matrix[:j, j] = np.nan  # our protocol: 1924 has no test row, so its column is not usable
    if ours == "empty":
        matrix[j:, j] = np.nan
    write_eval(tmp_path, "cnn-s", matrix, data["slices"])
    result = json.loads(drift_cli("paper", "yearbook", "--root", tmp_path, "--json").stdout)
    assert result["empty_cells"] == {"published": "zero", "slices": ["1924"], "ours": [ours]}
    row = next(r for r in result["models"] if r["model"] == "cnn-s")
    # under the same rule the IDs agree; our run left empty would otherwise read ID x 104 / 103
    assert row["ours"]["id"] == pytest.approx(row["published"]["id"], abs=1e-9)
    assert row["published"]["id"] == pytest.approx(pub["printed"]["id"], abs=0.05)
    assert row["cells"] == K * K - j  # every cell but the 14 future ones of column 1924
    text = " ".join(drift_cli("paper", "yearbook", "--root", tmp_path).stdout.split())
    said = {
        "empty": "; our run left them empty (empty_cell: empty): re-scored to 0.0 here, as empty_cell: zero "
        "writes them",
        "zero": ", as did our run: compared as they are",
    }[ours]
    assert (
        "empty test sets (slice 1924, from row 1924 on): the paper scores them 0.0 (evaluate.empty_cell: "
        f"zero){said}"
    ) in text
    if ours == "empty":  # the report's paper section says the same
        from drift.report.html import _paper

        assert (
            "Empty test sets (slice 1924, from row 1924 on): the paper scores them 0.0"
            in _paper("yearbook", tmp_path)["empty_cells"]
        )


def test_the_published_zero_cells_are_exactly_1924_from_its_own_row_on():
    """The evidence behind EMPTY_TEST: in every published Yearbook matrix the column of 1924 reads 0.0 from
    row 1924 on, and no other column is 0.0 on and below its diagonal in every model."""
    data = load_published("yearbook")
    stack = np.stack([m["matrix"] for m in data["models"]])
    K = len(data["slices"])
    zero = [data["slices"][j] for j in range(K) if (stack[:, j:, j] == 0).all()]
    assert zero == ["1924"]

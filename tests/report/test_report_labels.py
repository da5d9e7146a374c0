"""The labels in sight: a multiclass and a multi-label dataset run through the evaluate stage's code
(closed-form references on synthetic rows) and the report stage's, without a pipeline. The page names the
classes as the data has them (a hostile name escaped), the label shares per slice match the table's, each
class's scores match a direct computation from the models' predictions, and the shift analysis' novel rows are
in the page."""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from sklearn.metrics import roc_auc_score

from drift.core.params import TrainParams
from drift.evaluate.fill_matrices import evaluate_roster
from drift.evaluate.predict import predict
from drift.models.checkpoints import list_checkpoints, load_checkpoint
from drift.models.inputs import Inputs
from drift.protocol.matrix import eval_rows, from_json
from drift.protocol.summary import id_future_decay, mean_over_seeds
from drift.protocol.tasks import get_task
from drift.report.html import EXAMPLE_CHARS, write_html_report
from drift.report.labels import class_summary, load_classes
from drift.report.outputs import write_dataset_report
from drift.store.cells import ResultCache, row_hashes
from drift.store.slices import hand_manifest, write_slice_table
from drift.train.loop import train_roster
from tests.helpers import drift_cli

N, K = 320, 4
SLICES = ["2020", "2021", "2022", "2023"]
MODELS = ["baseline-prior", "baseline-linear"]
CFG = TrainParams(epochs=1, batch_size=32, lr=1e-3, weight_decay=0.0, seeds=[0, 1])
HOSTILE = "<script>alert(1)</script>"
NAMES = {
    "multiclass": ["feat", "fix", "[bold]docs[/bold]", HOSTILE],  # gitmoji-like classes
    "multilabel": ["src/", "tests/", "$x^$", HOSTILE],  # "touched this folder" labels; $x^$: mathtext
}


class Rows:
    """What train_roster and evaluate_roster read of a SliceData: K slices of synthetic pooled rows whose
    labels follow the features and whose prior drifts from slice to slice."""

    def __init__(self, task: str):
        rng = np.random.default_rng(7)
        self.name = f"mine-{task}"
        self.task = get_task(task)
        self.slices = np.repeat(np.arange(K), N // K)
        self.splits = np.where(rng.random(N) < 0.7, "train", "test").astype(object)
        features = rng.normal(size=(N, 8)).astype(np.float32)
        drift = self.slices[:, None] / K
        names = NAMES[task]
        if task == "multiclass":  # the first class grows rarer over time, the last commoner
            logits = features[:, : len(names)] + np.array([1.0, 0.0, 0.0, -1.0]) * (1 - 2 * drift)
            self.labels = logits.argmax(axis=1).tolist()
        else:
            self.labels = (features[:, : len(names)] + drift - 0.5 > 0).astype(int).tolist()
        self.manifest = hand_manifest(self.name, SLICES, task=task, label_names=names)
        self.row_hashes = row_hashes([f"key{i}" for i in range(N)], self.labels, self.splits)
        self.paths = {"slices": Path("."), "features": Path(".")}
        self.usable = [True] * K
        self.modality = "text"
        self.n_outputs = self.task.n_outputs(len(names))
        self._inputs = Inputs("pooled", features)

    def inputs(self, name):
        return self._inputs

    def usable_rows(self):
        return np.arange(N)

    def input_id(self, name):
        return "pooled"


def slice_table(data: Rows, root: Path) -> None:
    """data/slices/<name>.lance and its manifest, as the slice stage writes them (the columns the report
    reads)."""
    label = (
        pa.array(data.labels, pa.list_(pa.int8(), len(data.labels[0])))
        if data.task.name == "multilabel"
        else pa.array(data.labels, pa.int64())
    )
    table = pa.table(
        {
            "id": [f"row{i}" for i in range(N)],
            "key": [f"key{i}" for i in range(N)],
            "slice": pa.array(data.slices, pa.int64()),
            "split": pa.array(data.splits.tolist(), pa.string()),
            "label": label,
        }
    )
    write_slice_table(table, root / "data" / "slices" / f"{data.name}.lance", data.manifest)


def shift_summary(name: str, root: Path) -> None:
    """tables/<name>-shift.json with the examples the shift analysis writes (drift/analysis/shift.py)."""
    long = "a commit message " * 40
    examples = [
        {
            "period": "2021",
            "against_cutoff": "2020",
            "threshold": 1.5,
            "rows": [
                {"id": "c0ffee", "distance": 2.25, "novel": True, "text": HOSTILE + " " + long},
                {"id": "<b>id</b>", "distance": 1.0, "novel": False, "text": "plain"},
            ],
        },
    ]
    path = root / "tables" / f"{name}-shift.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"dataset": name, "examples": examples}))


@pytest.fixture(scope="module", params=["multiclass", "multilabel"])
def run(request, tmp_path_factory):
    """One dataset evaluated (two references, two seeds) and reported: (data, its evaluations, the root)."""
    root = tmp_path_factory.mktemp(request.param)
    data = Rows(request.param)
    train_roster(data, MODELS, CFG, root / "data" / "models" / data.name)
    results, _, _ = evaluate_roster(
        data, MODELS, root / "data" / "models" / data.name, 1, ResultCache(root / "cache")
    )
    for model, result in results.items():
        result.to_file(root / "data" / "eval" / data.name / f"{model}.json")
    slice_table(data, root)
    shift_summary(data.name, root)
    write_dataset_report(data.name, MODELS, root, saliency=False)
    write_html_report(data.name, root)
    return data, results, root


def predictions(data: Rows, root: Path, model: str, seed: int) -> dict[int, np.ndarray]:
    """{cutoff: the checkpoint's outputs over every row}, predicted here."""
    inputs = data.inputs(model)
    return {
        i: predict(
            load_checkpoint(model, inputs.spec(), data.n_outputs, data.task.name, path), inputs, np.arange(N)
        )
        for i, path in list_checkpoints(root / "data" / "models" / data.name, model)[seed].items()
    }


def direct_scores(task: str, y: np.ndarray, outputs: np.ndarray, n: int) -> list[float | None]:
    """Each class's score of one cell, computed here: recall of each class, or each label's AUC."""
    if task == "multiclass":
        said = outputs.argmax(axis=1)
        return [float(np.mean(said[y == c] == c)) if (y == c).any() else None for c in range(n)]
    return [
        float(roc_auc_score(y[:, c], outputs[:, c])) if 0 < y[:, c].sum() < len(y) else None for c in range(n)
    ]


@pytest.mark.compute
def test_per_class_scores_equal_a_direct_computation(run):
    data, results, root = run
    y = np.array(data.labels)
    n = len(NAMES[data.task.name])
    for model in MODELS:
        scores = results[model].per_class
        assert scores.metric == {"multiclass": "recall", "multilabel": "auc"}[data.task.name]
        assert scores.classes == NAMES[data.task.name]
        for seed in (0, 1):
            outputs = predictions(data, root, model, seed)
            per_class = np.array([from_json(m) for m in scores.seeds[str(seed)]])
            matrix = from_json(results[model].seeds[str(seed)])
            for i, out in outputs.items():
                for j in range(K):
                    rows = eval_rows(i, j, data.slices, data.splits)
                    expected = direct_scores(data.task.name, y[rows], out[rows], n)
                    got = [None if np.isnan(v) else v for v in per_class[:, i, j]]
                    assert got == [None if e is None else pytest.approx(e, abs=1e-6) for e in expected], (
                        model,
                        i,
                        j,
                    )
                    # the cell's own score is made of them: accuracy the row-weighted mean of the recalls,
                    # macro AUC the mean of the labels' AUCs
                    if data.task.name == "multiclass":
                        weights = np.bincount(y[rows], minlength=n) / len(rows)
                        assert np.nansum(per_class[:, i, j] * weights) == pytest.approx(
                            matrix[i, j], abs=1e-5
                        )
                    else:
                        assert np.nanmean(per_class[:, i, j]) == pytest.approx(matrix[i, j], abs=1e-5)
            # the confusion counts of the last cutoff on the last slice (its own: the test rows)
            last = max(outputs)
            assert scores.cell == [last, K - 1]
            rows = eval_rows(last, K - 1, data.slices, data.splits)
            counts = np.array(scores.confusion[str(seed)])
            if data.task.name == "multiclass":
                expected = np.zeros((n, n), dtype=int)
                np.add.at(expected, (y[rows], outputs[last][rows].argmax(axis=1)), 1)
            else:
                truth, said = y[rows] == 1, outputs[last][rows] > 0
                expected = np.stack(
                    [
                        (~truth & ~said).sum(0),
                        (~truth & said).sum(0),
                        (truth & ~said).sum(0),
                        (truth & said).sum(0),
                    ],
                    axis=1,
                )
            assert counts.tolist() == expected.tolist()


@pytest.mark.compute
def test_a_second_evaluation_reads_the_per_class_scores_from_the_cache(run, tmp_path):
    data, results, root = run
    again, counts, _ = evaluate_roster(
        data, MODELS, root / "data" / "models" / data.name, 1, ResultCache(root / "cache")
    )
    assert counts["computed"] == 0 and counts["reused"] > 0
    for model in MODELS:
        # every field, per_class included, byte for byte
        assert again[model].dumps() == results[model].dumps()


@pytest.mark.compute
def test_the_label_shares_per_slice(run):
    data, _, root = run
    plots = root / "plots" / data.name
    assert (plots / "labels.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = json.loads((plots / "labels.json").read_text())
    y = np.array(data.labels)
    names = NAMES[data.task.name]
    for s, label in enumerate(SLICES):
        mine = y[data.slices == s]
        expected = (
            np.bincount(mine, minlength=len(names)) / len(mine)
            if data.task.name == "multiclass"
            else mine.mean(axis=0)
        )
        got = [r["value"] for r in rows if r["train"] == label]
        assert got == pytest.approx(expected.tolist(), abs=1e-6)
        assert {r["rows"] for r in rows if r["train"] == label} == {len(mine)}
    # the plots data holds names as look-alikes: DVC pastes it into a <script>
    for path in plots.rglob("*.json"):
        assert "<" not in path.read_text() and ">" not in path.read_text(), path


@pytest.mark.compute
def test_each_class_summary_is_its_matrix_summarised(run):
    data, results, root = run
    for model in MODELS:
        found = load_classes(data.name, model, root)
        assert [r["class"] for r in found["classes"]] == NAMES[data.task.name]  # as the data has them
        scores = results[model].per_class
        for c, row in enumerate(found["classes"]):
            matrix = mean_over_seeds([from_json(seed[c]) for seed in scores.seeds.values()])
            expected = id_future_decay(matrix, True)
            for s in ("id", "future", "decay"):
                assert row[s] == pytest.approx(expected[s], abs=1e-5)
        assert class_summary(found["rows"]) == found["classes"]
        assert (root / "plots" / data.name / model / "classes.png").exists()


@pytest.mark.compute
def test_the_page_names_the_classes_and_shows_the_novel_rows(run):
    data, _, root = run
    page = (root / "reports" / f"{data.name}.html").read_text()
    for name in NAMES[data.task.name]:
        assert html.escape(name) in page
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "http://" not in page and "https://" not in page
    sections = ["summary", "labels", "matrices", "classes", "novel"]
    positions = [page.index(f'<section id="{s}">') for s in sections]
    assert positions == sorted(positions)  # the labels near the top, right under the summary
    # every figure once: the label shares, each model's per-class scores
    pngs = sorted((root / "plots" / data.name).rglob("*.png"))
    assert page.count('<img src="data:image/png;base64,') == len(pngs)
    assert 'alt="mine-' in page and "labels.png" not in page
    novel = page[page.index('<section id="novel">') :]
    novel = novel[: novel.index("</section>")]
    assert "c0ffee" in novel and "&lt;b&gt;id&lt;/b&gt;" in novel
    text = html.escape(HOSTILE + " " + "a commit message " * 40)
    assert html.escape((HOSTILE + " " + "a commit message " * 40)[:EXAMPLE_CHARS]) + "…" in novel
    assert text not in novel  # cut
    classes = page[page.index('<section id="classes">') :]
    assert "confusion counts" in classes and "baseline-linear" in classes


@pytest.mark.compute
def test_drift_show_names_the_classes(run):
    data, _, root = run
    shown = json.loads(drift_cli("show", data.name, "baseline-linear", "--json", "--root", root).stdout)
    assert [r["class"] for r in shown["classes"]["classes"]] == NAMES[data.task.name]
    text = drift_cli("show", data.name, "baseline-linear", "--root", root).stdout
    for name in NAMES[data.task.name]:
        assert name in text  # markup and all, as written


def test_a_rating_is_scored_and_shared_by_its_value(tmp_path):
    """Regression: each rating's MSE (their mean over the ratings present is the cell's balanced MSE), the
    confusion counts against the rating nearest the prediction, and each rating's share of a slice."""
    from drift.evaluate.fill_matrices import class_scores, confusion_counts
    from drift.report.labels import label_shares

    task = get_task("regression")
    y = np.array([1.0, 1.0, 2.0, 5.0, 5.0, 5.0])
    pred = np.array([[1.5], [0.0], [2.0], [4.0], [5.0], [3.4]])
    levels = np.array([1.0, 2.0, 3.0, 5.0])  # 3: a rating of the table no row of this cell has
    scores = class_scores(task, y, pred, levels)
    assert scores == [pytest.approx((0.25 + 1.0) / 2), 0.0, None, pytest.approx((1.0 + 0.0 + 2.56) / 3)]
    assert np.mean([s for s in scores if s is not None]) == pytest.approx(task.score(y, pred))
    # nearest rating, a tie to the lower: 1.5 -> 1, 0 -> 1, 4.0 -> 3, 3.4 -> 3
    assert confusion_counts(task, y, pred, levels) == [[2, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 2, 1]]
    manifest = hand_manifest("reviews", ["2020", "2021"], task="regression", label_names=[])
    rows = label_shares("regression", manifest, [0, 0, 0, 1, 1, 1], y)
    assert [(r["train"], r["eval"], r["value"]) for r in rows if r["value"]] == [
        ("2020", "1", pytest.approx(2 / 3)),
        ("2020", "2", pytest.approx(1 / 3)),
        ("2021", "5", 1.0),
    ]
    assert {r["what"] for r in rows} == {"share"}
    many = label_shares("regression", manifest, np.repeat([0, 1], 30), np.arange(60) / 7)  # no set of ratings
    assert [(r["eval"], r["value"]) for r in many] == [
        ("mean rating", pytest.approx(np.arange(30).mean() / 7)),
        ("mean rating", pytest.approx(np.arange(30, 60).mean() / 7)),
    ]

"""drift.report.api, the results as polars frames: the committed matrices and metrics read back cell for cell,
the seed mean against its seeds, two revisions of a small git + DVC repository compared, unknown names as one
line."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from drift.core.errors import DriftError
from drift.report import api
from tests.helpers import metrics_json

ROOT = Path(__file__).resolve().parents[2]


def committed(path: str):
    return json.loads((ROOT / path).read_text())


@pytest.mark.parametrize("dataset, model", [("sotu", "ffn-s"), ("synth-portraits", "cohort-mean")])
def test_the_long_frame_is_the_committed_matrix(dataset, model):
    frame = api.matrices(dataset, model, root=ROOT)
    cells = committed(f"plots/{dataset}/{model}/matrix.json")
    metrics_of = "mlp-s" if model == "cohort-mean" else model  # the cohort mean: any model's metric
    metric = committed(f"metrics/{dataset}/{metrics_of}.json")["metric"]
    assert frame.columns == ["dataset", "model", "seed", "train_slice", "eval_slice", "metric", "value"]
    assert frame.select(pl.col("train_slice", "eval_slice").cast(pl.String), "value").rows() == [
        (c["train"], c["eval"], c["value"]) for c in cells
    ]
    assert set(frame["dataset"]) == {dataset} and set(frame["model"]) == {model}
    assert frame["seed"].null_count() == len(frame) and set(frame["metric"]) == {metric}
    # the slice columns sort in time order, and pivot back to the K x K matrix
    labels = list(dict.fromkeys(c["train"] for c in cells))
    assert frame["train_slice"].dtype == pl.Enum(labels)
    square = frame.sort("train_slice", "eval_slice").pivot(
        on="eval_slice", index="train_slice", values="value"
    )
    assert square.columns == ["train_slice", *labels]
    assert square.row(len(labels) - 1)[1:] == tuple(c["value"] for c in cells if c["train"] == labels[-1])


def test_every_model_means_every_model_with_a_metrics_file():
    for dataset in api.datasets(ROOT):
        frame = api.matrices(dataset, root=ROOT)
        with_metrics = {p.stem for p in (ROOT / "metrics" / dataset).glob("*.json")}
        assert set(frame["model"]) == with_metrics and "cohort-mean" in api.models(dataset, ROOT)
        k = committed(f"metrics/{dataset}/{min(with_metrics)}.json")["k"]
        assert len(frame) == len(with_metrics) * k * k


def test_the_seed_mean_is_the_mean_of_the_seeds(tmp_path):
    """Three seeds of an evaluate-stage file, one of them missing a cell and one cell no seed fills; the mean
    as the report writes it (long_format of EvalResult.matrix)."""
    from drift.evaluate.eval_result import EvalResult
    from drift.report.plots import long_format

    labels = ["1990s", "2000s", "<2010s>"]  # the report writes < and > as look-alikes: the seeds' labels too
    rng = np.random.default_rng(0)
    seeds = {}
    for seed in ("0", "1", "2"):
        rows = np.round(rng.uniform(0.4, 0.9, (3, 3)), 6).tolist()
        rows[2][0] = None  # no seed fills this cell
        if seed == "1":
            rows[0][1] = None  # only seeds 0 and 2 fill this one
        seeds[seed] = rows
    result = EvalResult(
        dataset="sotu",
        model="ffn-s",
        family="FFN",
        metric="accuracy",
        higher_is_better=True,
        labels=labels,
        usable=[True] * 3,
        seeds=seeds,
        estimated={},
    )
    result.to_file(tmp_path / "data/eval/sotu/ffn-s.json")
    (tmp_path / "plots/sotu/ffn-s").mkdir(parents=True)
    (tmp_path / "plots/sotu/ffn-s/matrix.json").write_text(json.dumps(long_format(result.matrix, labels)))
    (tmp_path / "metrics/sotu").mkdir(parents=True)
    (tmp_path / "metrics/sotu/ffn-s.json").write_text(
        metrics_json(id=0.7, future=0.6, decay=0.1, k=3, seeds=3)
    )

    per_seed = api.matrices("sotu", seeds=True, root=tmp_path)
    mean = api.matrices("sotu", root=tmp_path)
    assert sorted(set(per_seed["seed"])) == [0, 1, 2] and len(per_seed) == 27
    assert per_seed.filter(seed=1)["value"].to_list() == [v for row in seeds["1"] for v in row]
    assert per_seed["train_slice"].dtype == mean["train_slice"].dtype  # the same labels, ‹2010s› included
    by_cell = per_seed.group_by("train_slice", "eval_slice").agg(pl.col("value").mean().alias("of_seeds"))
    both = mean.join(by_cell, on=["train_slice", "eval_slice"])
    assert len(both) == 9 and both.filter(pl.col("value").is_null())["of_seeds"].null_count() == 1
    assert (both["value"] - both["of_seeds"]).abs().max() <= 1e-6
    assert both.filter(train_slice="1990s", eval_slice="2000s")["value"].item() == pytest.approx(
        (seeds["0"][0][1] + seeds["2"][0][1]) / 2, abs=1e-6
    )
    # the per-seed matrices live outside git: without them, one line says how to get them
    shutil.rmtree(tmp_path / "data")
    with pytest.raises(DriftError, match=r"dvc repro evaluate@sotu"):
        api.matrices("sotu", "ffn-s", seeds=True, root=tmp_path)


def test_the_summary_is_what_the_metrics_files_say():
    frame = api.summary(root=ROOT)
    assert set(frame["dataset"]) == set(api.datasets(ROOT))
    for dataset in api.datasets(ROOT):
        rows = frame.filter(dataset=dataset)
        files = {p.stem: json.loads(p.read_text()) for p in (ROOT / "metrics" / dataset).glob("*.json")}
        assert sorted(rows["model"]) == sorted(files)
        for row in rows.iter_rows(named=True):
            written = files[row["model"]]
            for key in (
                "id",
                "future",
                "decay",
                "id_std",
                "metric",
                "higher_is_better",
                "k",
                "seeds",
                "family",
                "reference",
                "margin_prior",
                "margin_linear",
                "beats_prior",
            ):
                assert row[key] == written.get(key), (dataset, row["model"], key)
        # ranked by decay, smallest first; the references after them, unranked
        ranked = rows.filter(pl.col("reference").not_())
        assert ranked["rank"].to_list() == list(range(1, len(ranked) + 1))
        assert ranked["decay"].to_list() == sorted(ranked["decay"].to_list())
        assert rows["reference"].to_list() == sorted(rows["reference"].to_list())
        assert rows.filter("reference")["rank"].null_count() == rows["reference"].sum()
    by_id = api.summary("sotu", by="id", root=ROOT).filter(pl.col("reference").not_())
    assert by_id["id"].to_list() == sorted(by_id["id"].to_list(), reverse=True)


@pytest.mark.parametrize("dataset, model", [("sotu", "ffn-s"), ("synth-portraits", "cnn-s")])
def test_the_class_frame_is_the_committed_per_class_cells(dataset, model):
    """Each class's ID is the mean of its diagonal cells, Future the cell-weighted mean of its later cells,
    Decay their difference, from plots/<ds>/<model>/classes.json directly; the cohort mean has none."""
    cells = committed(f"plots/{dataset}/{model}/classes.json")
    frame = api.classes(dataset, model, root=ROOT)
    assert frame.columns == [*api.CLASS_SCHEMA] and set(frame["metric"]) == {cells[0]["metric"]}
    assert frame["class"].to_list() == list(dict.fromkeys(c["eval"] for c in cells))
    for row in frame.iter_rows(named=True):
        mine = [c for c in cells if c["eval"] == row["class"]]
        diagonal = [c["value"] for c in mine if c["value"] is not None]
        later = [(c["future"], c["future_cells"]) for c in mine if c["future"] is not None]
        assert row["id"] == pytest.approx(sum(diagonal) / len(diagonal), abs=1e-12)
        future = sum(f * n for f, n in later) / sum(n for _, n in later)
        assert row["future"] == pytest.approx(future, abs=1e-12)
        assert row["decay"] == pytest.approx(row["id"] - row["future"], abs=1e-12)  # recall: higher is better
    assert api.classes(dataset, "cohort-mean", root=ROOT).is_empty()


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=test", "-c", "user.email=test@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


@pytest.mark.pipeline
def test_compare_reports_a_changed_value(tmp_path):
    """A git + DVC repository holding the committed metrics of synth-portraits; the workspace changes one
    model's decay and a param: compare(HEAD) sees that change and nothing else."""
    from dvc.repo import Repo

    git(tmp_path, "init", "-q")
    Repo.init(str(tmp_path)).close()
    shutil.copytree(ROOT / "metrics/synth-portraits", tmp_path / "metrics/synth-portraits")
    (tmp_path / "dvc.yaml").write_text("metrics:\n  - metrics/synth-portraits\n")
    (tmp_path / "params.yaml").write_text("train:\n  epochs: 1\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "the committed metrics")
    path = tmp_path / "metrics/synth-portraits/mlp-s.json"
    before = json.loads(path.read_text())
    path.write_text(json.dumps({**before, "decay": before["decay"] + 0.25}))
    (tmp_path / "params.yaml").write_text("train:\n  epochs: 2\n")

    frame = api.compare("HEAD", dataset="synth-portraits", root=tmp_path)
    assert set(frame["model"]) == {p.stem for p in (ROOT / "metrics/synth-portraits").glob("*.json")}
    changed = frame.filter(status="changed")
    assert changed.select("model", "stat").rows() == [
        ("mlp-s", "id"),
        ("mlp-s", "future"),
        ("mlp-s", "decay"),
    ]
    decay = changed.filter(stat="decay").row(0, named=True)
    assert decay["a"] == before["decay"] and decay["b"] == before["decay"] + 0.25
    assert decay["change"] == pytest.approx(0.25) and decay["improved"] is False  # more decay is worse
    assert changed.filter(stat="id")["change"].item() == 0
    assert set(frame.filter(status="unchanged")["model"]) == {"cnn-s", "baseline-prior", "baseline-linear"}
    assert api.compare_records("HEAD", root=tmp_path)["params"] == {"train.epochs": {"a": 1, "b": 2}}
    with pytest.raises(
        DriftError, match=r"^unknown dataset 'sotu' at HEAD or workspace: valid: synth-portraits$"
    ):
        api.compare("HEAD", dataset="sotu", root=tmp_path)


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: api.matrices("sotuu", root=ROOT),
            "unknown dataset 'sotuu': did you mean sotu? valid: sotu, synth-portraits",
        ),
        (lambda: api.matrices("sotu", "ffn", root=ROOT), "unknown model 'ffn' for sotu: did you mean ffn-s?"),
        (
            lambda: api.models("yearbook", root=ROOT),
            "unknown dataset 'yearbook': valid: sotu, synth-portraits",
        ),
        (
            lambda: api.matrices("sotu", "cohort-mean", seeds=True, root=ROOT),
            "cohort-mean is no trained model of sotu",
        ),
        (lambda: api.summary("sotuu", root=ROOT), "unknown dataset 'sotuu': did you mean sotu?"),
        (lambda: api.classes("sotu", "ffn", root=ROOT), "unknown model 'ffn' for sotu"),
        (
            lambda: api.summary(by="speed", root=ROOT),
            "unknown order 'speed' for --by: valid: decay, future, id",
        ),
    ],
)
def test_unknown_names_are_one_line_listing_the_valid_ones(call, message):
    with pytest.raises(DriftError) as error:
        call()
    assert str(error.value).startswith(message) and "\n" not in str(error.value)

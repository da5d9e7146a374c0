"""End to end: a real `dvc repro` in a temporary git repository on a tiny configuration."""

from __future__ import annotations

import json

import pytest

from drift.data.ingest_counts import IngestCounts
from drift.encoders.embed import EmbedRun
from drift.evaluate.eval_result import EvalResult, EvaluateRun
from drift.report.metrics_file import ModelMetrics
from drift.store.embeddings import EmbeddingsManifest
from drift.store.slices import SliceManifest
from drift.train.train_run import TrainRun
from tests.helpers import only, repro_in_process, run, tiny_params


@pytest.mark.compute
@pytest.mark.pipeline
def test_repro_end_to_end(project):
    params = tiny_params()
    params["train"]["models"] = {
        "sotu": ["ffn-s", "tx-s", "probe-minilm"],
        "synth-portraits": ["mlp-s", "cnn-s"],
    }
    repo = project(params)
    run(["dvc", "repro"], repo)

    # the same commit and params give the same matrices, bit for bit: train and evaluate again in new
    # processes (an image model with batch norm, a Transformer head on token states, a probe, the references)
    first = {p: p.read_bytes() for p in sorted((repo / "data/eval").rglob("*.json"))}
    # sotu: 3 models + 3 references (baseline-tfidf on text only); synth-portraits: 2 + 2
    assert len(first) == 10
    stages = [f"{stage}@{d}" for d in ("sotu", "synth-portraits") for stage in ("train", "evaluate")]
    run(["dvc", "repro", "-f", "-s", *stages], repo)
    again = {p: p.read_bytes() for p in sorted((repo / "data/eval").rglob("*.json"))}
    assert again == first, [p.name for p in first if first[p] != again.get(p)]

    # every stage wrote what users read
    for dataset, models in {
        "sotu": ["ffn-s", "tx-s", "probe-minilm", "baseline-prior", "baseline-linear", "baseline-tfidf"],
        "synth-portraits": ["mlp-s", "cnn-s", "baseline-prior", "baseline-linear"],
    }.items():
        ingest = json.loads((repo / f"metrics/ingest/{dataset}.json").read_text())
        assert ingest["kept"] + ingest["filtered"] + ingest["quarantined"] == ingest["read"] > 0
        for model in models:
            metrics = json.loads((repo / f"metrics/{dataset}/{model}.json").read_text())
            assert {"id", "future", "decay", "metric", "higher_is_better", "k", "seeds"} <= set(metrics)
            assert metrics["metric"] == "accuracy" and metrics["higher_is_better"] is True
            assert metrics["k"] == (5 if dataset == "sotu" else 3) and metrics["seeds"] == 1
            assert abs(metrics["decay"] - (metrics["id"] - metrics["future"])) < 1e-9
            cells = json.loads((repo / f"plots/{dataset}/{model}/matrix.json").read_text())
            assert len(cells) == metrics["k"] ** 2 and {"train", "eval", "value"} == set(cells[0])
            assert (repo / f"plots/{dataset}/{model}/heatmap.png").stat().st_size > 1000
    # the lexical reference sits in every text matrix, and every text model's metrics carry its margin
    ffn = json.loads((repo / "metrics/sotu/ffn-s.json").read_text())
    tfidf = json.loads((repo / "metrics/sotu/baseline-tfidf.json").read_text())
    assert abs(ffn["margin_tfidf"] - (ffn["id"] - tfidf["id"])) < 1e-9 and tfidf["reference"] is True
    assert not (repo / "metrics/synth-portraits/baseline-tfidf.json").exists()
    embed = json.loads((repo / ".drift/runs/embed/sotu-minilm-l6.json").read_text())
    assert embed["computed"] == embed["unique"] > 0 and embed["cache_hits"] == 0
    # every file a stage handed on is its model's, and reads back to the same bytes
    artefacts = {
        "data/slices/*.json": SliceManifest,
        "data/embeddings/*.json": EmbeddingsManifest,
        "data/eval/*/*.json": EvalResult,
        "metrics/ingest/*.json": IngestCounts,
        "metrics/[!i]*/*.json": ModelMetrics,
        ".drift/runs/embed/*.json": EmbedRun,
        ".drift/runs/train/*.json": TrainRun,
        ".drift/runs/evaluate/*.json": EvaluateRun,
    }
    for pattern, model in artefacts.items():
        files = sorted(repo.glob(pattern))
        assert files, pattern
        for path in files:
            assert model.from_file(path).dumps() == path.read_text(), path

    # dvc metrics show lists every model
    shown = json.loads(run(["dvc", "metrics", "show", "--json"], repo).stdout)
    files = next(iter(shown.values()))["data"]
    assert {
        "metrics/sotu/ffn-s.json",
        "metrics/sotu/probe-minilm.json",
        "metrics/synth-portraits/mlp-s.json",
    } <= set(files)

    # a second repro runs only the check of params.yaml (always_changed) and leaves dvc.lock as it was
    lock = (repo / "dvc.lock").read_text()
    again = run(["dvc", "repro"], repo).stdout
    assert again.count("Running stage") == 1 and "Running stage 'check'" in again, again
    assert (repo / "dvc.lock").read_text() == lock

    run(["git", "add", "-A"], repo)
    run(["git", "commit", "-qm", "first run"], repo)

    # the same records re-sliced and re-embedded give the same bytes: dvc.lock as committed, nothing to commit
    run(
        ["dvc", "repro", "-f", "-s", "ingest@sotu", "slice@sotu", "slice@synth-portraits", "embed@sotu"], repo
    )
    assert run(["git", "status", "--porcelain"], repo).stdout == ""
    # nothing else to run
    assert run(["dvc", "status"], repo).stdout.split() == ["check:", "always", "changed"]

    # a typo on the up-to-date workspace (the way docs/how-to/experiments.md iterates) fails in the check
    # stage, in one line
    typo = run(["dvc", "exp", "run", "-S", "+train.epoch=3"], repo, check=False)
    assert typo.returncode != 0 and "Running stage 'train" not in typo.stdout
    assert "error: unknown parameter train.epoch: did you mean train.epochs?" in typo.stderr, typo.stderr
    run(["git", "checkout", "params.yaml"], repo)

    # a training parameter re-runs train/evaluate/report, never the encoder (sotu's, for time)
    out = run(["dvc", "exp", "run", "-S", "train.epochs=2", "report@sotu"], repo).stdout
    assert "Running stage 'train@sotu'" in out and "Running stage 'report@sotu'" in out
    assert "Running stage 'embed@sotu'" not in out and "Running stage 'ingest@sotu'" not in out

    # a dataset's own training settings (its section's `train:`) re-run that dataset alone, and act there
    # (from a workspace in step: the run above left synth-portraits behind train.epochs 2)
    run(["dvc", "repro"], repo)
    out = run(["dvc", "exp", "run", "-S", "+sotu.train.epochs=3"], repo).stdout
    assert "Running stage 'train@sotu'" in out and "Running stage 'report@sotu'" in out
    ran = [line for line in out.splitlines() if line.startswith("Running stage")]
    assert not [line for line in ran if "@synth-portraits'" in line], ran
    assert json.loads((repo / ".drift/runs/train/sotu.json").read_text())["trained"] > 0

    # dvc plots diff against the commit renders the heatmap template (and the PNGs)
    diff = json.loads(run(["dvc", "plots", "diff", "HEAD", "--json"], repo).stdout)
    vega = diff["data"]["plots/sotu/ffn-s/matrix.json"][0]
    assert vega["type"] == "vega" and "rect" in json.dumps(vega["content"])


@pytest.mark.compute
@pytest.mark.pipeline
def test_cache_is_shared_between_repositories(project):
    """A second checkout with the same data and encoder embeds nothing: the store lives outside the workspace."""
    params = tiny_params()
    only(params, "sotu")
    first = project(params, "first")
    repro_in_process(first, "sotu", stages=("ingest", "slice", "embed"))  # the store is the subject, not DVC
    second = project(only(tiny_params(), "sotu"), "second")
    repro_in_process(second, "sotu", stages=("ingest", "slice", "embed"))
    embed = json.loads((second / ".drift/runs/embed/sotu-minilm-l6.json").read_text())
    assert embed["computed"] == 0 and embed["cache_hits"] == embed["unique"] > 0


BAD = [  # (change, the stage whose check stops it, the one line it prints)
    (lambda p: p["train"]["models"].update(sotu=["ffn-s", "cnn-x"]), "train", "unknown model 'cnn-x'"),
    (
        lambda p: p["sotu"].update(slices={"unit": "decade", "start": 1990, "end": 1990}),
        "ingest",
        "yields no slices",
    ),
    (
        lambda p: p["sotu"].update(slices={"unit": "fortnight", "start": 1990, "end": 2000}),
        "ingest",
        "valid: year, half-year, quarter, month, decade, custom",
    ),
    (lambda p: p["train"]["models"].update(sotu=["cnn-s"]), "train", "image model"),
    (lambda p: p["embed"].update(encoders=["robertaa"]), "ingest", "unknown encoder 'robertaa'"),
]


@pytest.mark.parametrize("change, stage, expected", BAD, ids=[b[2] for b in BAD])
def test_bad_parameters_stop_before_compute(change, stage, expected):
    """In process: ingest checks the data half of the params (no model registry: editing a model never re-runs
    an ingest), train checks everything; each problem is one line."""
    from drift.core.errors import DriftError
    from drift.data.datasets import dataset_cfg
    from drift.data.validate import validate_data
    from drift.run.checks import validate
    from tests.helpers import checked_params

    def ingest_checks(params, name):
        validate_data(params, name, dataset_cfg(params, name))

    params = only(tiny_params(), "sotu")
    change(params)
    with pytest.raises(DriftError) as error:
        (ingest_checks if stage == "ingest" else validate)(checked_params(params), "sotu")
    assert expected in str(error.value) and "\n" not in str(error.value)
    if stage == "train":  # the data half passes: ingest, slice and embed run; train stops before training
        ingest_checks(checked_params(params), "sotu")


@pytest.mark.compute
@pytest.mark.pipeline
def test_bad_parameters_in_a_stage_script_are_one_line(project):
    params = only(tiny_params(), "sotu")
    params["sotu"]["slices"] = {"unit": "decade", "start": 1990, "end": 1990}
    repo = project(params)
    result = run(["python", "stages/ingest.py", "sotu"], repo, check=False)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "yields no slices" in lines[0], result.stderr
    assert not (repo / "data/records/sotu.parquet").exists()


@pytest.mark.compute
@pytest.mark.pipeline
def test_unknown_dataset_lists_valid_names(project):
    params = tiny_params()
    repo = project(params)
    result = run(["python", "stages/ingest.py", "sotuu"], repo, check=False)
    assert result.returncode == 2
    assert "unknown dataset 'sotuu'" in result.stderr and "synth-portraits" in result.stderr


@pytest.mark.compute
@pytest.mark.pipeline
def test_a_stage_before_its_inputs_is_one_line(project):
    """train and evaluate run before slice/embed wrote their outputs stop with one line naming the stage to
    run."""
    params = only(tiny_params(), "sotu")
    repo = project(params)
    for stage in ("train", "evaluate"):
        result = run(["python", f"stages/{stage}.py", "sotu"], repo, check=False)
        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "dvc repro slice@sotu" in lines[0], result.stderr

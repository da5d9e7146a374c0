"""The checkpoint and cell cache (drift/store/cells.py): every component of a key changes it, and through `dvc
exp run -S` a new model, a new seed or a new time slice trains and scores exactly what is new."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import drift.store.cells as cells
from tests.helpers import dvc_params, run

BASE = dict(
    model_spec="ModelInfo(name='ffn-s')|InputSpec(tokens)|2|binary",
    seed=0,
    rows="r" * 64,
    inputs="tokens:abc:64",
    training={
        "epochs": 5,
        "batch_size": 64,
        "weight_decay": 0.01,
        "lr": 0.001,
        "optimizer": "adamw",
        "max_tokens": 64,
        "threads": 1,
    },
    code="c" * 64,
)


@pytest.mark.parametrize(
    "component, value",
    [
        ("model_spec", "ModelInfo(name='ffn-m')|InputSpec(tokens)|2|binary"),
        ("seed", 1),
        ("seed", None),
        ("rows", "s" * 64),
        ("inputs", "tokens:abd:64"),
        ("training", {**BASE["training"], "epochs": 6}),
        ("training", {**BASE["training"], "lr": 0.01}),
        ("training", {**BASE["training"], "batch_size": 32}),
        ("training", {**BASE["training"], "weight_decay": 0.0}),
        ("training", {**BASE["training"], "optimizer": "adam"}),
        ("training", {**BASE["training"], "max_tokens": 128}),
        ("training", {**BASE["training"], "threads": 2}),
        ("code", "d" * 64),
    ],
)
def test_every_component_changes_the_checkpoint_key(component, value):
    assert cells.checkpoint_key(**{**BASE, component: value}) != cells.checkpoint_key(**BASE)


def test_cell_key_components_and_row_content():
    base = cells.cell_key("a" * 64, "b" * 64, "accuracy", "c" * 64)
    for changed in [
        ("x" * 64, "b" * 64, "accuracy", "c" * 64),
        ("a" * 64, "y" * 64, "accuracy", "c" * 64),
        ("a" * 64, "b" * 64, "macro_auc", "c" * 64),
        ("a" * 64, "b" * 64, "accuracy", "z" * 64),
    ]:
        assert cells.cell_key(*changed) != base
    hashes = cells.row_hashes(["k1", "k2", "k3"], [0, 1, 1], np.array(["train", "test", "train"]))
    digest = cells.rows_digest(hashes, np.array([0, 2]))
    assert digest == cells.rows_digest(
        cells.row_hashes(["k1", "k2", "k3"], [0, 0, 1], ["train", "test", "train"]), np.array([0, 2])
    )  # a row outside the set does not matter
    for keys, labels, splits in [
        (["k1", "k2", "kX"], [0, 1, 1], ["train", "test", "train"]),  # payload
        (["k1", "k2", "k3"], [0, 1, 0], ["train", "test", "train"]),  # label
        (["k1", "k2", "k3"], [0, 1, 1], ["train", "test", "test"]),
    ]:  # split
        assert cells.rows_digest(cells.row_hashes(keys, labels, np.array(splits)), np.array([0, 2])) != digest
    assert cells.rows_digest(hashes, np.array([2, 0])) != digest  # the order (batches follow it)


def copy_closure(tmp_path, stage):
    from drift.core.closure import ROOT

    for name in cells.stage_files(stage):
        (tmp_path / stage / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / stage / name).write_bytes((ROOT / name).read_bytes())
    return tmp_path / stage


def test_code_version_is_the_stage_closure(tmp_path):
    # the key's code is the files dvc.yaml lists as the stage's code deps: a copy of exactly those gives the
    # same version, an edit to any of them another, an edit outside them none
    from drift.core.closure import ROOT, import_closure

    for stage in ("train", "evaluate"):
        copy = copy_closure(tmp_path, stage)
        assert cells.code_version(stage, root=copy) == cells.code_version(stage)
        # code: a comment changes no key
        (copy / "drift/models/text_heads.py").write_text(
            (copy / "drift/models/text_heads.py").read_text() + "\n_EDITED = 1\n"
        )
        assert cells.code_version(stage, root=copy) != cells.code_version(stage)
    dvc = __import__("yaml").safe_load((ROOT / "dvc.yaml").read_text())
    train_deps = {d for d in dvc["stages"]["train"]["do"]["deps"] if d.startswith(("drift/", "stages/"))}
    assert train_deps == set(files := ["stages/train.py", *import_closure(ROOT / "stages/train.py", ROOT)])
    assert "drift/report/html.py" not in files  # the report's code never invalidates a checkpoint
    assert cells.code_version("train") != cells.code_version("evaluate")


@pytest.mark.parametrize("stage", ["train", "evaluate"])
def test_a_models_code_is_its_own_module_and_the_shared_code(tmp_path, stage):
    # editing the text heads' module changes the keys of the text heads only; editing shared code, every key
    from drift.models import model_module, model_modules

    copy = copy_closure(tmp_path, stage)
    modules = model_modules()
    assert {
        "drift.models.image",
        "drift.models.text_heads",
        "drift.models.probe",
        "drift.models.reference",
    } <= set(modules)

    def versions():
        return {
            m: cells.code_version(stage, model_module(m), modules, root=copy)
            for m in ("ffn-s", "cnn-s", "probe-minilm-l6", "baseline-linear")
        }

    before = versions()
    assert len(set(before.values())) == 4
    text = copy / "drift/models/text_heads.py"
    text.write_text(text.read_text() + "\n_EDITED = 1\n")  # code: a comment changes no key
    after = versions()
    assert [m for m in before if before[m] != after[m]] == ["ffn-s"]
    shared = copy / "drift/models/checkpoints.py"
    shared.write_text(shared.read_text() + "\n_EDITED = 1\n")  # code: a comment changes no key
    assert all(v != after[m] for m, v in versions().items())


def test_a_library_version_changes_every_key(monkeypatch):
    import drift.core.environment as environment

    before = cells.code_version("train", "drift.models.text_heads", ["drift.models.text_heads"])
    real = environment.package_version
    # those that compute (tests/core/test_library_keys.py)
    for name in ("torch", "numpy", "scikit-learn", "scipy"):
        monkeypatch.setattr(
            environment, "package_version", lambda d, name=name: "0.0.1" if d == name else real(d)
        )
        assert (
            cells.code_version("train", "drift.models.text_heads", ["drift.models.text_heads"]) != before
        ), name
    monkeypatch.undo()
    assert cells.code_version("train", "drift.models.text_heads", ["drift.models.text_heads"]) == before


def counts(repo: Path, stage: str) -> dict:
    """The stage's counts (its run record less the engine each model trained with and the tasks' timings)."""
    metrics = json.loads((repo / f".drift/runs/{stage}/sotu.json").read_text())
    metrics.pop("engines", None)
    metrics.pop("timings", None)
    return metrics


@pytest.mark.compute
@pytest.mark.pipeline
def test_only_new_checkpoints_and_cells_are_computed(project):
    """On sotu over three decades (conftest.dvc_params), ffn-s and two references, then a fourth decade."""
    params = dvc_params("sotu")
    params["train"]["models"] = {"sotu": ["ffn-s"]}
    params["train"]["baselines"] = ["baseline-prior", "baseline-linear"]  # the counts below: 2 references
    repo = project(params)
    run(["dvc", "repro", "evaluate@sotu"], repo)  # the counts are train's and evaluate's: no report needed
    manifest = json.loads((repo / "data/slices/sotu.json").read_text())
    cutoffs = sum(s["trainable"] for s in manifest["slices"])
    usable = [s["index"] for s in manifest["slices"] if s["usable"]]
    cells_per_model = sum(
        1
        for i in range(len(manifest["slices"]))
        if manifest["slices"][i]["trainable"]
        # every trained row x every usable column (all have test rows here)
        for j in usable
    )
    # ffn-s + 2 references
    assert counts(repo, "train") == {
        "dataset": "sotu",
        "trained": 3 * cutoffs,
        "reused": 0,
        "recomputed": {"corrupt": 0},
        "executor": "local",
        "workers": 1,
    }
    assert (
        counts(repo, "evaluate")["computed"] == 3 * cells_per_model
        and counts(repo, "evaluate")["reused"] == 0
    )
    # the label-free estimates of the same cells (binary task: ATC and DoC), cached alike
    assert counts(repo, "evaluate")["estimates"] == {"computed": 3 * cells_per_model, "reused": 0}
    run(["git", "add", "-A"], repo)
    run(["git", "commit", "-qm", "base"], repo)

    # one more model: only its cutoffs train, only its cells are scored
    run(["dvc", "exp", "run", "-S", "train.models.sotu=[ffn-s,tx-s]", "evaluate@sotu"], repo)
    assert counts(repo, "train")["trained"] == cutoffs and counts(repo, "train")["reused"] == 3 * cutoffs
    assert (counts(repo, "evaluate")["computed"], counts(repo, "evaluate")["reused"]) == (
        cells_per_model,
        3 * cells_per_model,
    )
    assert counts(repo, "evaluate")["estimates"] == {
        "computed": cells_per_model,
        "reused": 3 * cells_per_model,
    }

    # one more seed: only that seed of the trained heads; the references' fit ignores the seed
    run(
        [
            "dvc",
            "exp",
            "run",
            "-S",
            "train.models.sotu=[ffn-s,tx-s]",
            "-S",
            "train.seeds=[0,1]",
            "evaluate@sotu",
        ],
        repo,
    )
    assert counts(repo, "train")["trained"] == 2 * cutoffs and counts(repo, "train")["reused"] == 6 * cutoffs
    # the references' seed-1 checkpoints are byte copies of seed 0's: their cells are reused too
    assert counts(repo, "evaluate")["computed"] == 2 * cells_per_model

    # one more time slice: one new cutoff per (model, seed), and only the new row and column of cells
    end = params["sotu"]["slices"]["end"]
    run(
        [
            "dvc",
            "exp",
            "run",
            "-S",
            "train.models.sotu=[ffn-s,tx-s]",
            "-S",
            "train.seeds=[0,1]",
            "-S",
            f"sotu.slices.end={end + 10}",
            "evaluate@sotu",
        ],
        repo,
    )
    grown = json.loads((repo / "data/slices/sotu.json").read_text())
    assert len(grown["slices"]) == len(manifest["slices"]) + 1 and grown["slices"][-1]["trainable"]
    assert grown["slices"][-1]["usable"]
    # trained: (ffn-s, tx-s) x 2 seeds and the 2 references once; reused: every old checkpoint, and the
    # references' new seed-1 checkpoints (seed 0's fit)
    assert (
        counts(repo, "train")["trained"] == 2 * 2 + 2 and counts(repo, "train")["reused"] == 8 * cutoffs + 2
    )
    # the new row (every usable column, the new one too) + the new column
    new_cells = (cutoffs + 1) + len(usable)
    # the references' seed 1 reuses seed 0's
    assert counts(repo, "evaluate")["computed"] == (4 + 2) * new_cells
    evaluation = json.loads((repo / "data/eval/sotu/ffn-s.json").read_text())
    assert len(evaluation["seeds"]["0"]) == len(manifest["slices"]) + 1

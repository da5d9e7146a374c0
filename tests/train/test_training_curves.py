"""Training that is shown to be enough: every training records its mean loss per epoch, the checkpoint keeps
it (also one copied from the cache), the report writes it for `dvc plots` and the HTML page, and the train
stage and `drift summary` say when a loss was still falling at the last epoch or a model is below
baseline-linear."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from drift.core.environment import deterministic
from drift.core.params import TrainParams
from drift.models import InputSpec
from drift.models.checkpoints import (
    build_model,
    epoch_losses,
    keep_losses,
    list_checkpoints,
    load_checkpoint,
    loss_curves,
    save_checkpoint,
)
from drift.models.inputs import Inputs
from drift.protocol.summary import BELOW_LINEAR_NOTE, STILL_FALLING, last_epoch_drop, still_falling
from drift.protocol.tasks import get_task
from drift.store.cells import ResultCache
from drift.store.slices import hand_manifest
from drift.train.engine import train_many
from drift.train.loop import still_falling_lines, train_one, train_roster
from tests.cli.test_cli import WITH_REFS, invoke, write_with_refs
from tests.train.test_engine import CFG, N, TinyData

EPOCHS = 3


@pytest.mark.compute
def test_solo_and_batched_record_one_loss_per_epoch_alike(tmp_path):
    """ffn-s, 2 seeds x 4 cutoffs, solo and batched: one mean loss per epoch in every checkpoint, equal to
    float tolerance; the reference, fitted in closed form, has none."""
    deterministic(1)
    data = TinyData(np.random.default_rng(5))
    cfg = TrainParams(**{**CFG.model_dump(), "seeds": [0, 1], "epochs": EPOCHS})
    train_roster(data, ["ffn-s", "baseline-prior"], cfg, tmp_path / "solo")
    train_roster(data, ["ffn-s", "baseline-prior"], cfg, tmp_path / "batched", train_many=train_many)
    solo, batched = loss_curves(tmp_path / "solo", "ffn-s"), loss_curves(tmp_path / "batched", "ffn-s")
    assert sorted(solo) == sorted(batched) == [0, 1]
    for seed in (0, 1):
        assert sorted(solo[seed]) == sorted(batched[seed]) == [0, 1, 2, 3]
        for k in range(4):
            assert len(solo[seed][k]) == EPOCHS and all(np.isfinite(solo[seed][k]))
            np.testing.assert_allclose(batched[seed][k], solo[seed][k], rtol=1e-5)
    assert solo[0][3] != solo[1][3]  # each training its own curve
    assert solo[0][3][-1] < solo[0][3][0]  # it learned: the loss fell
    prior = list_checkpoints(tmp_path / "solo", "baseline-prior")[0][0]
    assert epoch_losses(prior) is None and loss_curves(tmp_path / "solo", "baseline-prior") == {0: {}, 1: {}}


@pytest.mark.compute
def test_the_curve_is_the_loss_each_step_minimised():
    """One epoch of full batches: the recorded mean is the mean of the steps' losses, each taken before its
    step."""
    deterministic(1)
    rng = np.random.default_rng(0)
    inputs = Inputs("pooled", rng.normal(size=(N, 16)).astype(np.float32))
    targets = torch.as_tensor(rng.integers(0, 2, N))
    cfg = TrainParams(epochs=1, batch_size=N, lr=1e-3)
    model = train_one("probe-bert", inputs, np.arange(N), targets, get_task("binary"), 2, cfg, 4)
    torch.manual_seed(4)
    fresh = build_model("probe-bert", inputs.spec(), 2, "binary")
    with torch.no_grad():  # one step over every row: its loss is the untrained model's, class weights and all
        loss = get_task("binary").loss(targets)(fresh(*inputs.batch(np.arange(N))), targets)
    assert model.epoch_losses == pytest.approx([float(loss)], rel=1e-6)


@pytest.mark.compute
def test_a_checkpoint_keeps_its_curve_through_the_cache(tmp_path):
    """Saved, read back, loaded and copied out of the checkpoint cache: the curve stays, exactly; a checkpoint
    saved without one (before curves were kept) loads as before and has none."""
    spec = InputSpec("pixels", (3, 8, 8))
    model = build_model("mlp-s", spec, 1, "regression")
    curve = [0.9, 0.61, 0.4987654321]
    save_checkpoint(keep_losses(model, curve), tmp_path / "m.pt")
    assert epoch_losses(tmp_path / "m.pt") == curve
    back = load_checkpoint("mlp-s", spec, 1, "regression", tmp_path / "m.pt")
    x = torch.rand(2, 3, 8, 8)
    torch.testing.assert_close(back(x), model.eval()(x))

    cache = ResultCache(tmp_path / "cache")
    cache.put_checkpoint("k" * 64, tmp_path / "m.pt")
    cache.place("k" * 64, tmp_path / "placed" / "cutoff000.pt")
    assert epoch_losses(tmp_path / "placed" / "cutoff000.pt") == curve

    torch.save(model.state_dict(), tmp_path / "old.pt")  # as save_checkpoint wrote before
    assert epoch_losses(tmp_path / "old.pt") is None
    load_checkpoint("mlp-s", spec, 1, "regression", tmp_path / "old.pt")


@pytest.mark.compute
def test_a_roster_from_the_cache_keeps_its_curves(tmp_path):
    """The second run of a roster copies every checkpoint from the cache: the same curves, to the bit."""
    deterministic(1)
    data = TinyData(np.random.default_rng(5))
    cfg = TrainParams(**{**CFG.model_dump(), "epochs": 2})
    cache = ResultCache(tmp_path / "cells")
    first = train_roster(data, ["ffn-s"], cfg, tmp_path / "a", cache).counts
    again = train_roster(data, ["ffn-s"], cfg, tmp_path / "b", cache).counts
    assert (first["trained"], again["trained"], again["reused"]) == (4, 0, 4)
    assert loss_curves(tmp_path / "b", "ffn-s") == loss_curves(tmp_path / "a", "ffn-s")
    assert all(len(c) == 2 for c in loss_curves(tmp_path / "b", "ffn-s")[0].values())


def noisy_linear(seed: int = 3):
    """Pooled rows whose binary label is a noisy linear function of them: a probe's loss has a floor above 0."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, 16)).astype(np.float32)
    y = (x @ rng.normal(size=16) + rng.normal(scale=1.5, size=N) > 0).astype(np.int64)
    return Inputs("pooled", x), torch.as_tensor(y)


def save_trainings(models_dir, name, inputs, targets, cfg, seeds=(0, 1), cutoffs=(0, 1)):
    """Checkpoints of `name` as the train stage lays them out, each trained on a different share of the rows."""
    from drift.models.checkpoints import checkpoint_path

    for seed in seeds:
        for k in cutoffs:
            rows = np.arange(N * (k + 2) // (len(cutoffs) + 1))
            model = train_one(name, inputs, rows, targets, get_task("binary"), 2, cfg, seed)
            save_checkpoint(model, checkpoint_path(models_dir, name, seed, k))


@pytest.mark.compute
def test_the_warning_fires_on_an_under_trained_model_only(tmp_path):
    """One epoch at a tiny learning rate: the train stage names the model, one line; 30 epochs at a brisk
    pace: its loss had stopped falling (the last epoch's drop well below STILL_FALLING), and nothing is said.
    """
    deterministic(1)
    inputs, targets = noisy_linear()
    save_trainings(tmp_path / "under", "probe-bert", inputs, targets, TrainParams(epochs=1, lr=1e-6))
    save_trainings(
        tmp_path / "done", "probe-bert", inputs, targets, TrainParams(epochs=30, batch_size=64, lr=3e-2)
    )
    lines = still_falling_lines("tiny", ["probe-bert", "baseline-linear"], tmp_path / "under")
    assert len(lines) == 1 and lines[0].startswith("warning: probe-bert trained 1 epoch on tiny")
    assert "\n" not in lines[0]
    done = [c for cutoffs in loss_curves(tmp_path / "done", "probe-bert").values() for c in cutoffs.values()]
    assert len(done) == 4 and last_epoch_drop(done) < STILL_FALLING / 2
    assert still_falling_lines("tiny", ["probe-bert"], tmp_path / "done") == []


def test_still_falling_is_the_mean_last_drop_over_trainings():
    """(L[-2] - L[-1]) / L[0], averaged over cutoffs and seeds, against STILL_FALLING; one epoch cannot show
    it."""
    assert last_epoch_drop([[1.0, 0.5, 0.48], [2.0, 1.0, 0.9]]) == pytest.approx((0.02 + 0.05) / 2)
    assert still_falling([[1.0, 0.5, 0.48], [2.0, 1.0, 0.9]])
    assert not still_falling([[1.0, 0.5, 0.495], [1.0, 0.5, 0.5]])  # 0.25% on average
    assert not still_falling([[1.0, 0.5, 0.52]])  # rising at the end: not falling
    assert still_falling([[0.7], [0.69]]) and last_epoch_drop([[0.7]]) is None
    assert not still_falling([])  # a reference: no curve


def write_curves(root, dataset, curves):
    """plots/losses/<ds>.json of {model: [curve per cutoff]}, as the report writes it (one seed)."""
    rows = [
        {"model": m, "cutoff": str(k), "seed": 0, "epoch": e, "loss": v}
        for m, cs in curves.items()
        for k, c in enumerate(cs)
        for e, v in enumerate(c, start=1)
    ]
    path = root / "plots" / "losses" / f"{dataset}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows))


def test_summary_marks_a_model_below_baseline_linear(tmp_path):
    """cnn-s (ID 0.55) is below baseline-linear (0.70) and first by Decay: marked `*` with the footnote and
    named in a warning line; ffn-s, whose loss was still falling, gets its line; tx-s (converged, above)
    neither."""
    write_with_refs(tmp_path)
    write_curves(tmp_path, "sotu", {"ffn-s": [[0.7, 0.6, 0.5]] * 2, "tx-s": [[0.7, 0.4, 0.399]] * 2})
    result = invoke("summary", "sotu", root=tmp_path)
    assert result.exit_code == 0, result.output
    out = result.stdout
    lines = out.splitlines()
    cnn = next(line for line in lines if " cnn-s " in f" {line} ")
    assert cnn.split()[:3] == ["1", "cnn-s", "*"] and "ranked by Decay" in out
    assert not any("*" in line for line in lines if " tx-s " in f" {line} " or " ffn-s " in f" {line} ")
    assert f"* {BELOW_LINEAR_NOTE}" in out
    assert (
        "warning: cnn-s is below baseline-linear in distribution on sotu (ID 0.550 vs linear 0.700, accuracy, "
        "higher is better)"
    ) in out
    falling = [line for line in lines if "still falling" in line]
    assert len(falling) == 1 and falling[0].startswith("warning: ffn-s's training loss on sotu")
    rows = {r["model"]: r for r in json.loads(invoke("summary", "--json", root=tmp_path).stdout)["sotu"]}
    assert rows["cnn-s"]["below_linear"] is True and rows["tx-s"]["below_linear"] is False
    assert rows["ffn-s"]["still_falling"] is True and rows["tx-s"]["still_falling"] is False
    assert rows["ffn-s"]["last_epoch_drop"] == pytest.approx(0.1 / 0.7)
    assert "still_falling" not in rows["cnn-s"] and "below_linear" not in rows["baseline-linear"]


def test_summary_without_baseline_linear_marks_nothing(tmp_path):
    write_with_refs(tmp_path, {k: v for k, v in WITH_REFS.items() if k != "baseline-linear"})
    out = invoke("summary", "sotu", root=tmp_path).stdout
    assert BELOW_LINEAR_NOTE not in out and "below baseline-linear" not in out and " *" not in out


@pytest.mark.compute
def test_the_report_writes_the_curves_for_dvc_plots_and_the_page(tmp_path):
    """plots/losses/<ds>.json in long format (model, cutoff label, seed, epoch, loss), a figure per model that
    has curves, and the page's Training section with its warnings."""
    from drift.report.html import figure
    from drift.report.training import training_html, write_training_curves

    deterministic(1)
    root = tmp_path
    models_dir = root / "data" / "models" / "tiny"
    inputs, targets = noisy_linear()
    save_trainings(models_dir, "probe-bert", inputs, targets, TrainParams(epochs=2, lr=1e-2))
    hand_manifest("tiny", ["1990", "2000"]).to_file(root / "data" / "slices" / "tiny.json")
    rows = write_training_curves("tiny", ["probe-bert", "baseline-linear"], root)
    assert json.loads((root / "plots" / "losses" / "tiny.json").read_text()) == rows
    assert len(rows) == 2 * 2 * 2  # seeds x cutoffs x epochs
    assert set(rows[0]) == {"model", "cutoff", "seed", "epoch", "loss"}
    assert {(r["cutoff"], r["seed"], r["epoch"]) for r in rows} == {
        (c, s, e) for c in ("1990", "2000") for s in (0, 1) for e in (1, 2)
    }
    loss = loss_curves(models_dir, "probe-bert")[1][0][1]
    assert next(r for r in rows if (r["cutoff"], r["seed"], r["epoch"]) == ("1990", 1, 2))["loss"] == round(
        loss, 6
    )
    assert (root / "plots" / "tiny" / "probe-bert" / "losses.png").exists()
    assert not (root / "plots" / "tiny" / "baseline-linear").exists()

    tables = {
        "metric": "accuracy",
        "higher_is_better": True,
        "ranking": [
            {"model": "probe-bert", "id": 0.6, "margin_linear": -0.1},
            {"model": "baseline-linear", "id": 0.7, "reference": True},
        ],
    }
    page = training_html("tiny", root, tables, figure)
    assert "probe-bert is below baseline-linear in distribution on tiny" in page
    assert "still falling at its last epoch" in page  # 2 epochs at the probes' pace: far from converged
    assert page.count("<img") == 1

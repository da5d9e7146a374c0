"""drift.train.engine trains what train_one trains: every family of the registry, several models with
different row counts (so different step counts) in one stack, compared parameter by parameter and prediction
by prediction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn

from drift.core.environment import deterministic
from drift.core.params import TrainParams, model_training
from drift.evaluate.fill_matrices import EvalJob, evaluate_seed
from drift.evaluate.predict import predict, predict_many
from drift.models import InputSpec, list_models
from drift.models.blocks import Dropout
from drift.models.checkpoints import (
    PixelStandardised,
    Standardised,
    build_model,
    list_checkpoints,
)
from drift.models.inputs import Inputs
from drift.protocol.matrix import drift_matrix, to_json
from drift.protocol.tasks import get_task
from drift.store.cells import code_version, row_hashes
from drift.store.slices import hand_manifest
from drift.train.engine import (
    Job,
    StackedAdam,
    _Stack,
    engine_path,
    mask_generator,
    train_many,
)
from drift.train.loop import make_optimizer, train_one, train_roster

N = 240
CFG = TrainParams(epochs=2, batch_size=16, lr=3e-3, weight_decay=0.05)
# rows per model: 2, 5 and 7 steps an epoch, last batches of 8, 11 and 4 rows (a batch-norm step on 1 row
# would amplify rounding beyond any tolerance, in either run)
ROW_COUNTS = (24, 75, 100)


def make_inputs(kind: str, rng) -> Inputs:
    if kind == "pixels":
        return Inputs("pixels", rng.integers(0, 256, (N, 3 * 8 * 8), dtype=np.uint8), image_shape=(3, 8, 8))
    if kind == "pooled":
        return Inputs("pooled", rng.normal(size=(N, 16)).astype(np.float32))
    lengths = rng.integers(1, 15, N)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return Inputs("tokens", rng.normal(size=(offsets[-1], 16)).astype(np.float16), offsets, max_tokens=16)


def make_targets(task_name: str, rng) -> tuple[torch.Tensor, int]:
    if task_name == "binary":
        return torch.as_tensor(rng.integers(0, 2, N)), 2
    if task_name == "regression":
        return torch.as_tensor(rng.integers(1, 6, N).astype(np.float32)), 1
    return torch.as_tensor(rng.integers(0, 2, (N, 3)).astype(np.float32)), 3


def key_bias(name: str, tensor: torch.Tensor) -> slice | None:
    """The key part of an attention's qkv bias: softmax ignores it (it adds the same q.b to every score), so
    its true gradient is 0 and Adam turns each run's rounding noise into +-lr steps; the outputs never see it.
    """
    return slice(len(tensor) // 3, 2 * len(tensor) // 3) if name.endswith("attn.qkv.bias") else None


# every family of the registry, at S size, each task used on several families
CASES = [
    ("mlp-s", "binary"),
    ("cnn-s", "regression"),
    ("resnet-s", "multilabel"),
    ("vit-s", "binary"),
    ("ffn-s", "regression"),
    ("textcnn-s", "multilabel"),
    ("tx-s", "regression"),
    ("bigru-s", "binary"),
    ("probe-bert", "multilabel"),
    ("probe-dinov2-s", "binary"),
]


@pytest.mark.compute
@pytest.mark.parametrize("name,task_name", CASES)
def test_engine_equals_train_one(name, task_name):
    deterministic(1)
    rng = np.random.default_rng(7)
    kind = next(m.input for m in list_models() if m.name == name)
    inputs = make_inputs(kind, rng)
    targets, n_outputs = make_targets(task_name, rng)
    task = get_task(task_name)
    modality = "image" if kind == "pixels" or name == "probe-dinov2-s" else "text"
    jobs = [Job(np.sort(rng.choice(N, n, replace=False)), seed) for seed, n in zip((11, 12, 13), ROW_COUNTS)]

    solo = [train_one(name, inputs, j.rows, targets, task, n_outputs, CFG, j.seed, modality) for j in jobs]
    many = train_many(name, inputs, jobs, targets, task, n_outputs, CFG, modality)

    rows = np.arange(N)
    for job, a, b in zip(jobs, solo, many):
        assert not b.training
        for (key, pa), pb in zip(a.state_dict().items(), b.state_dict().values()):
            if not pa.is_floating_point():
                assert torch.equal(pa, pb), key
                continue
            skip = key_bias(key, pa)
            if skip is not None:
                pa, pb = pa.clone(), pb.clone()
                pa[skip] = pb[skip] = 0
            # Adam moves every weight by about lr a step whatever its gradient's size, so a weight whose
            # gradient is near 0 (a unit just off at a ReLU, a conv filter under batch norm) turns the
            # rounding of another summation order (grouped vs plain kernels, AVX2 vs AVX-512) into up to a
            # step each way per step: no weight beyond 2 lr a step (the most two Adam runs can part, whatever
            # the CPU; measured here up to 0.06 lr in all, 0.33 lr on an AMD EPYC), and nearly all within 2e-5
            steps = CFG.epochs * -(-len(job.rows) // CFG.batch_size)
            diff = (pa - pb).abs()
            assert diff.max() <= 2 * CFG.lr * steps, (
                f"{name} seed {job.seed}: {key} differs by {diff.max():.2e}"
            )
            far = int((diff > 2e-5 + 1e-4 * pa.abs()).sum())
            assert far <= pa.numel() // 1000, f"{name} seed {job.seed}: {key}: {far} of {pa.numel()} differ"
        # what the user sees: predictions within 1e-4 (outputs are O(1); 8x the largest difference measured
        # under any CPU code path here, 1.3e-5 (vit-s), and below the 4 decimals a matrix reports)
        np.testing.assert_allclose(predict(a, inputs, rows), predict(b, inputs, rows), rtol=1e-4, atol=1e-4)
    # the models trained, each its own way: not the initial weights, not one another
    torch.manual_seed(jobs[0].seed)
    fresh = build_model(name, inputs.spec(), n_outputs, task_name)
    moved = [(p - q).abs().max() for p, q in zip(many[0].parameters(), fresh.parameters())]
    assert max(moved) > 1e-3
    assert not np.allclose(predict(many[0], inputs, rows), predict(many[1], inputs, rows))


@pytest.mark.compute
def test_every_registry_model_has_a_path():
    """Recurrent heads and the references go solo, every other family stacks; stated for the whole registry."""
    paths = {}
    for info in list_models():
        spec = {
            "pixels": InputSpec("pixels", (3, 8, 8)),
            "tokens": InputSpec("tokens", (16,), max_tokens=16),
            "pooled": InputSpec("pooled", (16,)),
            "auto": InputSpec("pooled", (16,)),
            "text": InputSpec("text", (1,)),
        }[info.input]
        model = build_model(info.name, spec, 2, "binary")
        optimizer = (
            None
            if info.family == "Reference"
            else make_optimizer(model, model_training(TrainParams(), info.family, "text", info.dropout, 16))
        )
        paths[info.name] = engine_path(model, optimizer)[0]
    solo = {n for n, p in paths.items() if p == "solo"}
    assert solo == {i.name for i in list_models() if i.family in ("Recurrent", "Reference")}
    assert {"cnn-l", "resnet-m", "vit-l", "tx-l", "textcnn-l", "ffn-l", "probe-bert"} <= set(paths) - solo


@pytest.mark.compute
def test_dropout_goes_solo():
    """torch's dropout draws from the global generator: solo; the registry's (drift.models.blocks.Dropout)
    takes each stacked model's masks: stacked."""
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1), nn.Linear(4, 1))
    assert engine_path(model)[0] == "solo"
    assert engine_path(nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.0)))[0] == "stacked"
    assert engine_path(nn.Sequential(nn.Linear(4, 4), Dropout(0.1)))[0] == "stacked"
    spec = InputSpec("tokens", (16,), max_tokens=16)
    assert engine_path(build_model("tx-s", spec, 2, "binary", 0.1))[0] == "stacked"
    assert engine_path(build_model("bigru-s", spec, 2, "binary", 0.1))[0] == "solo"
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    assert engine_path(nn.Linear(4, 1), sgd)[0] == "solo"


@pytest.mark.parametrize("kind", ["adam", "adam-l2", "adamw"])
def test_stacked_adam_matches_torch(kind):
    """Three models, each its own parameters and gradients; the stacked step against torch.optim per model,
    the last model dropping out after 3 of 6 steps."""
    torch.manual_seed(0)
    shapes = [(5, 3), (3,), (2, 2, 2)]
    models = [[torch.randn(s, requires_grad=True) for s in shapes] for _ in range(3)]
    grads = [
        [[torch.randn(s) * 10 ** float(torch.randint(-6, 1, ())) for s in shapes] for _ in range(3)]
        for _ in range(6)
    ]
    make = {
        "adam": lambda p: torch.optim.Adam(p, lr=0.01),
        "adam-l2": lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.1),
        "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
    }[kind]
    flat = torch.stack([torch.cat([p.detach().reshape(-1) for p in m]) for m in models])
    stacked = StackedAdam.like(make([torch.zeros(1, requires_grad=True)]), flat)
    optimizers = [make(m) for m in models]
    for step in range(6):
        n_active = 3 if step < 3 else 2
        for i in range(n_active):
            for p, g in zip(models[i], grads[step][i]):
                p.grad = g.clone()
            optimizers[i].step()
        grad = torch.stack([torch.cat([g.reshape(-1) for g in grads[step][i]]) for i in range(n_active)])
        stacked.step(n_active, step + 1, grad)
    for i in range(3):
        torch.testing.assert_close(
            flat[i], torch.cat([p.detach().reshape(-1) for p in models[i]]), rtol=1e-6, atol=1e-7
        )


@pytest.mark.compute
def test_predict_many_is_predict():
    deterministic(1)
    rng = np.random.default_rng(3)
    for name, kind in (("tx-s", "tokens"), ("bigru-s", "tokens"), ("cnn-s", "pixels")):
        inputs = make_inputs(kind, rng)
        models = []
        for seed in range(3):
            torch.manual_seed(seed)
            models.append(build_model(name, inputs.spec(), 2, "binary").eval())
        rows = rng.permutation(N)[:150]
        for model, out in zip(models, predict_many(models, inputs, rows, batch_size=32)):
            assert np.array_equal(out, predict(model, inputs, rows, batch_size=32))


class TinyData:
    """What train_roster and evaluate_seed read of a SliceData: four slices of synthetic token rows."""

    def __init__(self, rng):
        self.task = get_task("regression")
        self.labels = rng.integers(1, 6, N).astype(np.float32).tolist()
        self.slices = np.repeat(np.arange(4), N // 4)
        self.splits = np.where(rng.random(N) < 0.7, "train", "test").astype(object)
        self.manifest = hand_manifest("tiny", ["0", "1", "2", "3"], task="regression", label_names=["rating"])
        self.row_hashes = row_hashes([f"key{i}" for i in range(N)], self.labels, self.splits)
        self.paths = {"slices": Path("."), "features": Path(".")}  # what the executor checks workers can see
        self.usable = [True] * 4
        self.modality = "text"
        self.n_outputs = 1
        self._inputs = {"tokens": make_inputs("tokens", rng), "pooled": make_inputs("pooled", rng)}

    def inputs(self, name):
        return self._inputs["pooled" if name.startswith("baseline") else "tokens"]

    def usable_rows(self):
        return np.arange(N)

    def input_id(self, name):
        return "pooled" if name.startswith("baseline") else "tokens"


@pytest.mark.compute
def test_train_roster_batched_equals_solo(tmp_path):
    data = TinyData(np.random.default_rng(5))
    cfg = TrainParams(**{**CFG.model_dump(), "seeds": [0, 1]})
    solo_run = train_roster(data, ["ffn-s", "baseline-prior"], cfg, tmp_path / "solo")
    batched_run = train_roster(
        data, ["ffn-s", "baseline-prior"], cfg, tmp_path / "batched", train_many=train_many
    )
    # ffn-s: 2 seeds x 4 cutoffs trained; the reference fitted once per cutoff, its seed-1 copies reused
    assert (
        solo_run.counts
        == batched_run.counts
        == {"trained": 8 + 4, "reused": 4, "recomputed": {"corrupt": 0}, "executor": "local", "workers": 1}
    )
    assert solo_run.corrupt == batched_run.corrupt == []
    solo = sorted(p.relative_to(tmp_path / "solo") for p in (tmp_path / "solo").rglob("*.pt"))
    assert solo == sorted(p.relative_to(tmp_path / "batched") for p in (tmp_path / "batched").rglob("*.pt"))
    assert len(solo) == 2 * 4 * 2
    for rel in solo:
        a, b = torch.load(tmp_path / "solo" / rel), torch.load(tmp_path / "batched" / rel)
        for key in a:
            torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=2e-5)
    # the evaluation, reading each batch once for every checkpoint that needs it, gives the matrices of the
    # protocol computed one checkpoint at a time over every row (drift_matrix)
    checkpoints = list_checkpoints(tmp_path / "batched", "ffn-s")
    for seed in ("0", "1"):
        many, _, _, _ = evaluate_seed(
            EvalJob(
                data,
                "ffn-s",
                int(seed),
                checkpoints[int(seed)],
                tmp_path / "cells",
                1,
                code_version("evaluate"),
            )
        )
        outputs = {}
        for k in range(4):
            model = build_model("ffn-s", data.inputs("ffn-s").spec(), 1, "regression")
            model.load_state_dict(
                torch.load(tmp_path / "batched" / "ffn-s" / f"seed{seed}" / f"cutoff{k:03d}.pt")
            )
            outputs[k] = predict(model.eval(), data.inputs("ffn-s"), np.arange(N))
        one = to_json(
            drift_matrix(outputs, np.array(data.labels), data.slices, data.splits, data.usable, data.task)
        )
        assert many == one


@pytest.mark.compute
def test_jobs_split_over_several_stacks():
    """Five jobs, at most two models a stack: three stacks, every model still its train_one twin."""
    deterministic(1)
    rng = np.random.default_rng(9)
    inputs = make_inputs("tokens", rng)
    targets, n_outputs = make_targets("binary", rng)
    task = get_task("binary")
    jobs = [
        Job(np.sort(rng.choice(N, n, replace=False)), seed) for seed, n in enumerate((20, 90, 33, 60, 120))
    ]
    many = train_many("ffn-s", inputs, jobs, targets, task, n_outputs, CFG, max_stack=2)
    rows = np.arange(N)
    for job, model in zip(jobs, many):
        solo = train_one("ffn-s", inputs, job.rows, targets, task, n_outputs, CFG, job.seed)
        np.testing.assert_allclose(
            predict(model, inputs, rows), predict(solo, inputs, rows), rtol=1e-4, atol=2e-5
        )


@pytest.mark.compute
def test_the_evaluate_stage_runs_the_protocols_definition(tmp_path, monkeypatch):
    """Editing the rows a cell is scored on (drift.protocol.matrix.eval_rows) changes what evaluation
    computes: the definition is the code that runs, the cache and the batched prediction only feed it."""
    import drift.protocol.matrix as matrix

    data = TinyData(np.random.default_rng(5))
    train_roster(data, ["ffn-s"], CFG.model_copy(update={"seeds": [0]}), tmp_path / "models")
    checkpoints = list_checkpoints(tmp_path / "models", "ffn-s")[0]

    def run(cells):
        return evaluate_seed(
            EvalJob(data, "ffn-s", 0, checkpoints, tmp_path / cells, 1, code_version("evaluate"))
        )

    paper, _, counts, _ = run("cells")
    # every cell of the 4 x 4 matrix, then cached
    assert counts["computed"] == 16 and run("cells")[2]["reused"] == 16
    real = matrix.eval_rows
    monkeypatch.setattr(
        matrix,
        "eval_rows",
        lambda i, j, slices, splits: real(i, j, slices, np.where(splits == "test", "train", "test")),
    )  # past cells on the training rows instead of the held-out ones
    edited, _, _, _ = run("other-cells")
    past = [(i, j) for i in range(4) for j in range(i + 1)]
    assert all(edited[i][j] != paper[i][j] for i, j in past)
    # the future is all of slice j
    assert all(edited[i][j] == paper[i][j] for i in range(4) for j in range(i + 1, 4))


@pytest.mark.compute
def test_stacked_dropout_masks_are_each_models_own():
    """Three copies of one tx-s in a stack, mask generators seeded 1, 2, 1: the same seed gives the same masks
    (equal outputs), another seed other masks; no noise (p = 0, or eval mode) is the model's own forward."""
    rng = np.random.default_rng(4)
    inputs = make_inputs("tokens", rng)
    rows = np.stack([np.arange(12)] * 3)
    xs = tuple(x.reshape(*rows.shape, *x.shape[1:]) for x in inputs.batch(rows.reshape(-1)))
    for p in (0.3, 0.0):
        torch.manual_seed(0)
        model = build_model("tx-s", inputs.spec(), 2, "binary", p).train()
        stack = _Stack([model] * 3, torch.device("cpu"))
        noise = stack.noise(xs, [mask_generator(s) for s in (1, 2, 1)])
        with torch.no_grad():
            out = stack.forward(stack.flat, [0, 1, 2], xs, noise)
            alone = model(*(x[0] for x in xs))
        if p:
            # every dropout of the model fed one mask per model: the block's four (attention weights, after
            # attention, after the MLP's activation, after the MLP) and the head's
            assert len(noise) == 4 + 1 and all(t.shape[0] == 3 for t in noise.values())
            torch.testing.assert_close(out[0], out[2], rtol=1e-6, atol=1e-6)
            assert (out[0] - out[1]).abs().max() > 1e-2
            assert not torch.allclose(out[0], alone, atol=1e-3)
        else:
            assert noise == {}
            torch.testing.assert_close(out[1], alone, rtol=1e-5, atol=1e-6)


@pytest.mark.compute
@pytest.mark.parametrize("name", ["ffn-s", "tx-s", "vit-s"])
def test_train_many_with_dropout_follows_each_seed(name):
    """Dropout 0.2, three jobs on the same rows with seeds 11, 12, 11 in one stack: the two seed-11 models are
    the same model (same initialisation, batches and masks), the seed-12 one another; a second run gives the
    same models again; and dropout changed what was learnt."""
    deterministic(1)
    rng = np.random.default_rng(8)
    kind = "pixels" if name == "vit-s" else "tokens"
    inputs = make_inputs(kind, rng)
    targets, n_outputs = make_targets("binary", rng)
    task = get_task("binary")
    rows = np.sort(rng.choice(N, 90, replace=False))
    jobs = [Job(rows, seed) for seed in (11, 12, 11)]
    cfg = TrainParams(**{**CFG.model_dump(), "dropout": 0.2})
    modality = "image" if kind == "pixels" else "text"
    first = train_many(name, inputs, jobs, targets, task, n_outputs, cfg, modality)
    again = train_many(name, inputs, jobs, targets, task, n_outputs, cfg, modality)
    plain = train_many(name, inputs, jobs[:1], targets, task, n_outputs, CFG, modality)
    every = np.arange(N)
    out = [predict(m, inputs, every) for m in first]
    np.testing.assert_allclose(out[0], out[2], rtol=1e-5, atol=1e-6)
    assert np.abs(out[0] - out[1]).max() > 1e-3
    for a, b in zip(first, again):
        for pa, pb in zip(a.parameters(), b.parameters()):
            assert torch.equal(pa, pb)
    assert np.abs(out[0] - predict(plain[0], inputs, every)).max() > 1e-3


@pytest.mark.compute
@pytest.mark.parametrize(
    "name,task_name",
    [("ffn-s", "regression"), ("cnn-s", "binary"), ("tx-s", "multilabel"), ("probe-bert", "regression")],
)
def test_gradient_clipping_batched_equals_solo(name, task_name):
    """train.grad_clip clips each stacked model's own gradient norm, as clip_grad_norm_ in train_one; with a
    bound this tight every step is clipped, so a clip over the whole stack (or none) would not match."""
    deterministic(1)
    rng = np.random.default_rng(3)
    kind = next(m.input for m in list_models() if m.name == name)
    inputs = make_inputs(kind, rng)
    targets, n_outputs = make_targets(task_name, rng)
    task = get_task(task_name)
    modality = "image" if kind == "pixels" else "text"
    jobs = [Job(np.sort(rng.choice(N, n, replace=False)), seed) for seed, n in zip((21, 22, 23), ROW_COUNTS)]
    clipped = TrainParams(
        **{**CFG.model_dump(), "grad_clip": 0.05, "standardise_targets": False, "standardise_pixels": False}
    )
    solo = [
        train_one(name, inputs, j.rows, targets, task, n_outputs, clipped, j.seed, modality) for j in jobs
    ]
    many = train_many(name, inputs, jobs, targets, task, n_outputs, clipped, modality)
    free = train_one(
        name,
        inputs,
        jobs[0].rows,
        targets,
        task,
        n_outputs,
        TrainParams(**{**clipped.model_dump(), "grad_clip": None}),
        jobs[0].seed,
        modality,
    )
    rows = np.arange(N)
    for a, b in zip(solo, many):
        assert not isinstance(a, Standardised) and not isinstance(a, PixelStandardised)
        np.testing.assert_allclose(predict(a, inputs, rows), predict(b, inputs, rows), rtol=1e-4, atol=2e-5)
    assert np.abs(predict(free, inputs, rows) - predict(solo[0], inputs, rows)).max() > 1e-3  # the clip binds


@pytest.mark.compute
@pytest.mark.parametrize(
    "targets_on,pixels_on,scale",
    [
        (True, True, "unit"),
        (False, True, "unit"),
        (True, False, "unit"),
        (False, False, "unit"),
        (True, True, "raw"),
        (False, False, "raw"),
    ],
)
def test_checkpoints_say_which_standardisation_they_hold(tmp_path, targets_on, pixels_on, scale):
    """train.standardise_targets / standardise_pixels off build the bare model; a checkpoint read back gets
    the wrappers it was saved with, PixelScaled (train.pixel_scale: raw) included (evaluate needs no parameter
    to read a paper preset's checkpoints)."""
    from drift.models.checkpoints import PixelScaled, load_checkpoint, save_checkpoint

    spec = InputSpec("pixels", (3, 8, 8))
    model = build_model(
        "mlp-s",
        spec,
        1,
        "regression",
        standardise_targets=targets_on,
        standardise_pixels=pixels_on,
        pixel_scale=scale,
    )
    assert isinstance(model, Standardised) == targets_on
    outer = model.inner if targets_on else model
    assert isinstance(outer, PixelScaled) == (scale == "raw")
    assert isinstance(outer.inner if scale == "raw" else outer, PixelStandardised) == pixels_on
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01)
    save_checkpoint(model, tmp_path / "m.pt")
    back = load_checkpoint("mlp-s", spec, 1, "regression", tmp_path / "m.pt")
    assert type(back) is type(model)
    x = torch.rand(4, 3, 8, 8) * 255
    torch.testing.assert_close(back(x), model.eval()(x))


@pytest.mark.compute
def test_evaluation_hands_each_model_its_pixel_scale():
    """predict_many over a model of train.pixel_scale raw and one of unit, sharing the batches: the first
    reads the stored values themselves, the second them / 255, each the outputs it gives alone."""
    rng = np.random.default_rng(6)
    inputs = make_inputs("pixels", rng)
    rows = np.arange(min(N, 200))
    torch.manual_seed(0)
    raw = build_model("mlp-s", inputs.spec(), 2, "binary", standardise_pixels=False, pixel_scale="raw").eval()
    unit = build_model("mlp-s", inputs.spec(), 2, "binary", standardise_pixels=False).eval()
    both = predict_many([raw, unit], inputs, rows)
    with torch.no_grad():
        (stored,) = inputs.as_stored().batch(rows)
        assert stored.max() > 1.5  # the 0-255 values
        np.testing.assert_array_equal(both[0], raw.inner(stored).numpy())
        np.testing.assert_array_equal(both[1], unit(stored / 255.0).numpy())
    np.testing.assert_array_equal(both[1], predict(unit, inputs, rows))


@pytest.mark.compute
@pytest.mark.parametrize("name", ["mlp-s", "cnn-s"])
def test_raw_pixel_scale_batched_equals_solo(name):
    """train.pixel_scale raw: the stacked engine trains what train_one trains, and the model differs from the
    one trained on [0, 1] pixels."""
    deterministic(1)
    rng = np.random.default_rng(5)
    inputs = make_inputs("pixels", rng)
    targets, n_outputs = make_targets("binary", rng)
    task = get_task("binary")
    # 0-255 inputs without standardisation take large steps: a small rate keeps the float differences of the
    # two paths from growing through training (at CFG's rate cnn-s's outputs drifted 0.04 apart on some CPUs)
    raw = TrainParams(**{**CFG.model_dump(), "standardise_pixels": False, "pixel_scale": "raw", "lr": 1e-4})
    jobs = [Job(np.sort(rng.choice(N, n, replace=False)), seed) for seed, n in zip((31, 32), ROW_COUNTS[1:])]
    solo = [train_one(name, inputs, j.rows, targets, task, n_outputs, raw, j.seed, "image") for j in jobs]
    many = train_many(name, inputs, jobs, targets, task, n_outputs, raw, "image")
    unit = train_one(
        name,
        inputs,
        jobs[0].rows,
        targets,
        task,
        n_outputs,
        TrainParams(**{**raw.model_dump(), "pixel_scale": "unit"}),
        jobs[0].seed,
        "image",
    )
    rows = np.arange(N)
    for a, b in zip(solo, many):
        np.testing.assert_allclose(predict(a, inputs, rows), predict(b, inputs, rows), rtol=1e-4, atol=1e-4)
    assert np.abs(predict(unit, inputs, rows) - predict(solo[0], inputs, rows)).max() > 1e-3


@pytest.mark.compute
@pytest.mark.parametrize("name,task_name", [("ffn-s", "regression"), ("mlp-s", "binary")])
def test_uniform_batch_order_batched_equals_solo(name, task_name):
    """train.batch_order uniform (and loss weights from other rows): the stacked engine draws each member's
    batches as train_one does, so both train the same models; and the order is not the bucketed one."""
    deterministic(1)
    rng = np.random.default_rng(9)
    kind = next(m.input for m in list_models() if m.name == name)
    inputs = make_inputs(kind, rng)
    targets, n_outputs = make_targets(task_name, rng)
    task = get_task(task_name)
    modality = "image" if kind == "pixels" else "text"
    cfg = TrainParams(**{**CFG.model_dump(), "batch_order": "uniform", "loss_weights": "split"})
    every = np.arange(N)
    jobs = [
        Job(np.sort(rng.choice(N, n, replace=False)), seed, every)
        for seed, n in zip((41, 42), ROW_COUNTS[1:])
    ]
    solo = [
        train_one(name, inputs, j.rows, targets, task, n_outputs, cfg, j.seed, modality, None, j.weight_rows)
        for j in jobs
    ]
    many = train_many(name, inputs, jobs, targets, task, n_outputs, cfg, modality)
    bucketed = train_one(name, inputs, jobs[0].rows, targets, task, n_outputs, CFG, jobs[0].seed, modality)
    for a, b in zip(solo, many):
        np.testing.assert_allclose(predict(a, inputs, every), predict(b, inputs, every), rtol=1e-4, atol=1e-4)
    assert np.abs(predict(bucketed, inputs, every) - predict(solo[0], inputs, every)).max() > 1e-3

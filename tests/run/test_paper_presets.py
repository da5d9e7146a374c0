"""The paper presets are the authors' published runs: every fact of params/paper-runs/<dataset>.json
(extracted from their snapshots, learning-mechanisms/drift-happens, CC BY 4.0) checked against the preset
applied to params.yaml, field by field. A fact may differ only where the preset names it on a `# deviation
<key>: <why>` line, and the documentation's page on fidelity to the authors' runs
(docs/explanations/fidelity.md) lists every such line."""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
import yaml

from drift.core.dataset_registry import DATASETS
from drift.core.encoder_registry import ENCODERS, autocast_dtype
from drift.core.params import model_training
from drift.core.presets import apply_preset
from drift.data.datasets import dataset_cfg
from drift.data.datasets import yearbook as yearbook_module
from drift.encoders.embed import encoder_kwargs
from drift.models import get_model_info
from drift.protocol.slicing import per_slice_split, slice_edges
from drift.protocol.tasks import get_task
from drift.train.loop import make_optimizer, trainer_key
from tests.helpers import SHIPPED_PARAMS, checked_params

ROOT = Path(__file__).resolve().parents[2]
PRESETS = {"paper-yearbook": "yearbook", "paper-amazon": "amazon", "paper-arxiv": "arxiv"}
DEVIATION = re.compile(r"^# deviation (\S+): (.+)$", re.M)
# their frozen image encoders, as their code loads them, and ours where they are the same weights
SAME_WEIGHTS = {
    "probe-dinov2-s": "vit_small_patch14_dinov2.lvd142m",  # torch.hub dinov2_vits14
    "probe-dinov3-s": "vit_small_patch16_dinov3.lvd1689m",  # facebook/dinov3-vits16-pretrain-lvd1689m
    "probe-eva02-b": "eva02_base_patch14_224.mim_in22k",
    "probe-clip-b32": "vit_base_patch32_clip_224.openai",  # openai/clip-vit-base-patch32
    "probe-siglip-b": "vit_base_patch16_siglip_224.webli",  # google/siglip-base-patch16-224
    "probe-resnet50-in": "resnet50.a1_in1k",
    "probe-vit-s16-in21k": "vit_small_patch16_224.augreg_in21k",
    "probe-mae-b": "vit_base_patch16_224.mae",
}


def facts(dataset: str) -> dict:
    return json.loads((ROOT / "params" / "paper-runs" / f"{dataset}.json").read_text())


def applied(preset: str, tmp_path: Path, presets: Path = ROOT / "params"):
    params_path = tmp_path / "params.yaml"
    shutil.copy(SHIPPED_PARAMS, params_path)
    apply_preset(preset, params_path=params_path, presets=presets, check=checked_params)
    return checked_params(yaml.safe_load(params_path.read_text()))


def deviations(preset: str) -> dict[str, str]:
    return dict(DEVIATION.findall((ROOT / "params" / f"{preset}.yaml").read_text()))


# ---------------------------------------------------------------- our side of each fact: what our code does
# Each helper runs a piece of our pipeline on a small input under the preset's params (the slice stage's draw, the
# training loop's rows, batches and step, the evaluate stage's metric, the embed stage's store, the ingest) and
# names what it saw as the fact table names the authors' behaviour; code that behaves otherwise reads as what it
# did, so the comparison fails. Each runs once per params section it reads (OBSERVED).

OBSERVED: dict[tuple, object] = {}
GIB = 1024**3
# the head's outputs: two classes, a rating, seven labels
N_OUTPUTS = {"yearbook": 2, "amazon": 1, "arxiv": 7}


def observed(what: str, key: str, compute):
    """compute() once per (what, key), key: the JSON of the params it reads."""
    if (what, key) not in OBSERVED:
        OBSERVED[what, key] = compute()
    return OBSERVED[what, key]


def slice_span(slices) -> tuple[str, int, int]:
    """The slices the slice stage cuts: the unit their edges are apart (months, named), and the first and the
    last slice's time value as the authors key a slice (slice_time: a year, or a half-year counted from 2000).
    """
    from drift.train.loop import slice_time

    edges, labels = slice_edges(slices)
    months = (edges[1].year - edges[0].year) * 12 + edges[1].month - edges[0].month
    unit = {1: "month", 3: "quarter", 6: "half-year", 12: "year", 120: "decade"}.get(
        months, f"{months} months"
    )
    return unit, slice_time(labels[0]), slice_time(labels[-1])


def cutoff_gathering(train) -> str:
    """The rows the training loop gives f_k (cutoff_rows, as train_group and the checkpoint keys take them,
    under train.row_order) on a table of 4 slices of train and test rows: cumulative_from_start when they are
    the train split of every slice <= k, current_slice when of slice k alone, else the rows themselves."""
    from types import SimpleNamespace

    from drift.train.loop import cutoff_rows

    slices = np.repeat(np.arange(4), 5)
    splits = np.tile(np.array(["train", "test", "train", "train", "test"], dtype=object), 4)
    drawn = np.random.default_rng(0).permutation(np.flatnonzero(splits == "train"))
    # train.row_order split: slice after slice, as drawn
    drawn = drawn[np.argsort(slices[drawn], kind="stable")]
    table = SimpleNamespace(slices=slices, splits=splits, split_order=lambda: drawn)
    got = [sorted(cutoff_rows(table, k, train.row_order).tolist()) for k in range(4)]

    def train_rows(first: int, last: int) -> list[int]:
        return [i for i in range(len(slices)) if splits[i] == "train" and first <= slices[i] <= last]

    if got == [train_rows(0, k) for k in range(4)]:
        return "cumulative_from_start"
    if got == [train_rows(k, k) for k in range(4)]:
        return "current_slice"
    return f"rows {got}"


def empty_cell_rule(task_name: str, evaluate) -> str:
    """What our drift_matrix writes, under the preset's evaluate rules, in the cell of a slice kept for
    training but without a test row (as Yearbook's one-portrait 1924), on its own cutoff: zero (0.0) or empty
    (NaN)."""
    from drift.protocol.matrix import drift_matrix

    slices = np.array([0, 0, 0, 1, 2, 2, 2])
    splits = np.array(["train", "test", "test", "train", "train", "test", "test"])
    rng = np.random.default_rng(6)
    if task_name in ("binary", "multiclass"):
        labels, outputs = rng.integers(0, 2, 7), rng.normal(size=(7, 2))
    elif task_name == "regression":
        labels, outputs = rng.integers(1, 6, 7).astype(float), rng.normal(3, 1, (7, 1))
    else:
        labels, outputs = np.tile([[0, 1], [1, 0]], (4, 1))[:7], rng.normal(size=(7, 2))
    task = get_task(task_name).scoring(evaluate.empty_cell, evaluate.auc_scores)
    matrix = drift_matrix(
        {i: outputs for i in range(3)},
        labels,
        slices,
        splits,
        [True, False, True],
        task,
        trainable=[True, True, True],
    )
    value = matrix[1, 1]
    return "empty" if np.isnan(value) else "zero" if value == 0 else f"scored {value}"


def auc_ranking(evaluate) -> str:
    """What our macro AUC ranks under the preset's rules, on logits float32 sigmoids tie (17 and 18 both round
    to 1.0): float32_sigmoid when it equals their roc_auc_score of float32 sigmoids, logits when it equals
    roc_auc_score of the logits (each its own number here)."""
    from sklearn.metrics import roc_auc_score

    y = np.array([[1], [0], [1], [0]])
    logits = np.array([[18.0], [17.0], [18.0], [-1.0]])
    ours = get_task("multilabel").scoring(evaluate.empty_cell, evaluate.auc_scores).score(y, logits)
    sigmoid, plain = their_score("auc_macro", y, logits), roc_auc_score(y[:, 0], logits[:, 0])
    assert sigmoid != plain, "the input must tell the two apart"
    return {sigmoid: "float32_sigmoid", plain: "logits"}.get(ours, f"macro AUC {ours}")


def cutoff_row_order(train) -> str:
    """The order of the rows the training loop gives the last cutoff (cutoff_rows under train.row_order) on
    the table of cutoff_gathering: split_order (slice after slice, each as its draw returned them: theirs) or
    time_order (the table's own order)."""
    from types import SimpleNamespace

    from drift.train.loop import cutoff_rows

    slices = np.repeat(np.arange(4), 5)
    splits = np.tile(np.array(["train", "test", "train", "train", "test"], dtype=object), 4)
    drawn = np.random.default_rng(0).permutation(np.flatnonzero(splits == "train"))
    drawn = drawn[np.argsort(slices[drawn], kind="stable")]
    table = SimpleNamespace(slices=slices, splits=splits, split_order=lambda: drawn)
    rows = cutoff_rows(table, 3, train.row_order).tolist()
    if rows == drawn.tolist():
        return "split_order"
    return "time_order" if rows == sorted(rows) else f"rows {rows}"


def split_row_order(split) -> str:
    """The order each slice's rows reach the per-slice draw in, as the slice stage runs it: 40 records over 3
    years in neither time nor id order, split by build_slices under the preset's split params, against our
    per-slice draw (test_split_draws_their_test_rows) on the rows in each candidate order: ingest_order (the
    records' own), time_order (stably by time) or id_order; which one gives build_slices' split (each a
    different one here)."""
    import pyarrow as pa

    from drift.core.params import DatasetParams
    from drift.protocol.slicing import build_slices

    if split.draw != "per-slice":
        return f"no per-slice draw (split.draw {split.draw})"
    rng = np.random.default_rng(11)
    n = 40
    years = rng.integers(1950, 1953, n)
    days = rng.permutation(n)  # distinct dates: one time order
    times = np.array(
        [f"{y}-{1 + d // 28:02d}-{1 + d % 28:02d}" for y, d in zip(years, days)], "datetime64[us]"
    )
    ids = [f"r{i:02d}" for i in rng.permutation(n)]
    labels = rng.integers(0, 2, n).tolist()
    records = pa.table({"id": ids, "time": pa.array(times), "label": labels})
    cfg = DatasetParams(slices={"unit": "year", "start": 1950, "end": 1953})
    table, _ = build_slices(records, cfg, split)
    drawn = dict(zip(table.column("id").to_pylist(), table.column("split").to_pylist()))
    candidates = {
        "ingest_order": np.arange(n),
        "time_order": np.argsort(times, kind="stable"),
        "id_order": np.argsort(ids, kind="stable"),
    }
    splits = {}
    for name, order in candidates.items():
        ours = per_slice_split(
            years[order] - 1950,
            [labels[i] for i in order],
            "label" in split.stratify,
            split.test_fraction,
            split.seed,
        )
        splits[name] = {ids[i]: s for i, s in zip(order, ours)}
    assert len({tuple(sorted(s.items())) for s in splits.values()}) == len(splits), (
        "the candidates must differ"
    )
    return next((name for name, s in splits.items() if s == drawn), "none of ingest, time or id order")


def their_score(metric: str, y: np.ndarray, outputs: np.ndarray) -> float:
    """Their metric as their evaluation/metrics.py computes it: accuracy, the trace of the argmax predictions'
    confusion matrix over its sum; balanced MSE, the MSE within each rating present, averaged over those
    ratings (RegressiveClassificationMetrics); macro AUC, scikit-learn's roc_auc_score of each label with both
    classes on their float32 sigmoid probabilities, averaged over those labels (MultiLabelROCAUCTracker)."""
    from sklearn.metrics import roc_auc_score

    if metric == "accuracy":
        return float(np.mean(outputs.argmax(1) == y))
    if metric == "balanced_mse":
        pred = outputs.reshape(-1).astype(np.float64)
        return float(np.mean([np.mean((y[y == r] - pred[y == r]) ** 2) for r in np.unique(y)]))
    if metric == "auc_macro":
        probs = torch.sigmoid(torch.from_numpy(outputs).float()).numpy()
        return float(
            np.mean(
                [roc_auc_score(y[:, c], probs[:, c]) for c in range(y.shape[1]) if 0 < y[:, c].sum() < len(y)]
            )
        )
    raise KeyError(f"no formula for {metric}")


def scored_metric(task_name: str, evaluate, metric: str) -> str:
    """Our evaluate stage's metric (the task scoring under the preset's evaluate rules, Task.score: what
    drift_matrix scores a cell with) against their formula for `metric`, on one shared random input of the
    task's shape (a rating absent, a label never and one always positive): `metric` when the numbers agree,
    else both."""
    rng = np.random.default_rng(5)
    n = 300
    if task_name in ("binary", "multiclass"):
        classes = 2 if task_name == "binary" else 4
        y, outputs = rng.integers(0, classes, n), rng.normal(size=(n, classes))
    elif task_name == "regression":
        y, outputs = rng.choice([1.0, 2.0, 4.0, 5.0], n, p=[0.1, 0.2, 0.3, 0.4]), rng.normal(3, 1.5, (n, 1))
    else:
        y, outputs = (rng.random((n, 7)) < 0.3).astype(np.int64), rng.normal(0, 2, (n, 7))
        y[:, 5], y[:, 6] = 0, 1
    task = get_task(task_name).scoring(evaluate.empty_cell, evaluate.auc_scores)
    ours = task.score(y, outputs)
    try:
        theirs = their_score(metric, y, outputs)
    except (KeyError, ValueError, IndexError) as e:
        return f"{task.metric}: {ours} ({metric} does not apply: {e})"
    if ours is not None and math.isclose(ours, theirs, rel_tol=1e-12, abs_tol=1e-12):
        return metric
    return f"{task.metric}: {ours} (their {metric}: {theirs})"


def training_case(dataset: str, params, kind: str, n: int, scale: float = 1.0):
    """A cutoff of n rows for the preset's first model reading `kind`: its name, inputs, rows, targets, task,
    outputs and modality. Token states are a zero-copy view (any size, no memory), every row max_tokens long;
    pooled vectors are normal draws times `scale`."""
    from drift.models.inputs import Inputs

    task_name, modality = DATASETS[dataset][:2]
    name = next(m for m in params.train.models[dataset] if get_model_info(m).input == kind)
    rng = np.random.default_rng(1)
    if kind == "tokens":
        dim, width = ENCODERS[params.embed.text_encoder].dim, params.max_tokens
        data = np.broadcast_to(np.zeros((1, dim), np.float16), (n * width, dim))
        inputs = Inputs("tokens", data, np.arange(n + 1) * width, max_tokens=width)
    else:
        dim = ENCODERS[name.removeprefix("probe-")].dim
        inputs = Inputs("pooled", (rng.normal(size=(n, dim)) * scale).astype(np.float32))
    labels = {
        "binary": lambda: rng.integers(0, 2, n),
        "regression": lambda: rng.integers(1, 6, n).astype(float),
        "multilabel": lambda: (rng.random((n, 7)) < 0.3).astype(np.int64),
    }[task_name]()
    task = get_task(task_name)
    return name, inputs, np.arange(n), task.target_tensor(labels), task, N_OUTPUTS[dataset], modality


def run_training(case, train, seed: int):
    """One job as the train stage runs it under `train`: train_one, or the batched engine's train_many where
    train.engine batches the model (auto: its choice for the model's family on a CPU); the loss weights' rows
    as train.loss_weights takes them (every row here is a training row)."""
    from types import SimpleNamespace

    from drift.train import engine
    from drift.train.loop import Job, loss_weight_rows, train_one
    from drift.train.rates import engine_choice

    name, inputs, rows, targets, task, n_outputs, modality = case
    how = train.engine if train.engine != "auto" else engine_choice(get_model_info(name).family, "cpu")[0]
    weight_rows = loss_weight_rows(SimpleNamespace(splits=np.full(len(rows), "train")), train)
    if how == "solo":
        return train_one(
            name, inputs, rows, targets, task, n_outputs, train, seed, modality, None, weight_rows
        )
    train = train.model_copy(update={"engine": "batched"})
    job = Job(rows, seed, weight_rows)
    return engine.train_many(name, inputs, [job], targets, task, n_outputs, train, modality)[0]


def loader_draws(dataset: str, params) -> dict:
    """What the training loop's sampler hands a cutoff under the preset's train params, read from the loop
    itself: every epoch's batches as epoch_batches gives them to the loop (which here steps on none). The
    cutoff: a text dataset's first token head on token states of over 8 GiB (where their chunk-blocked sampler
    takes over), an image dataset's first probe. Returns the epochs and batch size seen, and which
    DataLoader(shuffle=True) over the cutoff's rows gives the same batches epoch after epoch: `after-init`,
    one without a generator of its own, from the global torch state as the first epoch starts (theirs);
    `seed-epoch`, one seeded seed + epoch; None."""
    from unittest import mock

    from torch.utils.data import DataLoader

    from drift.train import engine, loop

    if DATASETS[dataset][1] == "text":
        bytes_per_row = params.max_tokens * ENCODERS[params.embed.text_encoder].dim * 2  # float16
        case = training_case(dataset, params, "tokens", math.ceil(1.05 * 8 * GIB / bytes_per_row))
        assert case[1].data.nbytes > 8 * GIB
    else:
        case = training_case(dataset, params, "pooled", 300)
    rows, seed, real = case[2], 1234, loop.epoch_batches
    seen: list[list[np.ndarray]] = []
    state: list[torch.Tensor] = []

    def spy(*args, **kwargs):
        if not state:
            state.append(torch.get_rng_state())
        seen.append(real(*args, **kwargs))
        return []

    with (
        torch.random.fork_rng(devices=[]),
        mock.patch.object(loop, "epoch_batches", spy),
        mock.patch.object(engine, "epoch_batches", spy),
    ):
        run_training(case, params.train, seed)
    size = max(len(b) for b in seen[0])

    def loader(generator=None) -> DataLoader:
        return DataLoader(rows.tolist(), batch_size=size, shuffle=True, collate_fn=list, generator=generator)

    ours = [[batch.tolist() for batch in epoch] for epoch in seen[:2]]
    with torch.random.fork_rng(devices=[]):
        torch.set_rng_state(state[0])
        after_init = loader()  # the same loader epoch after epoch, its draws from the global generator
        draws = "after-init" if [list(after_init) for _ in range(2)] == ours else None
    if draws is None:
        seeded = [list(loader(torch.Generator().manual_seed(seed + epoch))) for epoch in range(2)]
        draws = "seed-epoch" if seeded == ours else None
    return {"epochs": len(seen), "batch_size": size, "draws": draws}


def clipped_norm(dataset: str, params) -> float | None:
    """The gradient norm the training loop steps with, on one step of the preset's first probe (a batch of 4
    rows of pooled vectors scaled by 1e4: a raw norm far above any clip) under the preset's train params, read
    at the optimiser's step (torch's, or the batched engine's): None when it is the raw gradient's norm (the
    same step with train.grad_clip null), else that norm to 6 digits: the clip acting."""
    from unittest import mock

    from torch.optim.optimizer import register_optimizer_step_pre_hook

    from drift.train import engine

    train = params.train.model_copy(update={"epochs": 1})
    case = training_case(dataset, params, "pooled", min(4, train.batch_size), scale=1e4)

    def stepped_norm(train) -> float:
        norms: list[float] = []

        def before_step(optimizer, args, kwargs):
            grads = [
                p.grad.reshape(-1) for g in optimizer.param_groups for p in g["params"] if p.grad is not None
            ]
            norms.append(float(torch.cat(grads).norm()))

        real_step = engine.StackedAdam.step

        def stacked_step(self, n_active, step, grad):
            norms.append(float(grad[0].norm()))
            return real_step(self, n_active, step, grad)

        handle = register_optimizer_step_pre_hook(before_step)
        try:
            with (
                torch.random.fork_rng(devices=[]),
                mock.patch.object(engine.StackedAdam, "step", stacked_step),
            ):
                run_training(case, train, 0)
        finally:
            handle.remove()
        assert len(norms) == 1, f"one step expected, the loop took {len(norms)}"
        return norms[0]

    raw, stepped = stepped_norm(train.model_copy(update={"grad_clip": None})), stepped_norm(train)
    assert raw > 1e4, f"a raw gradient norm of {raw} shows no clip"
    return None if stepped >= raw * (1 - 1e-6) else float(f"{stepped:.6g}")


class StubEncoder:
    """The embed stage's encoder without its network: `encode` gives each payload (a text, or an image) its
    own pooled vector and three token states, float32 values with bits below float16's, drawn from its bytes.
    """

    def __init__(self, name: str, with_tokens: bool, folder: Path):
        self.spec, self.dim, self.batch_size, self.with_tokens = ENCODERS[name], 8, 4, with_tokens
        self.path = folder  # its weights: a local folder (no Hugging Face revision)

    def fingerprint(self) -> dict:
        return {"stub": self.spec.name}

    def fingerprint_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.fingerprint()).encode()).hexdigest()

    def length_order(self, texts) -> np.ndarray:
        return np.argsort([-len(t) for t in texts], kind="stable")

    def values(self, payload) -> np.ndarray:
        """[4, dim]: the pooled vector, then the token states."""
        data = payload.encode() if isinstance(payload, str) else np.ascontiguousarray(payload).tobytes()
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(data).digest()[:8], "big"))
        return (1 + rng.random((4, self.dim)) / 3).astype(np.float32)

    def encode(self, payload, on_batch=None):
        values = [self.values(p) for p in payload]
        pooled = np.stack([v[0] for v in values])
        if not self.with_tokens:
            return pooled
        return pooled, np.concatenate([v[1:] for v in values]), np.full(len(values), 3, np.int32)


def stored_precision(modality: str, embed) -> dict[tuple[str, str], str]:
    """The precision our models read embeddings at, as the embed stage stores them under the preset's embed
    params: embed_all (the stage's function, each encoder's network a StubEncoder) on a slice table of three
    rows, the feature files built from its store tables (write_features), read back as the models read them
    (open_inputs). {(encoder, pooled | tokens): float32 when the encoder's values come back exactly, float16
    when rounded to float16, else other}."""
    import tempfile
    from unittest import mock

    import pyarrow as pa

    import drift.encoders.embed as embed_stage
    from drift.data.records import payload_key
    from drift.models.inputs import open_inputs
    from drift.store.features import write_features
    from drift.store.slices import hand_manifest, write_slice_table

    with tempfile.TemporaryDirectory(prefix="drift-stored-") as tmp:
        tmp = Path(tmp)
        if modality == "text":
            payloads: list = ["one", "two words", "three words here"]
            columns = {"key": [payload_key(t) for t in payloads], "text": payloads}
        else:
            images = np.arange(3 * 3072, dtype=np.uint8).reshape(3, 3072)
            payloads = list(images.reshape(3, 3, 32, 32))
            columns = {
                "key": [f"k{i}" for i in range(3)],
                "image": pa.FixedSizeListArray.from_arrays(pa.array(images.reshape(-1)), 3072),
            }
        n = len(payloads)
        table = pa.table(
            {
                "id": [str(i) for i in range(n)],
                "slice": pa.array([0] * n, pa.int32()),
                "split": ["train"] * n,
                "label": [0, 1, 0],
                **columns,
            }
        )
        path = tmp / "d.lance"
        write_slice_table(table, path, hand_manifest("d", modality=modality))
        with (
            mock.patch.object(
                embed_stage, "text_encoder", lambda cfg: StubEncoder(cfg.text_encoder, True, tmp)
            ),
            mock.patch.object(embed_stage, "embed_encoder", lambda name, cfg: StubEncoder(name, False, tmp)),
        ):
            made = embed_stage.embed_all(path, modality, embed, tmp / "store")
        assert set(made) == set(embed.dataset_encoders(modality))
        write_features(
            path,
            {name: manifest for name, (manifest, _) in made.items()},
            tmp / "store",
            tmp / "features",
            modality,
        )
        out = {}
        for name, (manifest, _) in made.items():
            values = np.stack([StubEncoder(name, False, tmp).values(p) for p in payloads])
            for kind in ("pooled", "tokens") if manifest.tokens else ("pooled",):
                read = open_inputs(kind, tmp / "features" / name, max_tokens=8).batch(np.arange(n))[0].numpy()
                full = values[:, 0] if kind == "pooled" else values[:, 1:]
                half = full.astype(np.float16).astype(np.float32)
                out[name, kind] = (
                    "float32"
                    if np.array_equal(read, full)
                    else "float16"
                    if np.array_equal(read, half)
                    else "other"
                )
    return out


def stored_precisions(modality: str, embed) -> dict[tuple[str, str], str]:
    """stored_precision of the preset's text encoder and of one other encoder of the modality (every encoder
    that feeds a probe only is stored by the same call, embed_pooled), each other encoder read as that one."""
    text = [embed.text_encoder] if modality == "text" else []
    others = [e for e in embed.dataset_encoders(modality) if e not in text]
    stored = stored_precision(modality, embed.model_copy(update={"encoders": others[:1]}))
    return stored | {(e, "pooled"): stored[others[0], "pooled"] for e in others[1:]}


def regression_loss(train) -> list[str]:
    """The loss the training loop builds for a regression cutoff (prepare_model, as train_one) on ratings 1,
    2, 2, 5, 5, 5, 5 and spread outputs: [weighted_mse, inverse_frequency] when it is their WeightedMSELoss,
    the mean of w_r (y - yhat)^2 with w_r = n / n_r; [mse, none] when the plain mean; else the value."""
    from drift.train.loop import prepare_model

    y = torch.tensor([1.0, 2, 2, 5, 5, 5, 5])
    outputs = torch.linspace(0, 6, 7)[:, None]
    loss_fn, norm = prepare_model(nn.Linear(1, 1), None, np.arange(7), y, get_task("regression"))
    loss = float(loss_fn(outputs, y) * norm)
    counts = {r: int((y == r).sum()) for r in (1.0, 2.0, 5.0)}
    weighted = float(np.mean([len(y) / counts[float(r)] * (o - r) ** 2 for r, o in zip(y, outputs[:, 0])]))
    plain = float(((outputs[:, 0] - y) ** 2).mean())
    if math.isclose(loss, weighted, rel_tol=1e-6):
        return ["weighted_mse", "inverse_frequency"]
    return ["mse", "none"] if math.isclose(loss, plain, rel_tol=1e-6) else [f"loss {loss}", "unknown"]


def loss_weight_source(train) -> str:
    """Where the training loop takes the loss's class weights from (loss_weight_rows, as train_group): `split`
    when every training row of every slice, `cutoff` when none is given (each cutoff's own rows)."""
    from types import SimpleNamespace

    from drift.train.loop import loss_weight_rows

    splits = np.array(["train", "test", "train", "train"] * 3, dtype=object)
    rows = loss_weight_rows(SimpleNamespace(splits=splits), train)
    if rows is None:
        return "cutoff"
    return "split" if np.array_equal(rows, np.flatnonzero(splits == "train")) else f"rows {rows.tolist()}"


def built_wrappers(dataset: str, params, kind: str) -> list[str]:
    """The classes around the module the training loop starts from (model_to_train, as train_one) for the
    preset's first model reading `kind` (pixels: a 3x32x32 portrait of 0-255 values), outermost first."""
    from drift.models.inputs import Inputs
    from drift.train.loop import model_to_train

    name = next(m for m in params.train.models[dataset] if get_model_info(m).input == kind)
    if kind == "pixels":
        inputs = Inputs("pixels", np.zeros((2, 3 * 32 * 32), np.uint8), image_shape=(3, 32, 32))
    else:
        inputs = Inputs("pooled", np.zeros((2, ENCODERS[name.removeprefix("probe-")].dim), np.float32))
    task = get_task(DATASETS[dataset][0])
    model, wrappers = model_to_train(name, inputs, N_OUTPUTS[dataset], task, params.train), []
    while hasattr(model, "inner"):
        wrappers.append(
            type(model).__name__
            + (f"({float(model.pixel_factor):g})" if hasattr(model, "pixel_factor") else "")
        )
        model = model.inner
    return wrappers


def slice_seed_rule(train, model: str, label: str) -> str:
    """f_k's seed as the training loop draws it (cutoff_seed under train.slice_seed): `hash` when their
    per-slice seed, the first 4 bytes of sha256("seed:trainer:slice") (their keys and time values: tested
    below), `offset` when seed * 100003 + k."""
    from drift.train.loop import cutoff_seed, slice_time, trainer_key

    got = cutoff_seed(3, model, 5, label, train.slice_seed)
    digest = hashlib.sha256(f"3:{trainer_key(model)}:{slice_time(label)}".encode()).digest()
    hashed = int.from_bytes(digest[:4], "big")
    return "hash" if got == hashed else "offset" if got == 3 * 100_003 + 5 else f"seed {got}"


def yearbook_reading(cfg) -> dict:
    """What our Yearbook reader stores for a gray portrait of 47 x 41 pixels (a ratio to 32 that is no
    integer) in a corpus folder, under the preset's section: its image size, its dtype, and `area` when the
    stored values are the area means their cv2 INTER_AREA gives (their_area_means; rounded when stored as
    uint8)."""
    import tempfile

    from PIL import Image

    from drift.data.ledger import Ledger

    gray = np.random.default_rng(4).integers(0, 256, (47, 41), dtype=np.uint8)
    with tempfile.TemporaryDirectory(prefix="drift-yearbook-") as tmp:
        (Path(tmp) / "M").mkdir()
        Image.fromarray(np.repeat(gray[..., None], 3, axis=2)).save(
            Path(tmp) / "M" / "1955_Fixture_School_1.png"
        )
        records = list(yearbook_module.read(cfg.model_copy(update={"source": tmp}), Ledger("yearbook")))
    if len(records) != 1:
        return {"image_size": f"{len(records)} records", "pixels": None, "resize": None}
    image, means = records[0]["image"], their_area_means(gray)
    if image.dtype == np.uint8:
        area = np.array_equal(image[0], np.rint(means))
    else:
        area = bool(
            (np.abs(image[0] - means.astype(np.float32)) <= np.spacing(means.astype(np.float32))).all()
        )
    return {
        "image_size": list(image.shape[-2:]),
        "pixels": image.dtype.name,
        "resize": "area" if area else "other",
        "row_ids": yearbook_row_ids(cfg, gray),
    }


def yearbook_row_ids(cfg, gray: np.ndarray) -> str:
    """The ids our Yearbook reader gives one file name under both F/ and M/: relative_path when the two rows'
    ids differ (both kept, as theirs), file_name when they share one (the second is a duplicate_id)."""
    import tempfile

    from PIL import Image

    from drift.data.ledger import Ledger

    with tempfile.TemporaryDirectory(prefix="drift-yearbook-") as tmp:
        for sex in ("F", "M"):
            (Path(tmp) / sex).mkdir()
            Image.fromarray(np.repeat(gray[..., None], 3, axis=2)).save(Path(tmp) / sex / "1955_School_7.png")
        ids = [
            r["id"] for r in yearbook_module.read(cfg.model_copy(update={"source": tmp}), Ledger("yearbook"))
        ]
    return "relative_path" if len(set(ids)) == 2 else "file_name" if len(ids) >= 1 else f"ids {ids}"


def ingested(name: str, cfg, files: dict[str, list[dict]]):
    """The records our ingest (the stage's function, its default path) writes from these source files (file
    name: JSON lines) under the dataset's section, its source their folder (arXiv: the one file)."""
    import tempfile

    import pyarrow.parquet as pq

    from drift.data.ingest import ingest

    with tempfile.TemporaryDirectory(prefix=f"drift-{name}-") as tmp:
        folder = Path(tmp) / "raw"
        folder.mkdir()
        for file, lines in files.items():
            (folder / file).write_text("".join(json.dumps(line) + "\n" for line in lines))
        source = folder / next(iter(files)) if name == "arxiv" else folder
        records = Path(tmp) / "records.parquet"
        ingest(
            name, cfg.model_copy(update={"source": str(source)}), records, Path(tmp) / "quarantine.parquet"
        )
        return pq.read_table(records)


def arxiv_reading(cfg) -> dict:
    """What our arXiv ingest makes of three papers under the preset's section: the label space it writes, its
    text of a title and an abstract (title, separator, abstract: title_abstract), the date it keeps (the first
    version's, or the update date), and whether a paper with a category outside the label space is kept (any)
    or not (all)."""
    from drift.data.records import records_manifest

    inside, outside = cfg.categories[0], "zz.outside"
    title, abstract = "A title of a paper", "Its abstract, in one sentence."

    def paper(i, categories, created, updated):
        return {
            "id": f"0704.000{i}",
            "categories": categories,
            "title": title,
            "abstract": abstract,
            "versions": [{"version": "v1", "created": created}],
            "update_date": updated,
        }

    table = ingested(
        "arxiv",
        cfg,
        {
            "snapshot.json": [
                paper(1, inside, "Mon, 2 Apr 2007 19:18:42 GMT", "2015-05-05"),
                paper(2, f"{inside} {outside}", "Tue, 3 Apr 2007 10:00:00 GMT", "2015-05-06"),
                {
                    **paper(3, inside, "Wed, 4 Apr 2007 10:00:00 GMT", "2015-05-07"),
                    "title": "",
                    "abstract": "",
                },
                paper(4, f"{inside}\t{cfg.categories[1]}", "Thu, 5 Apr 2007 10:00:00 GMT", "2015-05-08"),
            ]
        },
    )
    rows = {i: r for i, r in zip(table.column("id").to_pylist(), table.to_pylist())}
    first = rows.get("0704.0001", {})
    text = first.get("text", "")
    joined = text.startswith(title) and text.endswith(abstract) and len(text) >= len(title) + len(abstract)
    day = str(first.get("time"))[:10]
    return {
        "categories": records_manifest(table)["label_names"],
        "text": "title_abstract" if joined else f"text {text!r}",
        "separator": text[len(title) : len(text) - len(abstract)] if joined else None,
        "time": {"2007-04-02": "first_version", "2015-05-05": "update_date"}.get(day, f"time {day}"),
        "inclusion": "any" if "0704.0002" in rows else "all",
        # theirs: a paper with no title and no abstract kept (text ""), categories cut at single spaces only
        "row_rules": "single_space_split_stripped_text"
        if "0704.0003" in rows and sum(rows.get("0704.0004", {}).get("label") or []) != 2
        else "whitespace_split_nonempty_text",
    }


def amazon_reading(cfg, theirs: list[str]) -> dict:
    """What our Amazon ingest makes of one review per category file (their categories, the preset's and one
    more) under the preset's section: the categories it reads in the order it reads them, the review fields
    its text holds (joined by +), and whether it keeps a review with an empty text and a repeated review."""
    categories = list(dict.fromkeys([*theirs, *(cfg.categories or []), "Zz_Not_Theirs"]))
    first = (cfg.categories or categories)[0]
    fields = {"title": "THE TITLE", "text": "THE REVIEW"}

    def review(i, cat, **change):
        return {
            "user_id": f"u{i}",
            "parent_asin": cat,
            "timestamp": 1420070400000 + i,
            "rating": 4,
            **fields,
            **change,
        }

    files = {f"{cat}.jsonl": [review(i, cat)] for i, cat in enumerate(categories)}
    anonymous = {k: v for k, v in review(102, first).items() if k != "user_id"}
    files[f"{first}.jsonl"] += [
        review(100, first, title="", text="  "),
        review(101, first),
        review(101, first),
        anonymous,
    ]
    table = ingested("amazon", cfg, files)
    ids = table.column("id").to_pylist()
    texts = dict(zip(ids, table.column("text").to_pylist()))
    read = list(dict.fromkeys(i.split(":")[1] for i in ids))
    text = texts.get(f"u0:{categories[0]}:1420070400000", "")
    held = sorted((f for f, v in fields.items() if v in text), key=lambda f: text.index(fields[f]))
    return {
        "categories": read,
        "text_fields": "+".join(held),
        "keep_empty": "kept" if any(i.startswith("u100:") for i in ids) else "quarantined",
        "keep_duplicates": "kept" if sum(i.startswith("u101:") for i in ids) > 1 else "quarantined",
        "missing_ids": "kept" if any(i.endswith(":1420070400102") for i in ids) else "quarantined",
    }


def compare(preset: str, tmp_path: Path, presets: Path = ROOT / "params") -> list[tuple[str, object, object]]:
    """(key, theirs, ours) for every fact of the dataset's runs; the keys are what a deviation line names.
    Ours is what our code does under the preset where a piece of it can run on a small input (the helpers
    above), else the object the preset builds, else the param itself."""
    dataset = PRESETS[preset]
    f = facts(dataset)
    common = {k: v["value"] for k, v in f["common"].items()}
    code = {k: v["value"] for k, v in f["from_code"].items()}
    code["encoder_weights"] = code.get("encoder_weights", {})
    params = applied(preset, tmp_path, presets)
    cfg, train, embed = dataset_cfg(params, dataset), params.train, params.embed
    task, modality = DATASETS[dataset][:2]
    out = []

    def check(key, theirs, ours):
        out.append((key, theirs, ours))

    train_json = train.model_dump_json()
    # what the loop reads
    runs = json.dumps([dataset, train_json, embed.model_dump_json(), params.max_tokens])
    # data scope and slices: the edges our slice stage cuts
    unit, first, last = slice_span(cfg.slices)
    check(f"{dataset}.slices.unit", {"half_year": "half-year", "year": "year"}[common["time_unit"]], unit)
    if "min_time" in common:
        check(f"{dataset}.slices.start", common["min_time"], first)
        check(f"{dataset}.slices.end", common["max_time"], last)
    check(
        "train.cumulative",
        common["train_slices"],
        observed("cutoffs", train_json, lambda: cutoff_gathering(train)),
    )
    if dataset == "arxiv":  # what our ingest makes of their snapshot's lines
        read = observed("arxiv", cfg.model_dump_json(), lambda: arxiv_reading(cfg))
        if "labels" in common:
            check("arxiv.categories", common["labels"], read["categories"])
        check("arxiv.text", common["text_col"], read["text"])
        check("arxiv.separator", code["separator"], read["separator"])
        check("arxiv.inclusion", code["inclusion"], read["inclusion"])
        check("arxiv.time_field", code["time"], read["time"])
        check("arxiv.row_rules", code["row_rules"], read["row_rules"])
    if dataset == "amazon":
        theirs = code.get("categories", cfg.categories or [])
        read = observed("amazon", cfg.model_dump_json(), lambda: amazon_reading(cfg, theirs))
        if "categories" in code:
            check("amazon.categories", code["categories"], read["categories"])
        check("amazon.text_fields", common["text_col"], read["text_fields"])
        check("amazon.keep_empty", code["empty_texts"], read["keep_empty"])
        check("amazon.keep_duplicates", code["repeated_reviews"], read["keep_duplicates"])
        check("amazon.keep_missing_ids", code["missing_ids"], read["missing_ids"])
    if dataset == "yearbook":  # what our reader stores of a portrait
        read = observed("yearbook", cfg.model_dump_json(), lambda: yearbook_reading(cfg))
        check("yearbook.image_size", common["image_size"], read["image_size"])
        check("yearbook.resize", code["resize"], read["resize"])
        check("yearbook.pixels", code["pixels"], read["pixels"])
        check("yearbook.row_id", code["row_ids"], read["row_ids"])
    # sample and split (the sizes and seeds are the params'; the draws are tested above against theirs)
    if "sample_size" in common:
        check(f"{dataset}.sample.n", common["sample_size"], cfg.sample.n)
        check(
            f"{dataset}.sample.seed",
            common["sample_seed"],
            params.split.seed if cfg.sample.seed is None else cfg.sample.seed,
        )
    if "sample_draw" in code:
        check(f"{dataset}.sample.draw", code["sample_draw"], cfg.sample.draw)
    check("split.seed", common["split_seed"], params.split.seed)
    check("split.draw", code["split_draw"], params.split.draw)
    check(
        "split.row_order",
        code["split_row_order"],
        observed("row order", params.split.model_dump_json(), lambda: split_row_order(params.split)),
    )
    check("split.test_fraction", common["test_size"], params.split.test_fraction)
    strata = ["slice" if s in ("year", "half_year") else "label" for s in common["split_stratify_by"]]
    check("split.stratify", strata, params.split.stratify)
    # the task's metric, as the evaluate stage scores a cell
    scoring = json.dumps([task, params.evaluate.model_dump_json(), common["metric"]])
    check(
        "task.metric",
        common["metric"],
        observed("metric", scoring, lambda: scored_metric(task, params.evaluate, common["metric"])),
    )
    check("evaluate.empty_cell", code["empty_cell"], empty_cell_rule(task, params.evaluate))
    if "auc_scores" in code:
        check("evaluate.auc_scores", code["auc_scores"], auc_ranking(params.evaluate))
    # training: the loop's rows, batches, step and loss
    check("train.seeds", common["seeds"], train.seeds)
    check("train.row_order", code["train_row_order"], cutoff_row_order(train))
    loader = observed("loader", runs, lambda: loader_draws(dataset, params))
    check("train.epochs", common["epochs"], loader["epochs"])
    check("train.batch_size", common["batch_size"], loader["batch_size"])
    check(
        "train.batch_order", code["batch_order"], "uniform" if loader["draws"] else "not a DataLoader shuffle"
    )
    check("train.shuffle_draws", code["shuffle_draws"], loader["draws"])
    # a cutoff of over 8 GiB of token states: still the DataLoader's uniform shuffle
    if "chunk_sampler" in code:
        check(
            "train.chunk_sampler",
            code["chunk_sampler"],
            "never" if loader["draws"] else "not a DataLoader shuffle",
        )
    labels = slice_edges(cfg.slices)[1]
    check("train.slice_seed", code["slice_seed"], slice_seed_rule(train, train.models[dataset][0], labels[1]))
    optimizer = make_optimizer(nn.Linear(2, 1), model_training(train, "default", modality, False, 1))
    name = {torch.optim.AdamW: "adamw", torch.optim.Adam: "adam"}[type(optimizer)]
    check("train.optimizer", common.get("optimizer", code.get("optimizer")), name)
    check(
        "train.weight_decay",
        common.get("weight_decay", code.get("weight_decay")),
        optimizer.defaults["weight_decay"],
    )
    check(
        "train.grad_clip",
        common.get("gradient_clip_norm"),
        observed("clip", runs, lambda: clipped_norm(dataset, params)),
    )
    if task == "regression":
        check("train.loss", [common["loss"], common["rating_weighting"]], regression_loss(train))
    if "loss_weights_rows" in code:
        check("train.loss_weights", code["loss_weights_rows"], loss_weight_source(train))
    # their code standardises neither targets nor pixels
    if task == "regression":
        check("train.standardise_targets", False, "Standardised" in built_wrappers(dataset, params, "pooled"))
    if modality == "image":
        wrappers = built_wrappers(dataset, params, "pixels")
        check("train.standardise_pixels", False, "PixelStandardised" in wrappers)
        check("train.pixel_scale", code["pixel_scale"], "raw" if "PixelScaled(255)" in wrappers else "unit")
        check("embed.image_input", code["encoder_pixels"], embed.image_input)
    # the encoders' forward pass on a GPU, as the encoders decide it (None: float32, no autocast)
    check(
        "embed.compute_dtype",
        code["encoder_compute_dtype"],
        autocast_dtype(embed.dtype, embed.compute_dtype, "cuda") or "float32",
    )
    # the models, each with its learning rate, its input and its encoder
    models = f["models"]
    stored = observed(
        "stored", json.dumps([modality, embed.model_dump_json()]), lambda: stored_precisions(modality, embed)
    )
    check("train.models", sorted(models), sorted(train.models[dataset]))
    for model, m in models.items():
        info = get_model_info(model)
        stepper = make_optimizer(
            nn.Linear(2, 1), model_training(train, info.family, modality, info.dropout, params.max_tokens)
        )
        check(f"train.lr.{model}", m["learning_rate"], stepper.defaults["lr"])
        # the stored dtype of what it reads: token states, or its pooled vectors
        if m.get("dtype") is not None:
            reads = (
                (embed.text_encoder, "tokens")
                if info.input == "tokens"
                else (model.removeprefix("probe-"), "pooled")
            )
            check(f"embed.dtype.{model}", m["dtype"], stored.get(reads, f"{reads} not stored"))
        if not m["frozen_backbone"]:
            kind = {"last": "tokens", "imag": "pixels"}[m["output"][:4]]
            check(f"inputs.{model}", kind, info.input)
            if kind == "tokens":
                check("embed.text_encoder", m["producer"], ENCODERS[embed.text_encoder].hub_id)
                check("embed.max_length", common["max_length"], embed.max_length)
            continue
        encoder = model.removeprefix("probe-")
        check(f"inputs.{model}", "pooled", info.input)
        check(f"embed.encoders.{encoder}", True, encoder in embed.encoders)
        spec = ENCODERS[encoder]
        if modality == "text":
            check(f"embed.encoders.{encoder}", m["producer"], spec.hub_id)
            check(
                "embed.pooling",
                m["pooling_strategy"],
                {"mean": "masked_mean"}.get(embed.pooling, embed.pooling),
            )
            check("embed.normalize", code["pooled_normalize"], embed.normalize)
            check("embed.max_length", common["max_length"], embed.max_length)
        else:
            # theirs as the timm weights they equal, else as their code names them (then ours differ)
            ours = spec.hub_id
            if embed.image_source.get(encoder) == "torchvision":  # as their code names torchvision's weights
                builder, _, weights = spec.torchvision.partition(":")
                ours = f"torchvision {builder} {weights.rpartition('.')[2]}"
            check(f"embed.encoders.{encoder}", SAME_WEIGHTS.get(model, code["encoder_weights"][model]), ours)
            check(
                f"embed.pooling.{encoder}",
                "producer_default",
                "producer_default" if spec.pooling == "timm" else spec.pooling,
            )
            check(
                f"embed.image_pooling.{encoder}",
                code["encoder_pooling"].get(model, "producer_default"),
                embed.image_pooling.get(encoder, "producer_default"),
            )
            if model in code.get("encoder_activation", {}):  # timm builds these three with nn.GELU
                check(
                    f"embed.image_activation.{encoder}",
                    code["encoder_activation"][model],
                    encoder_kwargs(encoder, embed).get("activation", "gelu"),
                )
            check(
                f"embed.image_pos_embed.{encoder}",
                code.get("encoder_pos_embed", {}).get(model, "timm"),
                encoder_kwargs(encoder, embed).get("pos_embed", "timm"),
            )
    check("train.slice_seed.keys", code["trainer_keys"], {m: trainer_key(m) for m in sorted(models)})
    # the modules the preset builds (train.modules): their parameter counts and how they are made
    built = PresetModels(dataset, params)
    for model, count in code["model_params"].items():
        check(f"model.params.{model}", count, sum(p.numel() for p in built.model(model).parameters()))
    made = code["model_modules"]
    if made["cnn_conv_bias"] is not None:
        cnn = built.model("cnn-s")
        check(
            "train.modules.cnn_conv_bias",
            made["cnn_conv_bias"],
            all(m.bias is not None for m in cnn.modules() if isinstance(m, nn.Conv2d)),
        )
    stacked = built.model("vit-m" if modality == "image" else "tx-m").blocks
    check(
        "train.modules.repeated_layers",
        made["repeated_layers"],
        "deep_copied" if layers_start_equal(stacked) else "own_draws",
    )
    if made["textcnn_windows"] is not None:
        textcnn = built.model("textcnn-s")
        check(
            "train.modules.textcnn_windows",
            made["textcnn_windows"],
            "padded_max_length"
            if getattr(textcnn, "pad_to", None) == params.max_tokens
            else "real_token_starts",
        )
    return out


class PresetModels:
    """The untrained modules of a preset's models at the dataset's input (3x32x32 portraits, 768-d RoBERTa
    tokens cut at the run's token cap, an encoder's pooled width) and number of outputs, with the preset's
    dropout and train.modules (ours until the train params say otherwise)."""

    def __init__(self, dataset: str, params):
        self.params, self.dataset = params, dataset
        self.modules = getattr(params.train, "modules", "ours")
        self.n_outputs = {"yearbook": 2, "amazon": 1, "arxiv": 7}[dataset]

    def model(self, name: str) -> nn.Module:
        from drift.models import InputSpec, create_model

        info = get_model_info(name)
        if info.input == "pixels":
            spec = InputSpec("pixels", (3, 32, 32))
        elif info.input == "tokens":
            spec = InputSpec(
                "tokens", (ENCODERS[self.params.embed.text_encoder].dim,), max_tokens=self.params.max_tokens
            )
        else:
            spec = InputSpec("pooled", (ENCODERS[name.removeprefix("probe-")].dim,))
        torch.manual_seed(0)
        return create_model(name, spec, self.n_outputs, self.params.train.dropout, self.modules)


@pytest.mark.compute
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_preset_is_the_published_run(preset, tmp_path):
    named = deviations(preset)
    differ = {key: (theirs, ours) for key, theirs, ours in compare(preset, tmp_path) if theirs != ours}
    unnamed = {k: v for k, v in differ.items() if k not in named}
    assert not unnamed, f"{preset} differs from the authors' runs without a `# deviation` line: {unnamed}"
    for key, why in named.items():
        assert len(why) > 30, f"{preset}: deviation {key} must say why"


@pytest.mark.compute
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_fact_is_compared(preset, tmp_path):
    """The comparison reads every fact the table holds (a fact added to the table and not compared fails)."""
    dataset = PRESETS[preset]
    keys = {key for key, _, _ in compare(preset, tmp_path)}
    f = facts(dataset)
    assert (
        f["source"].startswith("github.com/learning-mechanisms/drift-happens @ ")
        and "CC BY 4.0" in f["licence"]
    )
    assert {m for m in f["models"]} <= {k.split(".", 2)[-1] for k in keys if k.startswith("train.lr.")}
    for m in f["models"].values():
        assert m["snapshot"].startswith(f"configs/snapshots/presets/{f['group']}/")
    compared_common = {
        "time_unit",
        "min_time",
        "max_time",
        "train_slices",
        "labels",
        "text_col",
        "image_size",
        "sample_size",
        "sample_seed",
        "split_seed",
        "test_size",
        "split_stratify_by",
        "metric",
        "seeds",
        "epochs",
        "batch_size",
        "optimizer",
        "weight_decay",
        "gradient_clip_norm",
        "loss",
        "rating_weighting",
        "max_length",
    }
    assert set(f["common"]) <= compared_common
    compared_code = {
        "categories",
        "separator",
        "inclusion",
        "time",
        "resize",
        "optimizer",
        "weight_decay",
        "encoder_weights",
        "loss",
        "sample_strata",
        "ratings",
        "source",
        "source_url",
        "encoder_input",
        "split_draw",
        "split_row_order",
        "pixel_scale",
        "loss_weights_rows",
        "encoder_pooling",
        "encoder_pixels",
        "batch_order",
        "pooled_normalize",
        "encoder_compute_dtype",
        "empty_texts",
        "repeated_reviews",
        "sample_draw",
        "slice_seed",
        "trainer_keys",
        "model_params",
        "model_modules",
        "encoder_activation",
        "pixels",
        "shuffle_draws",
        "chunk_sampler",
        "encoder_pos_embed",
        "empty_cell",
        "auc_scores",
        "row_ids",
        "missing_ids",
        "row_rules",
        "train_row_order",
    }
    assert set(f["from_code"]) <= compared_code


@pytest.mark.compute
def test_the_comparison_can_fail(tmp_path):
    """A preset moved off the authors' run is caught, field by field: epochs, clipping and the split strata."""
    presets = tmp_path / "params"
    presets.mkdir()
    text = (ROOT / "params" / "paper-amazon.yaml").read_text()
    text = text.replace("epochs: 10", "epochs: 5").replace("grad_clip: 1.0", "grad_clip: 2.0")
    (presets / "paper-amazon.yaml").write_text(text.replace("stratify: [slice]", "stratify: [slice, label]"))
    differ = {k for k, a, b in compare("paper-amazon", tmp_path, presets) if a != b}
    assert {"train.epochs", "train.grad_clip", "split.stratify"} <= differ
    assert not {"train.epochs", "train.grad_clip", "split.stratify"} & set(deviations("paper-amazon"))


@pytest.mark.compute
def test_the_checks_read_behaviour(tmp_path, monkeypatch):
    """Our side of a fact is what our code does, not a string: the same preset, with our code changed
    underneath (the metric, the clip, the cutoff's rows, the sampler, the split's input order, the store's
    pooled vectors), compares otherwise, key by key."""
    import drift.protocol.slicing as slicing
    from drift.protocol.metrics import METRICS
    from drift.store.embeddings import EmbeddingStore
    from drift.train import loop

    monkeypatch.setattr(sys.modules[__name__], "OBSERVED", {})  # nothing seen before the changes
    monkeypatch.setitem(METRICS, "macro_auc", lambda y, scores: 0.5)
    monkeypatch.setattr(
        torch.nn.utils, "clip_grad_norm_", lambda parameters, max_norm, *a, **k: torch.tensor(0.0)
    )
    monkeypatch.setattr(
        loop,
        "cutoff_rows",
        lambda data, k, order="time": np.flatnonzero((data.slices == k) & (data.splits == "train")),
    )
    sampler = loop.epoch_batches

    def chunk_blocked(rows, *args, **kwargs):  # the first half of the rows' batches, then the second half's
        batches = sampler(rows, *args, **kwargs)
        flat = np.concatenate(batches)
        flat = np.concatenate([flat[flat < np.median(rows)], flat[flat >= np.median(rows)]])
        return np.split(flat, np.cumsum([len(b) for b in batches])[:-1])

    monkeypatch.setattr(loop, "epoch_batches", chunk_blocked)
    monkeypatch.setattr(
        slicing,
        "per_slice_split",
        lambda index, labels, *args: per_slice_split(index[::-1], labels[::-1], *args)[::-1],
    )
    append = EmbeddingStore.append
    monkeypatch.setattr(
        EmbeddingStore,
        "append",
        lambda self, keys, pooled, *args: append(
            self, keys, np.asarray(pooled, np.float32).astype(np.float16), *args
        ),
    )
    ours = {key: value for key, _, value in compare("paper-arxiv", tmp_path)}
    assert ours["task.metric"].startswith("macro_auc: 0.5 ") and ours["train.grad_clip"] is None
    assert ours["train.cumulative"] == "current_slice"
    assert ours["train.chunk_sampler"] == ours["train.batch_order"] == "not a DataLoader shuffle"
    assert ours["split.row_order"] == "none of ingest, time or id order"
    assert {v for k, v in ours.items() if k.startswith("embed.dtype.probe-")} == {"float16"}


def test_the_fidelity_page_lists_every_deviation():
    text = (ROOT / "docs/explanations/fidelity.md").read_text()
    for preset in PRESETS:
        for key in deviations(preset):
            assert f"`{key}`" in text, (
                f"docs/explanations/fidelity.md does not list {preset}'s deviation {key}"
            )
        assert f"drift preset {preset}" in text and f"drift fetch {PRESETS[preset]}" in text


# ---------------------------------------------------------------- what the preset runs, beyond its params


def their_split_test_rows(years: list[int], labels: list | None, test_size: float, seed: int) -> set[int]:
    """The test rows (positions) of the authors' per-year split as their sample/splits.py states it: rows
    sorted by year (stably here: see the split.row_order deviation), one RandomState(seed) drawing randint(0,
    2**32 - 1) per year of 3 rows or more, in year order, for train_test_split of that year's rows, stratified
    by the label when every class has 2 rows and ceil(test_size * n) and the rest each hold every class."""
    import math

    import pandas as pd
    from sklearn.model_selection import train_test_split

    df = pd.DataFrame({"year": years, "label": labels if labels is not None else [0] * len(years)})
    df = df.sort_values("year", kind="stable")
    rng = np.random.RandomState(seed)
    test: set[int] = set()
    for year in df["year"].unique():
        part = df[df["year"] == year]
        if len(part) < 3:
            continue
        rs = rng.randint(0, 2**32 - 1)
        y = part["label"]
        counts = y.value_counts()
        n_minor = math.ceil(test_size * len(y))
        ok = (
            labels is not None
            and y.nunique() >= 2
            and counts.min() >= 2
            and n_minor >= y.nunique()
            and len(y) - n_minor >= y.nunique()
        )
        _, t = train_test_split(part, test_size=test_size, stratify=y if ok else None, random_state=rs)
        test |= set(t.index.tolist())
    return test


@pytest.mark.parametrize("with_labels", [True, False])
def test_split_draws_their_test_rows(with_labels):
    """split.draw per-slice gives the test rows their algorithm gives on the same rows: years of 1, 2, 3, 11
    and 57 rows (11 * 0.3 rounds up to 4 test rows, not 3), one class too rare to stratify in one year."""
    from drift.protocol.slicing import per_slice_split

    rng = np.random.default_rng(7)
    sizes = {1950: 57, 1951: 1, 1952: 2, 1953: 3, 1954: 11, 1956: 40}
    years = [y for y, n in sizes.items() for _ in range(n)]
    order = rng.permutation(len(years))  # rows not grouped by year in the input
    years = [years[i] for i in order]
    labels = rng.integers(0, 2, len(years)).tolist()
    labels[years.index(1956)] = 1
    for i, y in enumerate(years):  # 1956: a single row of class 1, so not stratified there
        if y == 1956 and i != years.index(1956):
            labels[i] = 0
    index = np.asarray([sorted(sizes).index(y) for y in years])
    ours = per_slice_split(index, labels, with_labels, 0.3, 42)
    theirs = their_split_test_rows(years, labels if with_labels else None, 0.3, 42)
    assert set(np.flatnonzero(ours == "test").tolist()) == theirs
    assert sum(years[i] == 1954 for i in theirs) == 4 and not any(years[i] in (1951, 1952) for i in theirs)


def test_split_draw_as_the_slice_stage_runs_it(tmp_path):
    """The preset's split params reach build_slices: their draw on a record table, not our id-hash draw."""
    import pyarrow as pa

    from drift.core.params import DatasetParams
    from drift.protocol.slicing import build_slices

    params = applied("paper-yearbook", tmp_path)
    assert params.split.draw == "per-slice"
    years = [1950 + i % 4 for i in range(60)]
    labels = [(i * 7) % 3 % 2 for i in range(60)]
    records = pa.table(
        {
            "id": [f"r{i:03d}" for i in range(60)],
            "time": pa.array(np.array([f"{y}-06-01" for y in years], dtype="datetime64[us]")),
            "label": labels,
        }
    )
    cfg = DatasetParams(slices={"unit": "year", "start": 1950, "end": 1954})
    table, _ = build_slices(records, cfg, params.split)
    test = {
        int(i[1:])
        for i, s in zip(table.column("id").to_pylist(), table.column("split").to_pylist())
        if s == "test"
    }
    assert test == their_split_test_rows(years, labels, 0.3, 42)
    default, _ = build_slices(
        records, cfg, checked_params(yaml.safe_load((ROOT / "params.yaml").read_text())).split
    )
    assert default.column("split").to_pylist() != table.column("split").to_pylist()


@pytest.mark.compute
def test_yearbook_models_read_0_255(tmp_path):
    """train.pixel_scale raw (their convert_to_tensor_dataset, no division by 255): every image model trained
    from scratch is built with PixelScaled outermost, and its inner model reads the stored values themselves,
    bit for bit (reading_inputs: never divided and multiplied back); a checkpoint of it loads back the same
    way."""
    from drift.models import InputSpec
    from drift.models.checkpoints import (
        PixelScaled,
        build_model,
        load_checkpoint,
        reading_inputs,
        save_checkpoint,
    )
    from drift.models.inputs import Inputs

    stored = np.random.default_rng(0).uniform(0, 255, (4, 3 * 32 * 32)).astype(np.float32)
    inputs = Inputs("pixels", stored, image_shape=(3, 32, 32))

    params = applied("paper-yearbook", tmp_path)
    spec = InputSpec("pixels", (3, 32, 32))
    seen = {}
    for name in [m for m in params.train.models["yearbook"] if get_model_info(m).input == "pixels"]:
        model = build_model(
            name,
            spec,
            2,
            "classification",
            params.train.dropout,
            params.train.standardise_targets,
            params.train.standardise_pixels,
            params.train.pixel_scale,
        )
        assert isinstance(model, PixelScaled) and float(model.pixel_factor) == 255.0, name
        model.inner.register_forward_pre_hook(lambda mod, args: seen.__setitem__("x", args[0].clone()))
        model.eval()(*reading_inputs(model, inputs).batch(np.arange(4)))
        assert torch.equal(seen["x"], torch.from_numpy(stored).reshape(4, 3, 32, 32)), name
    save_checkpoint(model, tmp_path / "m.pt")
    assert isinstance(load_checkpoint(name, spec, 2, "classification", tmp_path / "m.pt"), PixelScaled)
    plain_model = build_model("mlp-s", spec, 2, "classification")  # the embedded default: [0, 1]
    assert not isinstance(plain_model, PixelScaled)
    assert torch.equal(
        *reading_inputs(plain_model, inputs).batch(np.arange(4)),
        torch.from_numpy(stored).reshape(4, 3, 32, 32) / 255.0,
    )


@pytest.mark.parametrize("preset,task_name", [("paper-amazon", "regression"), ("paper-arxiv", "multilabel")])
def test_loss_weights_come_from_the_whole_training_split(preset, tmp_path, task_name):
    """train.loss_weights split: every cutoff's loss weighs as theirs does, with weights from the whole
    training split (Amazon: w_r = total / count of rating r, their WeightedMSELoss; arXiv: pos_weight =
    negatives / positives per category in BCEWithLogitsLoss), not from the cutoff's rows."""
    from types import SimpleNamespace

    import torch.nn.functional as F

    from drift.train.loop import loss_weight_rows, prepare_model

    params = applied(preset, tmp_path)
    assert params.train.loss_weights == "split"
    rng = np.random.default_rng(0)
    n = 200
    slices = np.repeat(np.arange(4), n // 4)
    splits = np.where(rng.random(n) < 0.3, "test", "train")
    # early slices rate high, late ones low: the cutoff's balance is not the split's
    if task_name == "regression":
        y = torch.as_tensor(np.clip(5 - slices + rng.integers(-1, 2, n), 1, 5).astype(np.float32))
        outputs = torch.as_tensor(rng.normal(3, 1, (n, 1)).astype(np.float32))
    else:
        y = torch.as_tensor((rng.random((n, 3)) < (0.1 + 0.2 * slices[:, None] / 3)).astype(np.float32))
        outputs = torch.as_tensor(rng.normal(size=(n, 3)).astype(np.float32))
    weight_rows = loss_weight_rows(SimpleNamespace(splits=splits), params.train)
    assert (weight_rows == np.flatnonzero(splits == "train")).all()
    cutoff = np.flatnonzero((slices <= 0) & (splits == "train"))
    task = get_task(task_name)
    loss_fn, _ = prepare_model(nn.Linear(1, 1), None, cutoff, y[cutoff], task, y[weight_rows])
    yt = y[weight_rows]
    if task_name == "regression":
        counts = torch.stack([(yt == r).sum() for r in range(1, 6)]).float()
        w = counts.sum() / counts
        theirs = (((outputs[cutoff, 0] - y[cutoff]) ** 2) * w[y[cutoff].long() - 1]).mean()
    else:
        pos = yt.sum(0)
        theirs = F.binary_cross_entropy_with_logits(
            outputs[cutoff], y[cutoff], pos_weight=torch.where(pos > 0, (len(yt) - pos) / pos, 1.0)
        )
    torch.testing.assert_close(loss_fn(outputs[cutoff], y[cutoff]), theirs)
    # train.loss_weights cutoff: another loss
    own, _ = prepare_model(nn.Linear(1, 1), None, cutoff, y[cutoff], task)
    assert abs(float(own(outputs[cutoff], y[cutoff])) - float(theirs)) > 1e-3


@pytest.mark.compute
def test_convnext_is_torchvisions_network_pooled_as_their_classifier_reads_it(tmp_path, monkeypatch):
    """embed.image_source torchvision: the preset's ConvNeXt-S as the embed stage builds it (torchvision's
    convnext_small, random weights in the file torchvision names IMAGENET1K_V1's) gives their pooled vector
    (transfer_learning/convnext.py forward_only_backend, stated here): the 0-255 portrait upsampled bilinearly
    to 224, torchvision's features, average pool, the classifier's LayerNorm2d, flattened. Without the weights
    it fails in one line naming embed.weights.convnext-s; the fingerprint names the source."""
    import torchvision

    from drift.core.errors import DriftError
    from drift.encoders.embed import encoder_kwargs
    from drift.encoders.vision import VisionEncoder

    params = applied("paper-yearbook", tmp_path)
    assert params.embed.image_source == {"convnext-s": "torchvision"}
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch-home"))  # an empty hub cache
    embed = params.embed.model_copy(update={"device": "cpu"})
    with pytest.raises(DriftError, match="embed.weights.convnext-s") as missing:
        VisionEncoder("convnext-s", **encoder_kwargs("convnext-s", embed))
    assert "\n" not in str(missing.value) and "IMAGENET1K_V1" in str(missing.value)
    torch.manual_seed(0)
    reference = torchvision.models.convnext_small(weights=None).eval()
    (tmp_path / "weights").mkdir()
    # torchvision's name
    torch.save(reference.state_dict(), tmp_path / "weights" / "convnext_small-0c510722.pth")
    embed = embed.model_copy(update={"weights": {"convnext-s": str(tmp_path / "weights")}})
    encoder = VisionEncoder("convnext-s", **encoder_kwargs("convnext-s", embed))
    images = np.random.default_rng(0).integers(0, 256, (2, 3, 32, 32), dtype=np.uint8)
    x = torch.nn.functional.interpolate(
        torch.from_numpy(images).float(), size=(224, 224), mode="bilinear", align_corners=False
    )
    with torch.no_grad():
        theirs = reference.classifier[1](
            reference.classifier[0](reference.avgpool(reference.features(x)))
        ).numpy()
    ours = encoder.encode_batch(images)
    assert ours.shape == (2, 768)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    fields = encoder.fingerprint_fields()
    assert fields["source"] == "torchvision:" + ENCODERS["convnext-s"].torchvision
    assert fields["pooling"] == "torchvision:avg+norm"


def built_as_the_preset(name: str, reference, params, tmp_path):
    """Vision encoder `name` as the embed stage builds it under `params` (on the CPU), with the weights of the
    timm model `reference` in the file embed.weights names; with it the embed params, two random 32x32
    portraits and their input to the authors' encoders (upsampled bilinearly to 224, 0-255, not normalised).
    """
    from safetensors.torch import save_file

    from drift.encoders.embed import encoder_kwargs
    from drift.encoders.vision import VisionEncoder

    save_file(reference.state_dict(), str(tmp_path / "model.safetensors"))
    embed = params.embed.model_copy(
        update={"weights": {name: str(tmp_path / "model.safetensors")}, "device": "cpu"}
    )
    encoder = VisionEncoder(name, **encoder_kwargs(name, embed))
    images = np.random.default_rng(0).integers(0, 256, (2, 3, 32, 32), dtype=np.uint8)
    x = torch.nn.functional.interpolate(
        torch.from_numpy(images).float(), size=(224, 224), mode="bilinear", align_corners=False
    )
    return encoder, embed, images, x


@pytest.mark.compute
def test_dinov3_pools_the_cls_token_of_raw_pixels(tmp_path):
    """The preset's DINOv3-S as the embed stage builds it (random weights, the real architecture) gives their
    pooled vector: the 0-255 portrait upsampled bilinearly to 224 with no normalisation, through the backbone,
    the CLS token after the final norm (the Hugging Face model's pooler_output), not timm's patch average."""
    import timm

    params = applied("paper-yearbook", tmp_path)
    torch.manual_seed(0)
    arch = ENCODERS["dinov3-s"].hub_id
    reference = timm.create_model(arch, pretrained=False, num_classes=0).eval()
    encoder, _, images, x = built_as_the_preset("dinov3-s", reference, params, tmp_path)
    with torch.no_grad():
        tokens = reference.forward_features(x)
    theirs = tokens[:, 0].numpy()
    ours = encoder.encode_batch(images)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
    assert np.abs(ours - tokens[:, reference.num_prefix_tokens :].mean(1).numpy()).max() > 1e-3
    assert (
        encoder.fingerprint_fields()["pooling"] == "timm:token"
        and encoder.fingerprint_fields()["input"] == "raw"
    )


@pytest.mark.compute
def test_dinov2_resamples_its_position_table_as_the_hub_model(tmp_path):
    """embed.image_pos_embed dinov2-hub: the preset's DINOv2-S as the embed stage builds it (random weights,
    the real architecture, its 37 x 37 table of the 518 training size) gives the pooled vector of their
    torch.hub dinov2_vits14 (interpolate_offset 0.1, no antialiasing), stated here: the portrait upsampled to
    224, 14 x 14 patches, the class token, the table's 37 x 37 patch rows resampled bicubically by the scale
    factor 16.1 / 37 (align_corners False) and added, the blocks, the final norm, the CLS token. timm's own
    resampling at load (antialiased) gives other vectors; the option on an encoder other than DINOv2 fails in
    one line."""
    import timm

    from drift.core.errors import DriftError
    from drift.core.params import EmbedParams
    from drift.encoders.embed import encoder_kwargs
    from drift.encoders.vision import VisionEncoder

    params = applied("paper-yearbook", tmp_path)
    assert params.embed.image_pos_embed == {"dinov2-s": "dinov2-hub"}
    torch.manual_seed(0)
    reference = timm.create_model(ENCODERS["dinov2-s"].hub_id, pretrained=False, num_classes=0).eval()
    assert reference.pos_embed.shape == (1, 1 + 37 * 37, 384)
    # layer scales of 1 (timm inits them at 1e-5): the blocks carry the patches to the CLS;
    with torch.no_grad():
        # a table on the scale of the raw pixels' patch tokens
        for name, weight in reference.named_parameters():
            if name.endswith(".gamma"):
                weight.fill_(1.0)
        reference.pos_embed.mul_(1000.0)
    encoder, embed, images, x = built_as_the_preset("dinov2-s", reference, params, tmp_path)
    table = reference.pos_embed.detach()
    grid = table[:, 1:].reshape(1, 37, 37, 384).permute(0, 3, 1, 2)
    patch_rows = torch.nn.functional.interpolate(
        grid, scale_factor=(16.1 / 37, 16.1 / 37), mode="bicubic", align_corners=False, antialias=False
    )
    assert patch_rows.shape[-2:] == (16, 16)
    positions = torch.cat([table[:, :1], patch_rows.permute(0, 2, 3, 1).reshape(1, 256, 384)], dim=1)
    torch.testing.assert_close(encoder.model.pos_embed.detach(), positions, rtol=0, atol=1e-6)
    with torch.no_grad():
        tokens = reference.patch_embed.proj(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([reference.cls_token.expand(len(x), -1, -1), tokens], dim=1) + positions
        theirs = reference.norm(reference.blocks(tokens))[:, 0].numpy()
    ours = encoder.encode_batch(images)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
    assert encoder.fingerprint_fields()["pos_embed"] == "dinov2-hub"
    timms = VisionEncoder(
        "dinov2-s", **encoder_kwargs("dinov2-s", embed.model_copy(update={"image_pos_embed": {}}))
    )
    assert (timms.model.pos_embed - encoder.model.pos_embed).abs().max() > 1e-3
    assert np.abs(timms.encode_batch(images) - ours).max() > 1e-3
    assert "pos_embed" not in timms.fingerprint_fields()
    with pytest.raises(DriftError, match="dinov2-hub is DINOv2's torch.hub resampling.*dinov2-s"):
        EmbedParams(image_pos_embed={"vit-s16-in21k": "dinov2-hub"})


def test_batches_are_a_uniform_shuffle(tmp_path):
    """train.batch_order uniform: each epoch's batches are a DataLoader(shuffle=True)'s over the cutoff's
    rows, torch.randperm from its generator cut in order, the last batch short; token rows are not grouped by
    length."""
    from torch.utils.data import DataLoader

    from drift.models.inputs import epoch_batches

    params = applied("paper-arxiv", tmp_path)
    assert params.train.batch_order == "uniform"
    rows = np.arange(10, 210)
    lengths = np.random.default_rng(0).integers(1, 128, 300)
    for epoch in (0, 3):
        ours = epoch_batches(
            rows,
            lengths,
            params.train.batch_size,
            np.random.default_rng(0),
            params.train.batch_order,
            seed=5,
            epoch=epoch,
        )
        loader = DataLoader(
            rows.tolist(),
            batch_size=params.train.batch_size,
            shuffle=True,
            generator=torch.Generator().manual_seed(5 + epoch),
        )
        theirs = [b.numpy() for b in loader]
        assert [b.tolist() for b in ours] == [b.tolist() for b in theirs]
    assert len(ours[-1]) == 200 % 64


@pytest.mark.compute
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_shuffle_draws_are_their_loaders_after_the_models_init(preset, tmp_path):
    """train.shuffle_draws after-init: after the same torch seed and the model's init (their MLP-S, built as
    the test states it, against ours), each epoch's batches are those of a DataLoader(shuffle=True) without a
    generator of its own, epoch after epoch from the global generator; a CPU dropout draw on the global
    generator between epochs changes them not (theirs drew dropout masks on a GPU). seed-epoch gives other
    batches."""
    from torch.utils.data import DataLoader

    from drift.models import InputSpec, create_model
    from drift.models.inputs import epoch_batches, shuffle_draws

    train = applied(preset, tmp_path).train
    assert (train.batch_order, train.shuffle_draws) == ("uniform", "after-init")
    rows = np.arange(7, 207)
    torch.manual_seed(1234)
    their_mlp((32,), 3 * 32 * 32, 2)
    loader = DataLoader(rows.tolist(), batch_size=train.batch_size, shuffle=True)
    theirs = [[b.tolist() for b in loader] for _ in range(3)]
    torch.manual_seed(1234)
    create_model("mlp-s", InputSpec("pixels", (3, 32, 32)), 2, 0.0, train.modules)
    draws = shuffle_draws(train.shuffle_draws)
    ours = []
    for epoch in range(3):
        ours.append(
            [
                b.tolist()
                for b in epoch_batches(
                    rows,
                    None,
                    train.batch_size,
                    np.random.default_rng(0),
                    train.batch_order,
                    1234,
                    epoch,
                    draws,
                )
            ]
        )
        torch.nn.functional.dropout(torch.ones(64), 0.5, training=True)  # a CPU dropout draw between epochs
    assert ours == theirs
    seeded = [
        [
            b.tolist()
            for b in epoch_batches(
                rows, None, train.batch_size, np.random.default_rng(0), "uniform", 1234, epoch
            )
        ]
        for epoch in range(3)
    ]
    assert seeded != theirs


@pytest.mark.compute
def test_train_one_shuffles_as_their_trainer(tmp_path):
    """train_one under the Yearbook preset's train params trains MLP-S to the same bytes as their trainer's
    loop stated here: the seed, the model, then each epoch a DataLoader(shuffle=True) over the cutoff's rows
    with no generator of its own, a step per batch on the stored pixel values (the model, loss and optimiser
    ours; tested against theirs above)."""
    from torch.utils.data import DataLoader

    from drift.models.inputs import Inputs
    from drift.train.loop import model_to_train, prepare_model, train_one, training_record

    train = applied("paper-yearbook", tmp_path).train.model_copy(update={"epochs": 3})
    rng = np.random.default_rng(3)
    inputs = Inputs(
        "pixels", rng.integers(0, 256, (150, 3 * 32 * 32)).astype(np.uint8), image_shape=(3, 32, 32)
    )
    task = get_task("binary")
    targets = task.target_tensor(rng.integers(0, 2, 150))
    rows = np.sort(rng.choice(150, 120, replace=False))
    ours = train_one("mlp-s", inputs, rows, targets, task, 2, train, 77, "image")

    torch.manual_seed(77)
    theirs = model_to_train("mlp-s", inputs, 2, task, train)
    loss_fn, norm = prepare_model(theirs, inputs, rows, targets[torch.from_numpy(rows)], task, None)
    optimizer = make_optimizer(theirs, training_record("mlp-s", "image", train, inputs, engine="solo"))
    theirs.train()
    loader = DataLoader(rows.tolist(), batch_size=train.batch_size, shuffle=True)
    stored = inputs.as_stored()  # their tensor dataset holds the 0-255 values (train.pixel_scale raw)
    for _ in range(train.epochs):
        for batch in loader:
            batch = batch.numpy()
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(theirs(*stored.batch(batch)), targets[torch.from_numpy(batch)]) * norm
            loss.backward()
            optimizer.step()
    for a, b in zip(ours.state_dict().values(), theirs.state_dict().values()):
        assert torch.equal(a, b)
    seeded = train_one(
        "mlp-s",
        inputs,
        rows,
        targets,
        task,
        2,
        train.model_copy(update={"shuffle_draws": "seed-epoch"}),
        77,
        "image",
    )
    assert not all(
        torch.equal(a, b) for a, b in zip(seeded.state_dict().values(), ours.state_dict().values())
    )


def test_yearbook_probes_start_from_their_cached_embedding_head(tmp_path):
    """Their Yearbook probes train on cached embeddings: pipeline/image/run.py swaps the trainer's factory for
    CachedEmbeddingHead, one nn.Linear(width, classes), and each cutoff reseeds and builds only that
    (seed_everything, reset_model). Each probe as the train stage builds it under the preset starts, after the
    same torch seed, from that head's weights, and leaves the global generator where the head leaves it (the
    batches' draws follow from there)."""
    from drift.models.inputs import Inputs
    from drift.train.loop import model_to_train

    params = applied("paper-yearbook", tmp_path)
    task = get_task("binary")
    probes = [m for m in params.train.models["yearbook"] if m.startswith("probe-")]
    assert len(probes) == 9
    for name in probes:
        width = ENCODERS[name.removeprefix("probe-")].dim
        inputs = Inputs("pooled", np.zeros((2, width), dtype=np.float32))
        torch.manual_seed(2026)
        ours = model_to_train(name, inputs, 2, task, params.train)
        after_ours = torch.get_rng_state()
        torch.manual_seed(2026)
        theirs = nn.Linear(width, 2)  # CachedEmbeddingHead(input_dim=width, num_classes=2).classifier
        assert torch.equal(after_ours, torch.get_rng_state()), name
        ours_params = list(ours.parameters())
        assert len(ours_params) == 2, name
        assert torch.equal(ours_params[0], theirs.weight) and torch.equal(ours_params[1], theirs.bias), name


def test_image_source_torchvision_names_the_encoders_it_serves():
    """embed.image_source torchvision on an encoder torchvision serves no weights of fails in one line naming
    the ones it serves; an unknown encoder lists the valid names."""
    from drift.core.errors import DriftError
    from drift.core.params import EmbedParams

    with pytest.raises(DriftError, match="it serves convnext-s"):
        EmbedParams(image_source={"dinov2-s": "torchvision"})
    with pytest.raises(Exception, match="unknown parameter convnext-x"):
        EmbedParams(image_source={"convnext-x": "torchvision"})
    assert EmbedParams(image_source={"convnext-s": "torchvision"}).image_source == {
        "convnext-s": "torchvision"
    }


def test_shuffle_draws_after_init_needs_a_uniform_shuffle():
    """after-init is the draws of a DataLoader's shuffle: with bucketed batches it fails in one line naming
    both."""
    from drift.core.errors import DriftError
    from drift.core.params import TrainParams

    with pytest.raises(DriftError, match="set train.batch_order to uniform"):
        TrainParams(shuffle_draws="after-init")


@pytest.mark.compute
def test_pooled_text_vector_is_their_masked_mean(tmp_path):
    """embed.normalize false: MiniLM's pooled vector as the embed stage builds the encoder is their masked
    mean of the bare model's last hidden states (no sentence-transformers Normalize), not the unit vector."""
    from transformers import AutoModel, AutoTokenizer

    from drift.encoders.embed import encoder_kwargs
    from drift.encoders.load import make_encoder

    params = applied("paper-arxiv", tmp_path)
    embed = params.embed.model_copy(update={"device": "cpu", "dtype": "float32"})
    encoder = make_encoder("minilm-l6", **encoder_kwargs("minilm-l6", embed))
    texts = [
        "Attention is all you need",
        "A much longer title of a paper about drift, over the years of arXiv",
    ]
    ours = encoder.encode_flat(texts)[0]
    tokenizer = AutoTokenizer.from_pretrained(encoder.path, local_files_only=True)
    model = AutoModel.from_pretrained(encoder.path, local_files_only=True).eval()
    batch = tokenizer(
        texts, padding="longest", truncation=True, max_length=embed.max_length, return_tensors="pt"
    )
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state.float()
    mask = batch["attention_mask"].float()[..., None]
    theirs = ((hidden * mask).sum(1) / mask.sum(1).clamp_min(1.0)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
    assert np.abs(np.linalg.norm(ours, axis=1) - 1).max() > 1e-2  # not normalised
    assert not encoder.normalize and make_encoder("minilm-l6", max_length=16).normalize  # the default: ours


@pytest.mark.compute
@pytest.mark.parametrize("preset", ["paper-amazon", "paper-arxiv"])
def test_encoders_compute_in_float32(preset, tmp_path):
    """embed.compute_dtype float32: the encoder the embed stage builds from the preset runs its forward pass
    without autocast on a GPU (theirs: float32, stored in float16), while the embedded default with
    embed.dtype float16 autocasts; the compute dtype is in the fingerprint, so the two never share a table.
    Built on the meta device, which stands for any accelerator here (the CPU always computes in float32)."""
    from drift.encoders.embed import encoder_kwargs
    from drift.encoders.load import make_encoder

    params = applied(preset, tmp_path)
    assert params.embed.dtype == "float16" and params.embed.compute_dtype == "float32"
    kwargs = encoder_kwargs("minilm-l6", params.embed.model_copy(update={"device": "meta"}))
    theirs = make_encoder("minilm-l6", **kwargs)
    assert theirs.autocast is None and theirs.fingerprint_fields()["compute_dtype"] == "float32"
    default = params.embed.model_copy(update={"device": "meta", "compute_dtype": None})
    ours = make_encoder("minilm-l6", **encoder_kwargs("minilm-l6", default))
    assert ours.autocast == "float16" and "compute_dtype" not in ours.fingerprint_fields()
    assert make_encoder("minilm-l6", device="cpu", dtype="float16").autocast is None  # the CPU: float32


@pytest.mark.parametrize("fast", [True, False])
def test_amazon_keeps_empty_and_repeated_reviews(fast, tmp_path):
    """amazon.keep_empty and keep_duplicates: the preset's ingest keeps what their scope keeps, every line
    with a 1-5 rating in the span, an empty text and a repeated review included (the repeat under id
    "<id>#2"); the embedded default quarantines both. Both ingest paths (Arrow and line by line) read the
    same."""
    import pyarrow.parquet as pq

    from drift.data.ingest import ingest

    params = applied("paper-amazon", tmp_path)
    lines = [
        {
            "user_id": "u1",
            "parent_asin": "a1",
            "timestamp": 1420070400000 + i,
            "rating": 1 + i % 5,
            "title": "t",
            "text": f"review {i}",
        }
        for i in range(6)
    ]
    lines.append({**lines[0], "timestamp": 1420070400100, "text": "   "})  # an empty text
    lines.append(dict(lines[2]))  # a repeated review
    lines.append(dict(lines[2]))
    lines.append({**lines[1], "timestamp": 1420070400500, "rating": 0})  # out of their 1-5 filter
    source = tmp_path / "raw"
    source.mkdir()
    (source / "All_Beauty.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    kept = {}
    for name, cfg in (
        ("theirs", dataset_cfg(params, "amazon")),
        (
            "ours",
            dataset_cfg(params, "amazon").model_copy(update={"keep_empty": False, "keep_duplicates": False}),
        ),
    ):
        cfg = cfg.model_copy(update={"source": str(source), "categories": ["All_Beauty"]})
        counts = ingest(
            "amazon", cfg, tmp_path / f"{name}.parquet", tmp_path / f"{name}.q.parquet", fast=fast
        )
        kept[name] = pq.read_table(tmp_path / f"{name}.parquet").to_pydict()
        assert counts["kept"] == len(kept[name]["id"])
    assert len(kept["theirs"]["id"]) == 9 and len(set(kept["theirs"]["id"])) == 9
    repeat = "u1:a1:1420070400002"
    assert kept["theirs"]["id"].count(f"{repeat}#2") == 1 and kept["theirs"]["id"].count(f"{repeat}#3") == 1
    assert kept["theirs"]["text"][6] == "   " and kept["theirs"]["text"][:6] == [
        f"review {i}" for i in range(6)
    ]
    assert kept["ours"]["id"] == kept["theirs"]["id"][:6]


def their_amazon_sample(half_years: list[int], ratings: list[int], n: int, seed: int) -> list[int]:
    """The rows of the authors' Amazon sample as their dataset/amazon_reviews_23/scope.py states it: a row
    index, all rows when n covers them, a plain seeded polars sample when n is under the number of (half_year,
    rating) strata, else the lowest-index row of each stratum plus DataFrame.sample(n - strata, seed) of the
    others."""
    import polars as pl

    df = pl.DataFrame({"half_year": half_years, "rating": ratings}).with_row_index("row_id")
    if n >= df.height:
        return df["row_id"].to_list()
    if n < df.select("half_year", "rating").unique().height:
        return sorted(df.sample(n=n, seed=seed)["row_id"].to_list())
    first = df.group_by("half_year", "rating", maintain_order=True).head(1)["row_id"]
    others = df.filter(~pl.col("row_id").is_in(first.implode()))
    return sorted(first.to_list() + others.sample(n=n - len(first), seed=seed)["row_id"].to_list())


@pytest.mark.parametrize("n", [15, 40, 70])
def test_amazon_sample_is_their_rows(n, tmp_path):
    """sample.draw cover-uniform: the preset's slice stage keeps the rows their scope keeps on the same frame
    (one stratum with a single row, rows not grouped by stratum); the embedded default's allocation differs.
    """
    import pyarrow as pa

    from drift.protocol.slicing import build_slices

    params = applied("paper-amazon", tmp_path)
    cfg = dataset_cfg(params, "amazon")
    cfg = type(cfg).model_validate(
        {**cfg.model_dump(), "min_samples": 1, "slices": {"unit": "half-year", "start": 2014, "end": 2016}}
    )
    rng = np.random.default_rng(3)
    m = 200
    months = rng.integers(0, 48, m)
    ratings = rng.choice([1, 2, 3, 4, 5], m, p=[0.1, 0.05, 0.1, 0.25, 0.5]).astype(float)
    ratings[(months // 6) == 3] = 5.0
    ratings[np.flatnonzero((months // 6) == 3)[0]] = 2.0  # a stratum of one row
    times = [f"{2014 + mo // 12}-{mo % 12 + 1:02d}-15" for mo in months]
    records = pa.table(
        {
            "id": [f"r{i:03d}" for i in range(m)],
            "label": ratings.tolist(),
            "time": pa.array(np.array(times, dtype="datetime64[us]")),
        }
    )
    in_span = [i for i, mo in enumerate(months) if mo < 24]
    half_years = [28 + int(months[i]) // 6 for i in in_span]
    theirs = {
        f"r{in_span[i]:03d}"
        for i in their_amazon_sample(half_years, [int(ratings[i]) for i in in_span], n, cfg.sample.seed)
    }
    sample = cfg.sample.model_copy(update={"n": n})
    table, _ = build_slices(records, cfg.model_copy(update={"sample": sample}), params.split)
    assert set(table.column("id").to_pylist()) == theirs and len(theirs) == min(n, len(in_span))
    default = cfg.model_copy(update={"sample": sample.model_copy(update={"draw": "proportional"})})
    ours, _ = build_slices(records, default, params.split)
    assert set(ours.column("id").to_pylist()) != theirs


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_cutoff_seeds_are_their_slice_seeds(preset, tmp_path):
    """train.slice_seed hash: f_k's seed is theirs, int.from_bytes(sha256(f"{seed}:{trainer}:{slice}")[:4],
    "big") (their pipeline/training.py _slice_seed) with their trainer key (the snapshot's name, text probes'
    with _base) and the slice's time value (a year, or half-years from 2000), for every model of the run; the
    default offsets by k."""
    import hashlib

    from drift.train.loop import cutoff_seed

    params = applied(preset, tmp_path)
    unit = dataset_cfg(params, PRESETS[preset]).slices.unit
    label, time = ("2014-H2", 29) if unit == "half-year" else ("1931", 1931)
    for model, m in facts(PRESETS[preset])["models"].items():
        key = m["snapshot"].rsplit("/", 1)[1].removesuffix(".json")
        theirs = int.from_bytes(hashlib.sha256(f"3:{key}:{time}".encode()).digest()[:4], "big")
        assert cutoff_seed(3, model, 5, label, params.train.slice_seed) == theirs, model
    assert cutoff_seed(3, "mlp-s", 5, label) == 3 * 100_003 + 5


# every trainer key of their code (pipeline/image/trainers.py conference_image_model_configs, the 21 image
# models; model/dataset/text/architectures.py _SEQUENCE_MODEL_REGISTRY, the 12 text heads;
# model/text/frozen_backbone.py FROZEN_TEXT_BACKBONE_IDS, the 8 text probes), each the name a slice seed
# hashes
THEIR_TRAINER_KEYS = {
    "mlp-s": "mlp_s",
    "mlp-m": "mlp_m",
    "mlp-l": "mlp_l",
    "cnn-s": "cnn_s",
    "cnn-m": "cnn_m",
    "cnn-l": "cnn_l",
    "resnet-s": "resnet_s",
    "resnet-m": "resnet_m",
    "resnet-l": "resnet_l",
    "vit-s": "vit_s",
    "vit-m": "vit_m",
    "vit-l": "vit_l",
    "probe-resnet50-in": "resnet50_in_frozen",
    "probe-vit-s16-in21k": "vit_s16_in21k_frozen",
    "probe-dinov2-s": "dinov2_s_frozen",
    "probe-dinov3-s": "dinov3_s_frozen",
    "probe-convnext-s": "convnext_s_frozen",
    "probe-mae-b": "mae_b_frozen",
    "probe-eva02-b": "eva02_b_frozen",
    "probe-clip-b32": "clip_b32_frozen",
    "probe-siglip-b": "siglip_b_frozen",
    "ffn-s": "ffn_s",
    "ffn-m": "ffn_m",
    "ffn-l": "ffn_l",
    "textcnn-s": "textcnn_s",
    "textcnn-m": "textcnn_m",
    "textcnn-l": "textcnn_l",
    "bigru-s": "bigru_s",
    "bilstm-m": "bilstm_m",
    "bilstm-attn-l": "bilstm_attn_l",
    "tx-s": "tx_s",
    "tx-m": "tx_m",
    "tx-l": "tx_l",
    "probe-minilm-l6": "minilm_l6_frozen",
    "probe-distilbert": "distilbert_base_frozen",
    "probe-bert": "bert_base_frozen",
    "probe-roberta": "roberta_base_frozen",
    "probe-deberta-v3": "deberta_v3_base_frozen",
    "probe-electra": "electra_base_frozen",
    "probe-mpnet": "mpnet_base_frozen",
    "probe-modernbert": "modernbert_base_frozen",
}


def test_trainer_keys_are_theirs_for_every_model():
    """Each of our models that is one of theirs hashes its slice seeds under their trainer key; every paper
    preset's roster is among them, and the seed is theirs for a half-year and a year."""
    import hashlib

    from drift.train.loop import cutoff_seed, trainer_key

    assert {n: trainer_key(n) for n in THEIR_TRAINER_KEYS} == THEIR_TRAINER_KEYS
    for dataset in PRESETS.values():
        assert set(facts(dataset)["models"]) <= set(THEIR_TRAINER_KEYS)
    for model, key in THEIR_TRAINER_KEYS.items():
        for label, time in (("2014-H1", 28), ("1950", 1950)):
            theirs = int.from_bytes(hashlib.sha256(f"0:{key}:{time}".encode()).digest()[:4], "big")
            assert cutoff_seed(0, model, 2, label, "hash") == theirs, model
            assert cutoff_seed(0, model, 2, label) == 2  # the default: seed * 100003 + k


@pytest.mark.compute
def test_vision_encoders_pool_as_theirs(tmp_path):
    """The pooling of every Yearbook encoder as the preset builds it (timm's head, embed.image_pooling) is the
    one their model reads out: CLIP's pooler_output (the CLS token after the final LayerNorm: token), SigLIP's
    attention-pooling head (map), torchvision ConvNeXt's avgpool then LayerNorm2d (avg, head norm), DINOv2's
    torch.hub CLS token after the norm (token), DINOv3's pooler_output (token), and their timm backbones with
    num_classes=0 (EVA-02, ResNet-50, ViT-S/16, MAE: timm's own default)."""
    import timm

    from drift.encoders.vision import head_pooling

    params = applied("paper-yearbook", tmp_path)
    theirs = {
        "clip-b32": "token",
        "siglip-b": "map",
        "convnext-s": "avg",
        "dinov2-s": "token",
        "dinov3-s": "token",
        "eva02-b": "avg",
        "resnet50-in": "avg",
        "vit-s16-in21k": "token",
        "mae-b": "token",
    }
    assert sorted(theirs) == sorted(params.embed.encoders)
    for name, pooling in theirs.items():
        with torch.device("meta"):
            model = timm.create_model(ENCODERS[name].hub_id, pretrained=False, num_classes=0)
        if name in params.embed.image_pooling:
            model.reset_classifier(0, params.embed.image_pooling[name])
        assert head_pooling(model) == pooling, name
        if pooling == "token":  # the token is read after the final LayerNorm, as their pooler outputs
            assert isinstance(model.norm, nn.LayerNorm) and isinstance(model.fc_norm, nn.Identity), name
    with torch.device("meta"):
        convnext = timm.create_model(ENCODERS["convnext-s"].hub_id, pretrained=False, num_classes=0)
    assert type(convnext.head.norm).__name__ == "LayerNorm2d"  # pooled, then normalised: their classifier[0]


# their MLP presets (drift_happens/model/dataset/image/architectures.py _mlp_preset: hidden layers, ReLU, no
# normalisation, no dropout) and their ImageMLP's construction (model/blocks/mlp.py): Linear, ReLU per hidden
# layer in order, then the Linear to the classes
THEIR_MLP_HIDDEN = {"mlp-s": (32,), "mlp-m": (128, 128), "mlp-l": (512, 512, 512)}


def their_mlp(hidden: tuple[int, ...], in_dim: int, n_classes: int) -> nn.Sequential:
    layers, prev = [], in_dim
    for width in hidden:
        layers += [nn.Linear(prev, width), nn.ReLU()]
        prev = width
    return nn.Sequential(*layers, nn.Linear(prev, n_classes))


@pytest.mark.compute
@pytest.mark.parametrize("name", sorted(THEIR_MLP_HIDDEN))
def test_mlp_is_their_construction(name):
    """Our MLPs on a 3x32x32 portrait have their layout, layer by layer (Linear shapes, biases, ReLU), their
    exact parameter count, and, built after the same torch seed, the same initial weights: their modules' init
    order is ours for these models."""
    from drift.models import InputSpec, create_model

    torch.manual_seed(11)
    ours = create_model(name, InputSpec("pixels", (3, 32, 32)), 2)
    torch.manual_seed(11)
    theirs = their_mlp(THEIR_MLP_HIDDEN[name], 3 * 32 * 32, 2)
    layers = [
        m
        for m in ours.modules()
        if isinstance(m, (nn.Linear, nn.ReLU, nn.BatchNorm1d, nn.LayerNorm, nn.Dropout))
    ]
    assert [type(m) for m in layers] == [type(m) for m in theirs]
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    for a, b in zip([p for p in ours.parameters()], theirs.parameters()):
        assert a.shape == b.shape and torch.equal(a, b)


# a real portrait (fixtures' PROVENANCE)
PORTRAIT = ROOT / "tests" / "fixtures" / "yearbook" / "face_1955.png"


def their_area_means(portrait: np.ndarray) -> np.ndarray:
    """[H, W] integers -> float64 [32, 32]: OpenCV's INTER_AREA shrink (their dataset/yearbook/transform.py),
    stated here independently: each input pixel repeated 32 times along both axes, then the exact mean of each
    H x W block (an integer sum over H * W)."""
    h, w = portrait.shape
    fine = np.repeat(np.repeat(portrait.astype(np.int64), 32, axis=0), 32, axis=1)
    return fine.reshape(32, h, 32, w).sum(axis=(1, 3)) / (h * w)


def test_portrait_resize_is_their_area_average():
    """yearbook.resize area on a portrait of the real size (186 x 171, a ratio that is no integer) gives, per
    pixel, the mean of the input area it covers; the default (yearbook.pixels uint8) stores those means
    rounded (at most 0.5 off), the same bytes as before the knob."""
    rng = np.random.default_rng(5)
    portrait = rng.integers(0, 256, (186, 171), dtype=np.uint8)
    theirs = their_area_means(portrait)
    ours = yearbook_module.area_resize(np.repeat(portrait[..., None], 3, axis=2))
    assert ours.dtype == np.uint8 and ours.shape == (3, 32, 32) and (ours[0] == ours[2]).all()
    assert np.abs(ours[0] - theirs).max() <= 0.5 + 1e-9
    assert (ours[0] == np.rint(theirs)).all()  # the means, rounded: the same bytes


def test_real_portrait_stores_their_float32_means(tmp_path):
    """yearbook.pixels float32 (their load_downscaled_images_into_df keeps cv2's INTER_AREA output as
    float32): a real portrait read through the reader from a corpus folder is stored as the area means the
    test computes, to float32's last bit on any CPU (one unit in the last place); uint8 stores them rounded,
    and the two differ on most pixels of a real portrait (what the knob changes)."""
    from PIL import Image

    from drift.data.ledger import Ledger

    gray = np.asarray(Image.open(PORTRAIT))[..., 0]
    theirs = their_area_means(gray).astype(np.float32)
    (tmp_path / "M").mkdir()
    shutil.copy(PORTRAIT, tmp_path / "M" / "1955_Fixture_School_1.png")
    stored = {}
    for pixels in ("uint8", "float32"):
        cfg = yearbook_module.YearbookParams(source=str(tmp_path), resize="area", pixels=pixels)
        (rec,) = list(yearbook_module.read(cfg, Ledger("yearbook")))
        stored[pixels] = rec["image"]
    f32, u8 = stored["float32"], stored["uint8"]
    assert f32.dtype == np.float32 and f32.shape == (3, 32, 32) and (f32[0] == f32[1]).all()
    assert (np.abs(f32[0] - theirs) <= np.spacing(theirs)).all()
    assert u8.dtype == np.uint8 and (u8[0] == np.rint(their_area_means(gray))).all()
    assert (f32[0] != u8[0]).mean() > 0.5  # a real portrait's means are rarely integers


@pytest.mark.compute
def test_float_pixels_reach_the_models_and_encoders(tmp_path):
    """Float32 pixels (synth-portraits.pixels float32, the same path as yearbook.pixels) travel unrounded
    through ingest's records, the slice table and the feature file to a model's input (divided by 255, or as
    stored for the models of train.pixel_scale raw, bit for bit) and to a frozen encoder's input (raw: the
    0-255 floats, bilinearly upsampled); uint8 pixels keep their keys."""
    from drift.core.params import SplitParams
    from drift.data.datasets import synth_portraits
    from drift.data.ingest import ingest
    from drift.data.records import payload_key, read_records, table_images
    from drift.models.inputs import open_inputs
    from drift.store.features import build_pixels
    from drift.store.slices import image_dtype, read_slice_table, slice_dataset, write_slice_table

    kept = {}
    for pixels in ("uint8", "float32"):
        cfg = synth_portraits.SynthPortraitsParams(
            k=2, per_slice=40, pixels=pixels, slices={"unit": "year", "start": 2000, "end": 2002}
        )
        ingest("synth-portraits", cfg, tmp_path / pixels / "records.parquet", tmp_path / pixels / "q.parquet")
        records = read_records(tmp_path / pixels / "records.parquet")
        table, manifest = slice_dataset(records, "synth-portraits", SplitParams())
        write_slice_table(table, tmp_path / pixels / "t.lance", manifest)
        kept[pixels] = (cfg, records, tmp_path / pixels / "t.lance")
    drawn = np.concatenate([synth_portraits.make_slice(t, kept["float32"][0])[0] for t in range(2)])
    assert drawn.dtype == np.float32 and (drawn != np.round(drawn)).mean() > 0.5
    _, records, path = kept["float32"]
    assert np.array_equal(table_images(records), drawn)
    assert records.column("key").to_pylist() == [payload_key(im) for im in drawn]
    _, records8, path8 = kept["uint8"]
    assert image_dtype(path8) == np.uint8 and table_images(records8).dtype == np.uint8
    assert (
        records8.column("key").to_pylist()[0]
        == __import__("hashlib")
        .sha256(
            # the uint8 key as before
            repr((3, 32, 32)).encode() + table_images(records8)[0].tobytes()
        )
        .hexdigest()
    )
    assert image_dtype(path) == np.float32
    images = table_images(read_slice_table(path))
    assert images.dtype == np.float32 and sorted(map(bytes, images)) == sorted(map(bytes, drawn))
    build_pixels(path, tmp_path / "pixels", "k")
    inputs = open_inputs("pixels", tmp_path / "pixels")
    (x,) = inputs.batch(np.arange(len(images)))
    assert x.dtype == torch.float32 and torch.equal(x, torch.from_numpy(images.copy()) / 255.0)
    # what PixelScaled models read (pixel_scale raw)
    (stored,) = inputs.as_stored().batch(np.arange(len(images)))
    assert torch.equal(stored, torch.from_numpy(images.copy()))
    images = images[:8].copy()
    # a frozen encoder's input (VisionEncoder.preprocess, no weights needed): raw reads the floats as they are
    from drift.encoders.vision import VisionEncoder

    encoder = VisionEncoder.__new__(VisionEncoder)
    encoder.device, encoder.image_size, encoder.image_input = "cpu", 64, "raw"
    upsampled = torch.nn.functional.interpolate(
        torch.from_numpy(images), size=(64, 64), mode="bilinear", align_corners=False
    )
    assert torch.equal(encoder.preprocess(images), upsampled)
    encoder.image_input = "normalised"
    encoder._mean, encoder._std = torch.zeros(1, 3, 1, 1), torch.ones(1, 3, 1, 1)
    before = images.copy()
    assert torch.allclose(encoder.preprocess(images), upsampled / 255, atol=1e-6)
    assert np.array_equal(images, before)  # never divided in place


@pytest.mark.compute
def test_the_yearbook_preset_stores_float_pixels(tmp_path):
    """The preset stores the area means unrounded (`yearbook.pixels: float32`), as the authors' run, and names
    no yearbook.pixels deviation, nor one for the models' reading of them (they read the stored values)."""
    text = (ROOT / "params" / "paper-yearbook.yaml").read_text()
    assert not re.search(r"^# deviation yearbook\.pixels:", text, flags=re.M)
    assert not re.search(r"^# deviation yearbook\.pixel_roundtrip:", text, flags=re.M)
    found = {k: (a, b) for k, a, b in compare("paper-yearbook", tmp_path) if k == "yearbook.pixels"}
    assert found == {"yearbook.pixels": ("float32", "float32")}


# their CNN presets (architectures.py _cnn_preset: channels, kernel 3, batch norm, ReLU, max-pool after every
# convolution, global average pool, no MLP head) and their ImageCNN's construction (model/blocks/cnn.py)
THEIR_CNN_CHANNELS = {"cnn-s": (32, 64, 128), "cnn-m": (48, 96, 192, 192), "cnn-l": (64, 128, 256, 256, 512)}


class TheirCNN(nn.Module):
    def __init__(self, channels, n_classes):
        super().__init__()
        layers, prev = [], 3
        for width in channels:  # nn.Conv2d's default bias=True, nn.MaxPool2d's default floor
            layers += [
                nn.Conv2d(prev, width, 3, padding=1),
                nn.BatchNorm2d(width),
                nn.ReLU(),
                nn.MaxPool2d(2, 2),
            ]
            prev = width
        self.encoder, self.head = nn.Sequential(*layers), nn.Sequential(nn.Linear(prev, n_classes))

    def forward(self, x):
        return self.head(self.encoder(x).mean(dim=(2, 3)))


@pytest.mark.compute
@pytest.mark.parametrize("name", sorted(THEIR_CNN_CHANNELS))
def test_cnn_is_their_construction_but_the_conv_bias(name):
    """Our CNNs are theirs on a 3x32x32 portrait but for the convolutions' biases, which the batch norm after
    each removes: their parameter count is ours plus one per channel, and their model holding our weights
    (biases zero) gives our outputs, training and evaluation mode alike. The bias draws change the initial
    weights that follow them; built with modules authors, ours keep the biases and start from their weights.
    """
    from drift.models import InputSpec, create_model

    ours = create_model(name, InputSpec("pixels", (3, 32, 32)), 2)
    theirs = TheirCNN(THEIR_CNN_CHANNELS[name], 2)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(theirs) == count(ours) + sum(THEIR_CNN_CHANNELS[name])
    own = [m for m in ours.modules() if not isinstance(m, (nn.Sequential, type(ours)))]
    their = [m for m in theirs.modules() if not isinstance(m, (nn.Sequential, TheirCNN))]
    assert [type(m) for m in own] == [type(m) for m in their]
    with torch.no_grad():
        for a, b in zip(own, their):
            if isinstance(a, (nn.Conv2d, nn.Linear, nn.BatchNorm2d)):
                b.weight.copy_(a.weight)
                if isinstance(a, nn.Conv2d):
                    assert a.bias is None and b.bias is not None
                    b.bias.zero_()
                else:
                    b.bias.copy_(a.bias)
    x = torch.rand(8, 3, 32, 32)
    for mode in (True, False):
        ours.train(mode), theirs.train(mode)
        torch.testing.assert_close(ours(x), theirs(x), rtol=1e-5, atol=1e-6)
    # modules authors: their biases, their count and, from the same seed, their initial weights
    torch.manual_seed(8)
    built = create_model(name, InputSpec("pixels", (3, 32, 32)), 2, modules="authors")
    torch.manual_seed(8)
    theirs = TheirCNN(THEIR_CNN_CHANNELS[name], 2)
    assert count(built) == count(theirs)
    assert all(torch.equal(a, b) for a, b in zip(built.parameters(), theirs.parameters()))


# their ResNet presets (architectures.py _resnet_preset) and their ImageResNet (model/blocks/resnet.py):
#   stem       Conv2d(3, c0, 3, padding 1, no bias: use_batchnorm), BatchNorm2d, ReLU; no stem pool
#   stages     one nn.Sequential per width; its first BasicBlock has stride 1 when the width stays, else 2, the
#              others stride 1; a BasicBlock is conv3x3(stride)-BN-ReLU-conv3x3-BN, plus the skip (a 1x1 conv, no
#              bias, and BN when the stride or width changes), then ReLU
#   head       AdaptiveAvgPool2d(1), flatten, Linear(c_last, classes)
# | preset   | stem width | widths        | blocks    | params (3x32x32, 2 classes) |
# | resnet-s | 18         | 18, 36, 72    | 1, 1, 1   | 97,940                      |
# | resnet-m | 32         | 32, 64, 128   | 2, 2, 1   | 400,162                     |
# | resnet-l | 56         | 56, 112, 224  | 2, 2, 2   | 2,125,818                   |
THEIR_RESNETS = {
    "resnet-s": (18, (18, 36, 72), (1, 1, 1), 97_940),
    "resnet-m": (32, (32, 64, 128), (2, 2, 1), 400_162),
    "resnet-l": (56, (56, 112, 224), (2, 2, 2), 2_125_818),
}


class TheirBasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x):
        out = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(out + self.down(x))


class TheirResNet(nn.Module):
    def __init__(self, stem, widths, blocks, n_classes):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, stem, 3, padding=1, bias=False), nn.BatchNorm2d(stem)
        stages, prev = [], stem
        for width, n in zip(widths, blocks):
            first = TheirBasicBlock(prev, width, 1 if prev == width else 2)
            stages.append(nn.Sequential(first, *[TheirBasicBlock(width, width, 1) for _ in range(n - 1)]))
            prev = width
        self.stages, self.fc = nn.Sequential(*stages), nn.Linear(prev, n_classes)

    def forward(self, x):
        x = self.stages(torch.relu(self.bn1(self.conv1(x))))
        return self.fc(x.mean(dim=(2, 3)))


@pytest.mark.compute
@pytest.mark.parametrize("name", sorted(THEIR_RESNETS))
def test_resnet_is_their_construction(name):
    """Our ResNets on a 3x32x32 portrait are theirs: the same modules in the same order (convolutions without
    bias, their strides and skips), their exact parameter count, and, built after the same torch seed, the
    same initial weights and the same outputs in training and evaluation mode."""
    from drift.models import InputSpec, create_model

    stem, widths, blocks, count = THEIR_RESNETS[name]
    torch.manual_seed(4)
    ours = create_model(name, InputSpec("pixels", (3, 32, 32)), 2)
    torch.manual_seed(4)
    theirs = TheirResNet(stem, widths, blocks, 2)
    kinds = (nn.Conv2d, nn.BatchNorm2d, nn.Linear)
    own, their = ([m for m in model.modules() if isinstance(m, kinds)] for model in (ours, theirs))
    assert [(type(m), m.weight.shape, getattr(m, "stride", None), m.bias is None) for m in own] == [
        (type(m), m.weight.shape, getattr(m, "stride", None), m.bias is None) for m in their
    ]
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters()) == count
    for a, b in zip(own, their):
        assert torch.equal(a.weight, b.weight) and (a.bias is None or torch.equal(a.bias, b.bias))
    x = torch.rand(4, 3, 32, 32) * 255
    for mode in (True, False):
        ours.train(mode), theirs.train(mode)
        torch.testing.assert_close(ours(x), theirs(x), rtol=1e-5, atol=1e-5)


# their ViT presets (architectures.py _vit_preset) and their ImageViT (model/blocks/vit.py): a patch Conv2d (with
# bias), a CLS token and position embeddings (zeros, then trunc_normal std 0.02 after every other module is built),
# dropout after adding them, ONE nn.TransformerEncoderLayer(d, heads, int(d * mlp_ratio), dropout, GELU,
# batch_first, post-norm) that nn.TransformerEncoder deep-copies num_layers times (every layer starts from the same
# weights), a LayerNorm on the CLS token, Linear to the classes.
# | preset | dim | layers | heads | feed-forward | params (3x32x32, 2 classes) |
# | vit-s  | 64  | 2      | 4     | 128          | 74,562                      |
# | vit-m  | 128 | 4      | 4     | 256          | 545,154                     |
# | vit-l  | 192 | 6      | 6     | 576          | 2,248,514                   |
THEIR_VITS = {
    "vit-s": (64, 2, 4, 2.0, 74_562),
    "vit-m": (128, 4, 4, 2.0, 545_154),
    "vit-l": (192, 6, 6, 3.0, 2_248_514),
}


class TheirViT(nn.Module):
    def __init__(self, dim, layers, heads, ratio, n_classes, dropout=0.1):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, 4, stride=4)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, 65, dim))
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(
            dim, heads, int(dim * ratio), dropout, activation="gelu", batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, n_classes)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = self.dropout(torch.cat([self.cls_token.expand(len(x), -1, -1), x], dim=1) + self.pos_embed)
        return self.head(self.norm(self.encoder(x)[:, 0]))


def their_layer_weights(layer: nn.TransformerEncoderLayer) -> dict[str, torch.Tensor]:
    """An nn.TransformerEncoderLayer's weights under our Block's names (drift/models/blocks.py)."""
    return {
        "attn.qkv.weight": layer.self_attn.in_proj_weight,
        "attn.qkv.bias": layer.self_attn.in_proj_bias,
        "attn.proj.weight": layer.self_attn.out_proj.weight,
        "attn.proj.bias": layer.self_attn.out_proj.bias,
        "ln1.weight": layer.norm1.weight,
        "ln1.bias": layer.norm1.bias,
        "mlp.0.weight": layer.linear1.weight,
        "mlp.0.bias": layer.linear1.bias,
        "mlp.3.weight": layer.linear2.weight,
        "mlp.3.bias": layer.linear2.bias,
        "ln2.weight": layer.norm2.weight,
        "ln2.bias": layer.norm2.bias,
    }


def vit_state(theirs: TheirViT) -> dict[str, torch.Tensor]:
    """Their ViT's weights under our ViT's names."""
    state = {
        "patch_embed.weight": theirs.patch_embed.weight,
        "patch_embed.bias": theirs.patch_embed.bias,
        "cls": theirs.cls_token,
        "pos": theirs.pos_embed,
        "ln.weight": theirs.norm.weight,
        "ln.bias": theirs.norm.bias,
        "head.weight": theirs.head.weight,
        "head.bias": theirs.head.bias,
    }
    for i, layer in enumerate(theirs.encoder.layers):
        state |= {f"blocks.{i}.{k}": v for k, v in their_layer_weights(layer).items()}
    return state


def layers_start_equal(blocks) -> bool:
    first = [p for p in blocks[0].parameters()]
    return all(all(torch.equal(a, b) for a, b in zip(first, block.parameters())) for block in blocks[1:])


@pytest.mark.compute
@pytest.mark.parametrize("name", sorted(THEIR_VITS))
def test_vit_is_their_construction_but_the_layers_init(name):
    """Our ViTs have their layout (patch convolution with bias, CLS token, position embeddings, post-norm GELU
    layers with attention, residual and feed-forward dropout, the norm on the CLS token) and their exact
    parameter count; holding their weights, ours give their outputs. Their layers start as copies of one layer
    (nn. TransformerEncoder deep-copies it); ours each draw their own, unless built with modules authors,
    which gives their initial weights from the same torch seed."""
    from drift.models import InputSpec, create_model

    dim, layers, heads, ratio, count = THEIR_VITS[name]
    ours = create_model(name, InputSpec("pixels", (3, 32, 32)), 2, dropout=0.1)
    theirs = TheirViT(dim, layers, heads, ratio, 2)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters()) == count
    assert layers == len(ours.blocks) and ours.patch_embed.bias is not None and ours.drop.p == 0.1
    assert layers_start_equal(theirs.encoder.layers) and not layers_start_equal(ours.blocks)
    state = vit_state(theirs)
    assert set(state) == set(ours.state_dict())
    ours.load_state_dict(state)
    x = torch.rand(4, 3, 32, 32) * 255
    ours.eval(), theirs.eval()
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x), rtol=1e-4, atol=1e-4)
    # modules: authors builds theirs: after the same torch seed, their initial weights, tensor for tensor
    torch.manual_seed(6)
    built = create_model(
        name, InputSpec("pixels", (3, 32, 32)), 2, dropout=0.1, modules="authors"
    ).state_dict()
    torch.manual_seed(6)
    theirs = TheirViT(dim, layers, heads, ratio, 2)
    assert all(torch.equal(built[k], v) for k, v in vit_state(theirs).items())


# their text heads (model/dataset/text/architectures.py _SEQUENCE_MODEL_REGISTRY; model/text/feature_models.py),
# over 768-d RoBERTa token states padded to max_length (their sequence caches: model/text/backbone_cache.py,
# padding="max_length"), dropout 0.1 everywhere:
#   ffn      masked mean, then Linear-ReLU-Dropout per hidden width, Linear to the outputs
#   textcnn  padding zeroed, one Conv1d(768, filters, k) per kernel (bias, no padding: windows inside the padded
#            sequence), ReLU, max over every window (those over padding too), concat, Linear-ReLU projection,
#            Dropout, Linear
#   rnn      Linear-ReLU projection, bidirectional GRU/LSTM over the packed real tokens (dropout between layers),
#            masked mean of the outputs, or attention: Linear(2H, 1) scores, masked softmax, weighted sum; Dropout,
#            Linear
#   tx       Linear projection, ONE nn.TransformerEncoderLayer(d, heads, ff, dropout, GELU, batch_first,
#            post-norm) deep-copied num_layers times by nn.TransformerEncoder, key padding mask, masked mean,
#            Dropout, Linear
# | head          | widths                                         | params, 1 output | params, 7 outputs |
# | ffn-s         | hidden 128                                     | 98,561           | 99,335            |
# | ffn-m         | hidden 512                                     | 394,241          | 397,319           |
# | ffn-l         | hidden 2048                                    | 1,576,961        | 1,589,255         |
# | textcnn-s     | 16 filters, kernels 3 4, projection 64         | 88,225           | 88,615            |
# | textcnn-m     | 48 filters, kernels 3 4 5, projection 128      | 461,201          | 461,975           |
# | textcnn-l     | 192 filters, kernels 3 4 5, projection 256     | 1,918,017        | 1,919,559         |
# | bigru-s       | projection 64, GRU 64, 1 layer                 | 99,265           | 100,039           |
# | bilstm-m      | projection 160, LSTM 160, 1 layer              | 535,521          | 537,447           |
# | bilstm-attn-l | projection 224, LSTM 224, 2 layers, attention  | 2,187,362        | 2,190,056         |
# | tx-s          | dim 64, 1 layer, 4 heads, feed-forward 128     | 82,753           | 83,143            |
# | tx-m          | dim 112, 4 layers, 4 heads, feed-forward 224   | 492,577          | 493,255           |
# | tx-l          | dim 192, 5 layers, 6 heads, feed-forward 512   | 1,879,361        | 1,880,519         |
THEIR_HEADS = {
    "ffn-s": ("ffn", dict(hidden=(128,))),
    "ffn-m": ("ffn", dict(hidden=(512,))),
    "ffn-l": ("ffn", dict(hidden=(2048,))),
    "textcnn-s": ("textcnn", dict(filters=16, kernels=(3, 4), projection=64)),
    "textcnn-m": ("textcnn", dict(filters=48, kernels=(3, 4, 5), projection=128)),
    "textcnn-l": ("textcnn", dict(filters=192, kernels=(3, 4, 5), projection=256)),
    "bigru-s": ("rnn", dict(cell=nn.GRU, projection=64, hidden=64, layers=1, attention=False)),
    "bilstm-m": ("rnn", dict(cell=nn.LSTM, projection=160, hidden=160, layers=1, attention=False)),
    "bilstm-attn-l": ("rnn", dict(cell=nn.LSTM, projection=224, hidden=224, layers=2, attention=True)),
    "tx-s": ("tx", dict(dim=64, heads=4, layers=1, ff=128)),
    "tx-m": ("tx", dict(dim=112, heads=4, layers=4, ff=224)),
    "tx-l": ("tx", dict(dim=192, heads=6, layers=5, ff=512)),
}
THEIR_HEAD_PARAMS = {
    "ffn-s": (98_561, 99_335),
    "ffn-m": (394_241, 397_319),
    "ffn-l": (1_576_961, 1_589_255),
    "textcnn-s": (88_225, 88_615),
    "textcnn-m": (461_201, 461_975),
    "textcnn-l": (1_918_017, 1_919_559),
    "bigru-s": (99_265, 100_039),
    "bilstm-m": (535_521, 537_447),
    "bilstm-attn-l": (2_187_362, 2_190_056),
    "tx-s": (82_753, 83_143),
    "tx-m": (492_577, 493_255),
    "tx-l": (1_879_361, 1_880_519),
}


def their_masked_mean(x, mask):
    m = mask.float().unsqueeze(-1)
    return (x * m).sum(1) / m.sum(1).clamp_min(1.0)


class TheirHead(nn.Module):
    def __init__(self, family, n_out, d=768, p=0.1, **kw):
        super().__init__()
        self.family = family
        if family == "ffn":
            layers, prev = [], d
            for width in kw["hidden"]:
                layers += [nn.Linear(prev, width), nn.ReLU(), nn.Dropout(p)]
                prev = width
            self.net = nn.Sequential(*layers, nn.Linear(prev, n_out))
        elif family == "textcnn":
            self.convs = nn.ModuleList([nn.Conv1d(d, kw["filters"], k) for k in kw["kernels"]])
            self.projection = nn.Sequential(
                nn.Linear(kw["filters"] * len(kw["kernels"]), kw["projection"]), nn.ReLU()
            )
            self.dropout, self.head = nn.Dropout(p), nn.Linear(kw["projection"], n_out)
        elif family == "rnn":
            self.projection = nn.Sequential(nn.Linear(d, kw["projection"]), nn.ReLU())
            self.rnn = kw["cell"](
                kw["projection"],
                kw["hidden"],
                kw["layers"],
                batch_first=True,
                bidirectional=True,
                dropout=p if kw["layers"] > 1 else 0.0,
            )
            self.attention = nn.Linear(2 * kw["hidden"], 1) if kw["attention"] else None
            self.dropout, self.head = nn.Dropout(p), nn.Linear(2 * kw["hidden"], n_out)
        else:
            self.projection = nn.Linear(d, kw["dim"])
            layer = nn.TransformerEncoderLayer(
                kw["dim"], kw["heads"], kw["ff"], p, batch_first=True, activation="gelu"
            )
            self.encoder = nn.TransformerEncoder(layer, kw["layers"], enable_nested_tensor=False)
            self.dropout, self.head = nn.Dropout(p), nn.Linear(kw["dim"], n_out)

    def forward(self, x, mask):
        if self.family == "ffn":
            return self.net(their_masked_mean(x, mask))
        if self.family == "textcnn":
            x = (x * mask.float().unsqueeze(-1)).transpose(1, 2)
            feats = torch.cat([torch.relu(conv(x)).amax(2) for conv in self.convs], 1)
            return self.head(self.dropout(self.projection(feats)))
        if self.family == "rnn":
            packed = nn.utils.rnn.pack_padded_sequence(
                self.projection(x), mask.sum(1).cpu().clamp_min(1), batch_first=True, enforce_sorted=False
            )
            out, _ = nn.utils.rnn.pad_packed_sequence(
                self.rnn(packed)[0], batch_first=True, total_length=x.shape[1]
            )
            if self.attention is None:
                return self.head(self.dropout(their_masked_mean(out, mask)))
            scores = self.attention(out).squeeze(-1).masked_fill(~mask, torch.finfo(out.dtype).min)
            return self.head(self.dropout((out * torch.softmax(scores, 1).unsqueeze(-1)).sum(1)))
        x = self.encoder(self.projection(x), src_key_padding_mask=~mask)
        return self.head(self.dropout(their_masked_mean(x, mask)))


def padded_tokens(lengths: list[int], width: int, d: int = 768, seed: int = 0):
    """Token states of rows of these lengths, padded to `width` with noise the heads must ignore, and the
    mask."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), width, d, generator=g)
    mask = torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]
    return x, mask


@pytest.mark.compute
@pytest.mark.parametrize("name", sorted(THEIR_HEADS))
def test_text_head_is_their_construction(name):
    """Our text heads at 768-d token states have their modules in their order and their exact parameter counts
    (1 output: Amazon, 7: arXiv). FFN, TextCNN and the recurrent heads draw their initial weights in their
    order (the same weights after the same torch seed); their Transformer deep-copies one layer, ours draw
    each, unless built with modules authors (then their initial weights). Holding the same weights, FFN, the
    recurrent heads and the Transformer give their outputs on rows padded to their max_length; the TextCNN is
    checked below."""
    from drift.models import InputSpec, create_model

    family, kw = THEIR_HEADS[name]
    for n_out, count in zip((1, 7), THEIR_HEAD_PARAMS[name]):
        assert (
            sum(p.numel() for p in create_model(name, InputSpec("tokens", (768,)), n_out).parameters())
            == count
        )
        assert sum(p.numel() for p in TheirHead(family, n_out, **kw).parameters()) == count
    torch.manual_seed(9)
    ours = create_model(name, InputSpec("tokens", (768,), max_tokens=128), 1, dropout=0.1)
    torch.manual_seed(9)
    theirs = TheirHead(family, 1, **kw)
    if family == "tx":
        assert layers_start_equal(theirs.encoder.layers)
        assert len(ours.blocks) == kw["layers"] and (kw["layers"] == 1 or not layers_start_equal(ours.blocks))
        state = {
            "proj.weight": theirs.projection.weight,
            "proj.bias": theirs.projection.bias,
            "head.weight": theirs.head.weight,
            "head.bias": theirs.head.bias,
        }
        for i, layer in enumerate(theirs.encoder.layers):
            state |= {f"blocks.{i}.{k}": v for k, v in their_layer_weights(layer).items()}
        torch.manual_seed(9)  # modules authors: their initial weights from the same seed
        built = create_model(name, InputSpec("tokens", (768,)), 1, 0.1, modules="authors").state_dict()
        assert set(built) == set(state) and all(torch.equal(built[k], v) for k, v in state.items())
        ours.load_state_dict(state)
    else:
        own, their = list(ours.parameters()), list(theirs.parameters())
        assert [p.shape for p in own] == [p.shape for p in their]
        assert all(torch.equal(a, b) for a, b in zip(own, their))
    assert {m.p for m in ours.modules() if type(m).__name__ == "Dropout"} == {0.1}
    if family == "textcnn":
        return
    x, mask = padded_tokens([128, 5, 1, 60], 128)
    ours.eval(), theirs.eval()
    with torch.no_grad():
        torch.testing.assert_close(ours(x, mask), theirs(x, mask), rtol=1e-4, atol=1e-5)


@pytest.mark.compute
@pytest.mark.parametrize("name", ["textcnn-s", "textcnn-m", "textcnn-l"])
def test_textcnn_windows_over_their_padding(name, tmp_path):
    """Their TextCNN takes the max over every window of the sequence padded to max_length, windows over
    padding only (zeros: the ReLU of the convolution's bias) included; ours over the windows that start at a
    real token (independent of the padding). Holding the same weights, on rows padded to max_length with room
    for the widest kernel, each of their pooled features is max(ours, relu(bias)); where the bias wins, the
    outputs differ. Built with modules authors, ours take their windows."""
    from drift.models import InputSpec, create_model

    family, kw = THEIR_HEADS[name]
    torch.manual_seed(2)
    ours = create_model(name, InputSpec("tokens", (768,), max_tokens=64), 1).eval()
    torch.manual_seed(2)
    theirs = TheirHead(family, 1, **kw).eval()
    x, mask = padded_tokens([59, 30, 3, 1], 64)
    seen = {}
    ours.projection.register_forward_hook(lambda m, args, out: seen.update(ours=args[0]))
    theirs.projection.register_forward_hook(lambda m, args, out: seen.update(theirs=args[0]))
    with torch.no_grad():
        a, b = ours(x, mask), theirs(x, mask)
    floor = torch.cat([torch.relu(conv.bias) for conv in theirs.convs])
    torch.testing.assert_close(seen["theirs"], torch.maximum(seen["ours"], floor), rtol=1e-5, atol=1e-5)
    assert (seen["theirs"] > seen["ours"] + 1e-6).any() and (a - b).abs().max() > 1e-6
    # modules authors: their windows over max_tokens, whatever padding the batch came with; a checkpoint of it
    # loads as it was built (its convolutions' names)
    from drift.models.checkpoints import load_checkpoint, save_checkpoint

    spec = InputSpec("tokens", (768,), max_tokens=64)
    torch.manual_seed(2)
    authors = create_model(name, spec, 1, modules="authors").eval()
    save_checkpoint(authors, tmp_path / "textcnn.pt")
    loaded = load_checkpoint(name, spec, 1, "regression", tmp_path / "textcnn.pt")
    with torch.no_grad():
        for model in (authors, loaded):
            torch.testing.assert_close(model(x, mask), b, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(model(x[:, :59], mask[:, :59]), b, rtol=1e-5, atol=1e-5)


@pytest.mark.compute
def test_authors_modules_checkpoint_loads_as_built(tmp_path):
    """A checkpoint of a model built with modules authors (a CNN with its convolution biases) loads back into
    the same modules, by its tensors' names; one of ours into ours; an unknown modules value is one line."""
    from drift.core.errors import DriftError
    from drift.models import InputSpec, create_model
    from drift.models.checkpoints import build_model, load_checkpoint, save_checkpoint

    spec = InputSpec("pixels", (3, 32, 32))
    x = torch.rand(2, 3, 32, 32)
    for modules, biased in (("authors", True), ("ours", False)):
        model = build_model(
            "cnn-s", spec, 2, "classification", standardise_pixels=False, modules=modules
        ).eval()
        save_checkpoint(model, tmp_path / f"{modules}.pt")
        loaded = load_checkpoint("cnn-s", spec, 2, "classification", tmp_path / f"{modules}.pt")
        assert (loaded.features[0].bias is not None) == biased
        torch.testing.assert_close(loaded(x), model(x))
    with pytest.raises(DriftError, match="ours, authors"):
        create_model("cnn-s", spec, 2, modules="theirs")

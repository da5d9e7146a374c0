"""The paper presets are the authors' published runs: every fact of params/paper-runs/<dataset>.json (extracted from
their snapshots, learning-mechanisms/drift-happens, CC BY 4.0) checked against the preset applied to params.yaml,
field by field. A fact may differ only where the preset names it on a `# deviation <key>: <why>` line, and the
README's "Reproducing the paper" lists every such line."""
from __future__ import annotations

import json
import re
import shutil
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
from drift.models import get_model_info
from drift.protocol.tasks import get_task
from drift.train.loop import make_optimizer
from conftest import SHIPPED_PARAMS, checked_params

ROOT = Path(__file__).resolve().parents[1]
PRESETS = {"paper-yearbook": "yearbook", "paper-amazon": "amazon", "paper-arxiv": "arxiv"}
DEVIATION = re.compile(r"^# deviation (\S+): (.+)$", re.M)
# their frozen image encoders, as their code loads them, and ours where they are the same weights
SAME_WEIGHTS = {
    "probe-dinov2-s": "vit_small_patch14_dinov2.lvd142m",      # torch.hub dinov2_vits14
    "probe-dinov3-s": "vit_small_patch16_dinov3.lvd1689m",     # facebook/dinov3-vits16-pretrain-lvd1689m
    "probe-eva02-b": "eva02_base_patch14_224.mim_in22k",
    "probe-clip-b32": "vit_base_patch32_clip_224.openai",      # openai/clip-vit-base-patch32
    "probe-siglip-b": "vit_base_patch16_siglip_224.webli",     # google/siglip-base-patch16-224
    "probe-resnet50-in": "resnet50.a1_in1k",
    "probe-vit-s16-in21k": "vit_small_patch16_224.augreg_in21k",
    "probe-mae-b": "vit_base_patch16_224.mae",
}
METRICS = {"accuracy": "accuracy", "balanced_mse": "balanced_mse", "auc_macro": "macro_auc"}


def facts(dataset: str) -> dict:
    return json.loads((ROOT / "params" / "paper-runs" / f"{dataset}.json").read_text())


def applied(preset: str, tmp_path: Path, presets: Path = ROOT / "params"):
    params_path = tmp_path / "params.yaml"
    shutil.copy(SHIPPED_PARAMS, params_path)
    apply_preset(preset, params_path=params_path, presets=presets, check=checked_params)
    return checked_params(yaml.safe_load(params_path.read_text()))


def deviations(preset: str) -> dict[str, str]:
    return dict(DEVIATION.findall((ROOT / "params" / f"{preset}.yaml").read_text()))


def time_index(unit: str, year: int, end: bool) -> int:
    """Our slice edge as their time value: a year, or a half-year counted from 2000 (2014-H1 = 28)."""
    if unit == "half-year":
        return (year - 2000) * 2 - (1 if end else 0)
    return year - (1 if end else 0)


def compare(preset: str, tmp_path: Path, presets: Path = ROOT / "params") -> list[tuple[str, object, object]]:
    """(key, theirs, ours) for every fact of the dataset's runs; the keys are what a deviation line names."""
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

    # data scope and slices
    unit = {"half_year": "half-year", "year": "year"}[common["time_unit"]]
    check(f"{dataset}.slices.unit", unit, cfg.slices.unit)
    if "min_time" in common:
        check(f"{dataset}.slices.start", common["min_time"], time_index(unit, cfg.slices.start, False))
        check(f"{dataset}.slices.end", common["max_time"], time_index(unit, cfg.slices.end, True))
    check("train.cumulative", common["train_slices"], "cumulative_from_start")  # our protocol's only one
    if "labels" in common:
        check("arxiv.categories", common["labels"], cfg.categories)
    if "categories" in code:
        check("amazon.categories", code["categories"], cfg.categories)
    if dataset == "amazon":
        check("amazon.text_fields", common["text_col"], "+".join(cfg.text_fields))
        check("amazon.keep_empty", code["empty_texts"], "kept" if cfg.keep_empty else "quarantined")
        check("amazon.keep_duplicates", code["repeated_reviews"], "kept" if cfg.keep_duplicates else "quarantined")
    if dataset == "arxiv":
        check("arxiv.text", common["text_col"], "title_abstract")
        check("arxiv.separator", code["separator"], cfg.separator)
        check("arxiv.inclusion", code["inclusion"], cfg.inclusion)
        check("arxiv.time_field", code["time"], cfg.time_field)
    if dataset == "yearbook":
        check("yearbook.image_size", common["image_size"], [yearbook_module.SIZE] * 2)
        check("yearbook.resize", code["resize"], cfg.resize)
        check("yearbook.pixels", code["pixels"], cfg.pixels)
    # sample and split
    if "sample_size" in common:
        check(f"{dataset}.sample.n", common["sample_size"], cfg.sample.n)
        check(f"{dataset}.sample.seed", common["sample_seed"],
              params.split.seed if cfg.sample.seed is None else cfg.sample.seed)
    if "sample_draw" in code:
        check(f"{dataset}.sample.draw", code["sample_draw"], cfg.sample.draw)
    check("split.seed", common["split_seed"], params.split.seed)
    check("split.draw", code["split_draw"], params.split.draw)
    # our rows reach the draw in ingest order (the slice stage's records), theirs in their DataFrame's
    check("split.row_order", code["split_row_order"], "ingest_order")
    check("split.test_fraction", common["test_size"], params.split.test_fraction)
    strata = ["slice" if s in ("year", "half_year") else "label" for s in common["split_stratify_by"]]
    check("split.stratify", strata, params.split.stratify)
    # the task and its metric
    check("task.metric", METRICS[common["metric"]], get_task(task).metric)
    # training
    check("train.seeds", common["seeds"], train.seeds)
    check("train.epochs", common["epochs"], train.epochs)
    check("train.batch_size", common["batch_size"], train.batch_size)
    check("train.batch_order", code["batch_order"], train.batch_order)
    check("train.slice_seed", code["slice_seed"], train.slice_seed)
    optimizer = make_optimizer(nn.Linear(2, 1), model_training(train, "default", modality, False, 1))
    name = {torch.optim.AdamW: "adamw", torch.optim.Adam: "adam"}[type(optimizer)]
    check("train.optimizer", common.get("optimizer", code.get("optimizer")), name)
    check("train.weight_decay", common.get("weight_decay", code.get("weight_decay")),
          optimizer.defaults["weight_decay"])
    check("train.grad_clip", common.get("gradient_clip_norm"), train.grad_clip)
    if task == "regression":
        check("train.loss", [common["loss"], common["rating_weighting"]], ["weighted_mse", "inverse_frequency"])
    if "loss_weights_rows" in code:
        check("train.loss_weights", code["loss_weights_rows"], train.loss_weights)
    # their code standardises neither targets nor pixels
    if task == "regression":
        check("train.standardise_targets", False, train.standardise_targets)
    if modality == "image":
        check("train.standardise_pixels", False, train.standardise_pixels)
        check("train.pixel_scale", code["pixel_scale"], train.pixel_scale)
        check("embed.image_input", code["encoder_pixels"], embed.image_input)
    # the encoders' forward pass on a GPU, as the encoders decide it (None: float32, no autocast)
    check("embed.compute_dtype", code["encoder_compute_dtype"],
          autocast_dtype(embed.dtype, embed.compute_dtype, "cuda") or "float32")
    # the models, each with its learning rate, its input and its encoder
    models = f["models"]
    check("train.models", sorted(models), sorted(train.models[dataset]))
    for model, m in models.items():
        info = get_model_info(model)
        check(f"train.lr.{model}", m["learning_rate"], train.lr_for(info.family))
        if m.get("dtype") is not None:
            check(f"embed.dtype.{model}", m["dtype"], embed.dtype)
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
            check("embed.pooling", m["pooling_strategy"], {"mean": "masked_mean"}.get(embed.pooling, embed.pooling))
            check("embed.normalize", code["pooled_normalize"], embed.normalize)
            check("embed.max_length", common["max_length"], embed.max_length)
        else:
            # theirs as the timm weights they equal, else as their code names them (then ours differ)
            check(f"embed.encoders.{encoder}", SAME_WEIGHTS.get(model, code["encoder_weights"][model]), spec.hub_id)
            check(f"embed.pooling.{encoder}", "producer_default", "producer_default" if spec.pooling == "timm"
                  else spec.pooling)
            check(f"embed.image_pooling.{encoder}", code["encoder_pooling"].get(model, "producer_default"),
                  embed.image_pooling.get(encoder, "producer_default"))
    return out


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_preset_is_the_published_run(preset, tmp_path):
    named = deviations(preset)
    differ = {key: (theirs, ours) for key, theirs, ours in compare(preset, tmp_path) if theirs != ours}
    unnamed = {k: v for k, v in differ.items() if k not in named}
    assert not unnamed, f"{preset} differs from the authors' runs without a `# deviation` line: {unnamed}"
    for key, why in named.items():
        assert len(why) > 30, f"{preset}: deviation {key} must say why"


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_fact_is_compared(preset, tmp_path):
    """The comparison reads every fact the table holds (a fact added to the table and not compared fails)."""
    dataset = PRESETS[preset]
    keys = {key for key, _, _ in compare(preset, tmp_path)}
    f = facts(dataset)
    assert f["source"].startswith("github.com/learning-mechanisms/drift-happens @ ") and "CC BY 4.0" in f["licence"]
    assert {m for m in f["models"]} <= {k.split(".", 2)[-1] for k in keys if k.startswith("train.lr.")}
    for model, m in f["models"].items():
        assert m["snapshot"].startswith(f"configs/snapshots/presets/{f['group']}/")
    compared_common = {"time_unit", "min_time", "max_time", "train_slices", "labels", "text_col", "image_size",
                       "sample_size", "sample_seed", "split_seed", "test_size", "split_stratify_by", "metric",
                       "seeds", "epochs", "batch_size", "optimizer", "weight_decay", "gradient_clip_norm", "loss",
                       "rating_weighting", "max_length"}
    assert set(f["common"]) <= compared_common
    compared_code = {"categories", "separator", "inclusion", "time", "resize", "optimizer", "weight_decay",
                     "encoder_weights", "loss", "sample_strata", "ratings", "source", "source_url", "encoder_input",
                     "split_draw", "split_row_order", "pixel_scale", "loss_weights_rows", "encoder_pooling",
                     "encoder_pixels", "batch_order", "pooled_normalize", "encoder_compute_dtype", "empty_texts",
                     "repeated_reviews", "sample_draw", "slice_seed", "pixels"}
    assert set(f["from_code"]) <= compared_code


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


def test_readme_lists_every_deviation():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Reproducing the paper", 1)
    assert len(section) == 2, "README has no section 'Reproducing the paper'"
    text = section[1].split("\n## ", 1)[0]
    for preset in PRESETS:
        for key in deviations(preset):
            assert f"`{key}`" in text, f"README's 'Reproducing the paper' does not list {preset}'s deviation {key}"
        assert f"drift preset {preset}" in text and f"drift fetch {PRESETS[preset]}" in text


# ---------------------------------------------------------------- what the preset runs, beyond its params


def their_split_test_rows(years: list[int], labels: list | None, test_size: float, seed: int) -> set[int]:
    """The test rows (positions) of the authors' per-year split as their sample/splits.py states it: rows sorted by
    year (stably here: see the split.row_order deviation), one RandomState(seed) drawing randint(0, 2**32 - 1) per
    year of 3 rows or more, in year order, for train_test_split of that year's rows, stratified by the label when
    every class has 2 rows and ceil(test_size * n) and the rest each hold every class."""
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
        ok = labels is not None and y.nunique() >= 2 and counts.min() >= 2 and n_minor >= y.nunique() \
            and len(y) - n_minor >= y.nunique()
        _, t = train_test_split(part, test_size=test_size, stratify=y if ok else None, random_state=rs)
        test |= set(t.index.tolist())
    return test


@pytest.mark.parametrize("with_labels", [True, False])
def test_split_draws_their_test_rows(with_labels):
    """split.draw per-slice gives the test rows their algorithm gives on the same rows: years of 1, 2, 3, 11 and
    57 rows (11 * 0.3 rounds up to 4 test rows, not 3), one class too rare to stratify in one year."""
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
    records = pa.table({"id": [f"r{i:03d}" for i in range(60)],
                        "time": pa.array(np.array([f"{y}-06-01" for y in years], dtype="datetime64[us]")),
                        "label": labels})
    cfg = DatasetParams(slices={"unit": "year", "start": 1950, "end": 1954})
    table, _ = build_slices(records, cfg, params.split)
    test = {int(i[1:]) for i, s in zip(table.column("id").to_pylist(), table.column("split").to_pylist()) if s == "test"}
    assert test == their_split_test_rows(years, labels, 0.3, 42)
    default, _ = build_slices(records, cfg, checked_params(yaml.safe_load((ROOT / "params.yaml").read_text())).split)
    assert default.column("split").to_pylist() != table.column("split").to_pylist()


def test_yearbook_models_read_0_255(tmp_path):
    """train.pixel_scale raw (their convert_to_tensor_dataset, no division by 255): every image model trained from
    scratch is built with PixelScaled outermost, so its inner model reads the stored 0-255 values; a checkpoint
    of it loads back the same way."""
    from drift.models import InputSpec
    from drift.models.checkpoints import PixelScaled, build_model, load_checkpoint, save_checkpoint

    params = applied("paper-yearbook", tmp_path)
    spec = InputSpec("pixels", (3, 32, 32))
    seen = {}
    for name in [m for m in params.train.models["yearbook"] if get_model_info(m).input == "pixels"]:
        model = build_model(name, spec, 2, "classification", params.train.dropout, params.train.standardise_targets,
                            params.train.standardise_pixels, params.train.pixel_scale)
        assert isinstance(model, PixelScaled) and float(model.pixel_factor) == 255.0, name
        model.inner.register_forward_pre_hook(lambda mod, args: seen.__setitem__("max", float(args[0].max())))
        model.eval()(torch.full((1, 3, 32, 32), 200 / 255))
        assert abs(seen["max"] - 200.0) < 1e-3, name
    save_checkpoint(model, tmp_path / "m.pt")
    assert isinstance(load_checkpoint(name, spec, 2, "classification", tmp_path / "m.pt"), PixelScaled)
    plain_model = build_model("mlp-s", spec, 2, "classification")  # the embedded default: [0, 1]
    assert not isinstance(plain_model, PixelScaled)


@pytest.mark.parametrize("preset,task_name", [("paper-amazon", "regression"), ("paper-arxiv", "multilabel")])
def test_loss_weights_come_from_the_whole_training_split(preset, tmp_path, task_name):
    """train.loss_weights split: every cutoff's loss weighs as theirs does, with weights from the whole training
    split (Amazon: w_r = total / count of rating r, their WeightedMSELoss; arXiv: pos_weight = negatives /
    positives per category in BCEWithLogitsLoss), not from the cutoff's rows."""
    from types import SimpleNamespace

    import torch.nn.functional as F

    from drift.train.loop import loss_weight_rows, prepare_model

    params = applied(preset, tmp_path)
    assert params.train.loss_weights == "split"
    rng = np.random.default_rng(0)
    n = 200
    slices = np.repeat(np.arange(4), n // 4)
    splits = np.where(rng.random(n) < 0.3, "test", "train")
    if task_name == "regression":  # early slices rate high, late ones low: the cutoff's balance is not the split's
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
        theirs = F.binary_cross_entropy_with_logits(outputs[cutoff], y[cutoff],
                                                    pos_weight=torch.where(pos > 0, (len(yt) - pos) / pos, 1.0))
    torch.testing.assert_close(loss_fn(outputs[cutoff], y[cutoff]), theirs)
    own, _ = prepare_model(nn.Linear(1, 1), None, cutoff, y[cutoff], task)  # train.loss_weights cutoff: another loss
    assert abs(float(own(outputs[cutoff], y[cutoff])) - float(theirs)) > 1e-3


def test_dinov3_pools_the_cls_token_of_raw_pixels(tmp_path):
    """The preset's DINOv3-S as the embed stage builds it (random weights, the real architecture) gives their
    pooled vector: the 0-255 portrait upsampled bilinearly to 224 with no normalisation, through the backbone,
    the CLS token after the final norm (the Hugging Face model's pooler_output), not timm's patch average."""
    import timm
    from safetensors.torch import save_file

    from drift.encoders.embed import encoder_kwargs
    from drift.encoders.vision import VisionEncoder

    params = applied("paper-yearbook", tmp_path)
    torch.manual_seed(0)
    arch = ENCODERS["dinov3-s"].hub_id
    reference = timm.create_model(arch, pretrained=False, num_classes=0).eval()
    save_file(reference.state_dict(), str(tmp_path / "model.safetensors"))
    embed = params.embed.model_copy(update={"weights": {"dinov3-s": str(tmp_path / "model.safetensors")},
                                            "device": "cpu"})
    encoder = VisionEncoder("dinov3-s", **encoder_kwargs("dinov3-s", embed))
    images = np.random.default_rng(0).integers(0, 256, (2, 3, 32, 32), dtype=np.uint8)
    x = torch.nn.functional.interpolate(torch.from_numpy(images).float(), size=(224, 224), mode="bilinear",
                                        align_corners=False)
    with torch.no_grad():
        tokens = reference.forward_features(x)
    theirs = tokens[:, 0].numpy()
    ours = encoder.encode_batch(images)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
    assert np.abs(ours - tokens[:, reference.num_prefix_tokens:].mean(1).numpy()).max() > 1e-3
    assert encoder.fingerprint_fields()["pooling"] == "timm:token" and encoder.fingerprint_fields()["input"] == "raw"


def test_batches_are_a_uniform_shuffle(tmp_path):
    """train.batch_order uniform: each epoch's batches are a DataLoader(shuffle=True)'s over the cutoff's rows,
    torch.randperm from its generator cut in order, the last batch short; token rows are not grouped by length."""
    from torch.utils.data import DataLoader

    from drift.models.inputs import epoch_batches

    params = applied("paper-arxiv", tmp_path)
    assert params.train.batch_order == "uniform"
    rows = np.arange(10, 210)
    lengths = np.random.default_rng(0).integers(1, 128, 300)
    for epoch in (0, 3):
        ours = epoch_batches(rows, lengths, params.train.batch_size, np.random.default_rng(0),
                             params.train.batch_order, seed=5, epoch=epoch)
        loader = DataLoader(rows.tolist(), batch_size=params.train.batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(5 + epoch))
        theirs = [b.numpy() for b in loader]
        assert [b.tolist() for b in ours] == [b.tolist() for b in theirs]
    assert len(ours[-1]) == 200 % 64


def test_pooled_text_vector_is_their_masked_mean(tmp_path):
    """embed.normalize false: MiniLM's pooled vector as the embed stage builds the encoder is their masked mean of
    the bare model's last hidden states (no sentence-transformers Normalize), not the unit vector."""
    from transformers import AutoModel, AutoTokenizer

    from drift.encoders.embed import encoder_kwargs
    from drift.encoders.load import make_encoder

    params = applied("paper-arxiv", tmp_path)
    embed = params.embed.model_copy(update={"device": "cpu", "dtype": "float32"})
    encoder = make_encoder("minilm-l6", **encoder_kwargs("minilm-l6", embed))
    texts = ["Attention is all you need", "A much longer title of a paper about drift, over the years of arXiv"]
    ours = encoder.encode_flat(texts)[0]
    tokenizer = AutoTokenizer.from_pretrained(encoder.path, local_files_only=True)
    model = AutoModel.from_pretrained(encoder.path, local_files_only=True).eval()
    batch = tokenizer(texts, padding="longest", truncation=True, max_length=embed.max_length, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state.float()
    mask = batch["attention_mask"].float()[..., None]
    theirs = ((hidden * mask).sum(1) / mask.sum(1).clamp_min(1.0)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
    assert np.abs(np.linalg.norm(ours, axis=1) - 1).max() > 1e-2  # not normalised
    assert not encoder.normalize and make_encoder("minilm-l6", max_length=16).normalize  # the default: ours


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
    """amazon.keep_empty and keep_duplicates: the preset's ingest keeps what their scope keeps, every line with a
    1-5 rating in the span, an empty text and a repeated review included (the repeat under id "<id>#2"); the
    embedded default quarantines both. Both ingest paths (Arrow and line by line) read the same."""
    import pyarrow.parquet as pq

    from drift.data.ingest import ingest

    params = applied("paper-amazon", tmp_path)
    lines = [{"user_id": "u1", "parent_asin": "a1", "timestamp": 1420070400000 + i, "rating": 1 + i % 5,
              "title": "t", "text": f"review {i}"} for i in range(6)]
    lines.append({**lines[0], "timestamp": 1420070400100, "text": "   "})  # an empty text
    lines.append(dict(lines[2]))                                     # a repeated review
    lines.append(dict(lines[2]))
    lines.append({**lines[1], "timestamp": 1420070400500, "rating": 0})  # out of their 1-5 filter
    source = tmp_path / "raw"
    source.mkdir()
    (source / "All_Beauty.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    kept = {}
    for name, cfg in (("theirs", dataset_cfg(params, "amazon")),
                      ("ours", dataset_cfg(params, "amazon").model_copy(update={"keep_empty": False,
                                                                                "keep_duplicates": False}))):
        cfg = cfg.model_copy(update={"source": str(source), "categories": ["All_Beauty"]})
        counts = ingest("amazon", cfg, tmp_path / f"{name}.parquet", tmp_path / f"{name}.q.parquet", fast=fast)
        kept[name] = pq.read_table(tmp_path / f"{name}.parquet").to_pydict()
        assert counts["kept"] == len(kept[name]["id"])
    assert len(kept["theirs"]["id"]) == 9 and len(set(kept["theirs"]["id"])) == 9
    repeat = "u1:a1:1420070400002"
    assert kept["theirs"]["id"].count(f"{repeat}#2") == 1 and kept["theirs"]["id"].count(f"{repeat}#3") == 1
    assert kept["theirs"]["text"][6] == "   " and kept["theirs"]["text"][:6] == [f"review {i}" for i in range(6)]
    assert kept["ours"]["id"] == kept["theirs"]["id"][:6]


def their_amazon_sample(half_years: list[int], ratings: list[int], n: int, seed: int) -> list[int]:
    """The rows of the authors' Amazon sample as their dataset/amazon_reviews_23/scope.py states it: a row index,
    all rows when n covers them, a plain seeded polars sample when n is under the number of (half_year, rating)
    strata, else the lowest-index row of each stratum plus DataFrame.sample(n - strata, seed) of the others."""
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
    (one stratum with a single row, rows not grouped by stratum); the embedded default's allocation differs."""
    import pyarrow as pa

    from drift.protocol.slicing import build_slices

    params = applied("paper-amazon", tmp_path)
    cfg = dataset_cfg(params, "amazon")
    cfg = type(cfg).model_validate({**cfg.model_dump(), "min_samples": 1,
                                    "slices": {"unit": "half-year", "start": 2014, "end": 2016}})
    rng = np.random.default_rng(3)
    m = 200
    months = rng.integers(0, 48, m)
    ratings = rng.choice([1, 2, 3, 4, 5], m, p=[0.1, 0.05, 0.1, 0.25, 0.5]).astype(float)
    ratings[(months // 6) == 3] = 5.0
    ratings[np.flatnonzero((months // 6) == 3)[0]] = 2.0  # a stratum of one row
    times = [f"{2014 + mo // 12}-{mo % 12 + 1:02d}-15" for mo in months]
    records = pa.table({"id": [f"r{i:03d}" for i in range(m)], "label": ratings.tolist(),
                        "time": pa.array(np.array(times, dtype="datetime64[us]"))})
    in_span = [i for i, mo in enumerate(months) if mo < 24]
    half_years = [28 + int(months[i]) // 6 for i in in_span]
    theirs = {f"r{in_span[i]:03d}" for i in their_amazon_sample(half_years, [int(ratings[i]) for i in in_span],
                                                                   n, cfg.sample.seed)}
    sample = cfg.sample.model_copy(update={"n": n})
    table, _ = build_slices(records, cfg.model_copy(update={"sample": sample}), params.split)
    assert set(table.column("id").to_pylist()) == theirs and len(theirs) == min(n, len(in_span))
    default = cfg.model_copy(update={"sample": sample.model_copy(update={"draw": "proportional"})})
    ours, _ = build_slices(records, default, params.split)
    assert set(ours.column("id").to_pylist()) != theirs


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_cutoff_seeds_are_their_slice_seeds(preset, tmp_path):
    """train.slice_seed hash: f_k's seed is theirs, int.from_bytes(sha256(f"{seed}:{trainer}:{slice}")[:4], "big")
    with their trainer key (the snapshot's name) and the slice's time value (a year, or half-years from 2000),
    for every model of the run but the text probes (their keys add _base); the default offsets by k."""
    import hashlib

    from drift.train.loop import cutoff_seed

    params = applied(preset, tmp_path)
    unit = dataset_cfg(params, PRESETS[preset]).slices.unit
    label, time = ("2014-H2", 29) if unit == "half-year" else ("1931", 1931)
    for model, m in facts(PRESETS[preset])["models"].items():
        if m["frozen_backbone"] and get_model_info(model).input == "pooled" and PRESETS[preset] != "yearbook":
            continue
        key = m["snapshot"].rsplit("/", 1)[1].removesuffix(".json")
        theirs = int.from_bytes(hashlib.sha256(f"3:{key}:{time}".encode()).digest()[:4], "big")
        assert cutoff_seed(3, model, 5, label, params.train.slice_seed) == theirs, model
    assert cutoff_seed(3, "mlp-s", 5, label) == 3 * 100_003 + 5


def test_vision_encoders_pool_as_theirs(tmp_path):
    """The pooling of every Yearbook encoder as the preset builds it (timm's head, embed.image_pooling) is the one
    their model reads out: CLIP's pooler_output (the CLS token after the final LayerNorm: token), SigLIP's
    attention-pooling head (map), torchvision ConvNeXt's avgpool then LayerNorm2d (avg, head norm), DINOv2's
    torch.hub CLS token after the norm (token), DINOv3's pooler_output (token), and their timm backbones with
    num_classes=0 (EVA-02, ResNet-50, ViT-S/16, MAE: timm's own default)."""
    import timm

    from drift.encoders.vision import head_pooling

    params = applied("paper-yearbook", tmp_path)
    theirs = {"clip-b32": "token", "siglip-b": "map", "convnext-s": "avg", "dinov2-s": "token", "dinov3-s": "token",
              "eva02-b": "avg", "resnet50-in": "avg", "vit-s16-in21k": "token", "mae-b": "token"}
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


@pytest.mark.parametrize("name", sorted(THEIR_MLP_HIDDEN))
def test_mlp_is_their_construction(name):
    """Our MLPs on a 3x32x32 portrait have their layout, layer by layer (Linear shapes, biases, ReLU), their exact
    parameter count, and, built after the same torch seed, the same initial weights: their modules' init order is
    ours for these models."""
    from drift.models import InputSpec, create_model

    torch.manual_seed(11)
    ours = create_model(name, InputSpec("pixels", (3, 32, 32)), 2)
    torch.manual_seed(11)
    theirs = their_mlp(THEIR_MLP_HIDDEN[name], 3 * 32 * 32, 2)
    layers = [m for m in ours.modules() if isinstance(m, (nn.Linear, nn.ReLU, nn.BatchNorm1d, nn.LayerNorm,
                                                          nn.Dropout))]
    assert [type(m) for m in layers] == [type(m) for m in theirs]
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    for a, b in zip([p for p in ours.parameters()], theirs.parameters()):
        assert a.shape == b.shape and torch.equal(a, b)


PORTRAIT = ROOT / "tests" / "fixtures" / "yearbook" / "face_1955.png"  # a real portrait (fixtures' PROVENANCE)


def their_area_means(portrait: np.ndarray) -> np.ndarray:
    """[H, W] integers -> float64 [32, 32]: OpenCV's INTER_AREA shrink (their dataset/yearbook/transform.py),
    stated here independently: each input pixel repeated 32 times along both axes, then the exact mean of each
    H x W block (an integer sum over H * W)."""
    h, w = portrait.shape
    fine = np.repeat(np.repeat(portrait.astype(np.int64), 32, axis=0), 32, axis=1)
    return fine.reshape(32, h, 32, w).sum(axis=(1, 3)) / (h * w)


def test_portrait_resize_is_their_area_average():
    """yearbook.resize area on a portrait of the real size (186 x 171, a ratio that is no integer) gives, per pixel,
    the mean of the input area it covers; the default (yearbook.pixels uint8) stores those means rounded (at most
    0.5 off), the same bytes as before the knob."""
    rng = np.random.default_rng(5)
    portrait = rng.integers(0, 256, (186, 171), dtype=np.uint8)
    theirs = their_area_means(portrait)
    ours = yearbook_module.area_resize(np.repeat(portrait[..., None], 3, axis=2))
    assert ours.dtype == np.uint8 and ours.shape == (3, 32, 32) and (ours[0] == ours[2]).all()
    assert np.abs(ours[0] - theirs).max() <= 0.5 + 1e-9
    assert (ours[0] == np.rint(theirs)).all()  # the means, rounded: the same bytes


def test_real_portrait_stores_their_float32_means(tmp_path):
    """yearbook.pixels float32 (their load_downscaled_images_into_df keeps cv2's INTER_AREA output as float32):
    a real portrait read through the reader from a corpus folder is stored as the area means the test computes,
    to float32's last bit on any CPU (one unit in the last place); uint8 stores them rounded, and the two differ
    on most pixels of a real portrait (what the knob changes)."""
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


def test_float_pixels_reach_the_models_and_encoders(tmp_path):
    """Float32 pixels (synth-portraits.pixels float32, the same path as yearbook.pixels) travel unrounded through
    ingest's records, the slice table and the feature file to a model's input (divided by 255, within one unit in
    the last place after PixelScaled multiplies back) and to a frozen encoder's input (raw: the 0-255 floats,
    bilinearly upsampled); uint8 pixels keep their keys."""
    from drift.core.params import SplitParams
    from drift.data.datasets import synth_portraits
    from drift.data.ingest import ingest
    from drift.data.records import payload_key, read_records, table_images
    from drift.models.inputs import open_inputs
    from drift.store.features import build_pixels
    from drift.store.slices import image_dtype, read_slice_table, slice_dataset, write_slice_table

    kept = {}
    for pixels in ("uint8", "float32"):
        cfg = synth_portraits.SynthPortraitsParams(k=2, per_slice=40, pixels=pixels,
                                                   slices={"unit": "year", "start": 2000, "end": 2002})
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
    assert records8.column("key").to_pylist()[0] == __import__("hashlib").sha256(
        repr((3, 32, 32)).encode() + table_images(records8)[0].tobytes()).hexdigest()  # the uint8 key as before
    assert image_dtype(path) == np.float32
    images = table_images(read_slice_table(path))
    assert images.dtype == np.float32 and sorted(map(bytes, images)) == sorted(map(bytes, drawn))
    build_pixels(path, tmp_path / "pixels", "k")
    inputs = open_inputs("pixels", tmp_path / "pixels")
    (x,) = inputs.batch(np.arange(len(images)))
    assert x.dtype == torch.float32 and torch.equal(x, torch.from_numpy(images.copy()) / 255.0)
    back = (x * torch.tensor(255.0)).numpy()  # PixelScaled (train.pixel_scale raw)
    assert (np.abs(back - images) <= np.spacing(images)).all()
    images = images[:8].copy()
    # a frozen encoder's input (VisionEncoder.preprocess, no weights needed): raw reads the floats as they are
    from drift.encoders.vision import VisionEncoder

    encoder = VisionEncoder.__new__(VisionEncoder)
    encoder.device, encoder.image_size, encoder.image_input = "cpu", 64, "raw"
    upsampled = torch.nn.functional.interpolate(torch.from_numpy(images), size=(64, 64), mode="bilinear",
                                                align_corners=False)
    assert torch.equal(encoder.preprocess(images), upsampled)
    encoder.image_input = "normalised"
    encoder._mean, encoder._std = torch.zeros(1, 3, 1, 1), torch.ones(1, 3, 1, 1)
    before = images.copy()
    assert torch.allclose(encoder.preprocess(images), upsampled / 255, atol=1e-6)
    assert np.array_equal(images, before)  # never divided in place


def test_float_pixels_preset_change(tmp_path):
    """The preset with `yearbook.pixels: float32` and no yearbook.pixels deviation line is the authors' run on
    that key (the change the fact table asks of params/paper-yearbook.yaml)."""
    presets = tmp_path / "params"
    presets.mkdir()
    text = (ROOT / "params" / "paper-yearbook.yaml").read_text()
    text = re.sub(r"^# deviation yearbook\.pixels: .*\n", "", text, flags=re.M)
    text = text.replace("  resize: area", "  pixels: float32               # the area means unrounded, as theirs\n  resize: area")
    (presets / "paper-yearbook.yaml").write_text(text)
    found = {k: (a, b) for k, a, b in compare("paper-yearbook", tmp_path, presets) if k == "yearbook.pixels"}
    assert found == {"yearbook.pixels": ("float32", "float32")}


# their CNN presets (architectures.py _cnn_preset: channels, kernel 3, batch norm, ReLU, max-pool after every
# convolution, global average pool, no MLP head) and their ImageCNN's construction (model/blocks/cnn.py)
THEIR_CNN_CHANNELS = {"cnn-s": (32, 64, 128), "cnn-m": (48, 96, 192, 192), "cnn-l": (64, 128, 256, 256, 512)}


class TheirCNN(nn.Module):
    def __init__(self, channels, n_classes):
        super().__init__()
        layers, prev = [], 3
        for width in channels:  # nn.Conv2d's default bias=True, nn.MaxPool2d's default floor
            layers += [nn.Conv2d(prev, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2, 2)]
            prev = width
        self.encoder, self.head = nn.Sequential(*layers), nn.Sequential(nn.Linear(prev, n_classes))

    def forward(self, x):
        return self.head(self.encoder(x).mean(dim=(2, 3)))


@pytest.mark.parametrize("name", sorted(THEIR_CNN_CHANNELS))
def test_cnn_is_their_construction_but_the_conv_bias(name):
    """Our CNNs are theirs on a 3x32x32 portrait but for the convolutions' biases, which the batch norm after
    each removes: their parameter count is ours plus one per channel, and their model holding our weights (biases
    zero) gives our outputs, training and evaluation mode alike. The bias draws change the initial weights that
    follow them (the train.init_order deviation)."""
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

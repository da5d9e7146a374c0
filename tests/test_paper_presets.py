"""The paper presets are the authors' published runs: every fact of params/paper-runs/<dataset>.json (extracted from
their snapshots, learning-mechanisms/drift-happens, CC BY 4.0) checked against the preset applied to params.yaml,
field by field. A fact may differ only where the preset names it on a `# deviation <key>: <why>` line, and the
README's "Reproducing the paper" lists every such line."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import yaml

from drift.core.datasets import DATASETS
from drift.core.encoder_registry import ENCODERS
from drift.core.presets import apply_preset
from drift.data.datasets import dataset_cfg, load
from drift.data.datasets import yearbook as yearbook_module
from drift.models import get_model_info
from drift.protocol.tasks import get_task
from drift.train.loop import learning_rate, make_optimizer
from conftest import SHIPPED_PARAMS

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
    apply_preset(preset, params_path=params_path, presets=presets, check=load)
    return load(yaml.safe_load(params_path.read_text()))


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
    if dataset == "arxiv":
        check("arxiv.text", common["text_col"], "title_abstract")
        check("arxiv.separator", code["separator"], cfg.separator)
        check("arxiv.inclusion", code["inclusion"], cfg.inclusion)
        check("arxiv.time_field", code["time"], cfg.time_field)
    if dataset == "yearbook":
        check("yearbook.image_size", common["image_size"], [yearbook_module.SIZE] * 2)
        check("yearbook.resize", code["resize"], cfg.resize)
    # sample and split
    if "sample_size" in common:
        check(f"{dataset}.sample.n", common["sample_size"], cfg.sample.n)
        check(f"{dataset}.sample.seed", common["sample_seed"],
              params.split.seed if cfg.sample.seed is None else cfg.sample.seed)
    check("split.seed", common["split_seed"], params.split.seed)
    check("split.test_fraction", common["test_size"], params.split.test_fraction)
    strata = ["slice" if s in ("year", "half_year") else "label" for s in common["split_stratify_by"]]
    check("split.stratify", strata, params.split.stratify)
    # the task and its metric
    check("task.metric", METRICS[common["metric"]], get_task(task).metric)
    # training
    check("train.seeds", common["seeds"], train.seeds)
    check("train.epochs", common["epochs"], train.epochs)
    check("train.batch_size", common["batch_size"], train.batch_size)
    optimizer = make_optimizer(nn.Linear(2, 1), modality, train)
    name = {torch.optim.AdamW: "adamw", torch.optim.Adam: "adam"}[type(optimizer)]
    check("train.optimizer", common.get("optimizer", code.get("optimizer")), name)
    check("train.weight_decay", common.get("weight_decay", code.get("weight_decay")),
          optimizer.defaults["weight_decay"])
    check("train.grad_clip", common.get("gradient_clip_norm"), train.grad_clip)
    if task == "regression":
        check("train.loss", [common["loss"], common["rating_weighting"]], ["weighted_mse", "inverse_frequency"])
    # their code standardises neither targets nor pixels
    if task == "regression":
        check("train.standardise_targets", False, train.standardise_targets)
    if modality == "image":
        check("train.standardise_pixels", False, train.standardise_pixels)
    # the models, each with its learning rate, its input and its encoder
    models = f["models"]
    check("train.models", sorted(models), sorted(train.models[dataset]))
    for model, m in models.items():
        info = get_model_info(model)
        check(f"train.lr.{model}", m["learning_rate"], learning_rate(train.lr, info.family))
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
            check("embed.max_length", common["max_length"], embed.max_length)
        else:
            # theirs as the timm weights they equal, else as their code names them (then ours differ)
            check(f"embed.encoders.{encoder}", SAME_WEIGHTS.get(model, code["encoder_weights"][model]), spec.hub_id)
            check(f"embed.pooling.{encoder}", "producer_default", "producer_default" if spec.pooling == "timm"
                  else spec.pooling)
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
                     "encoder_weights", "loss", "sample_strata", "ratings", "source", "source_url", "encoder_input"}
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

"""The paper presets (params/paper-*.yaml) applied to a copy of params.yaml: the full cohorts of the paper's
tables, their seeds and model-seed runs (Table 1), the frozen encoders the probes need, one learning rate per
task."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from drift.core.encoder_registry import get_encoder_spec
from drift.core.params import SliceSpec, load_params
from drift.core.presets import apply_preset
from drift.models import get_model_info
from drift.run.checks import validate
from tests.helpers import SHIPPED_PARAMS

ROOT = Path(__file__).resolve().parents[2]

# preset -> (dataset, trained heads, probes, seeds, model-seed runs): Tables 3-4, 11-12, 19-20 and Table 1
PAPER = {
    "paper-yearbook": ("yearbook", 12, 9, [0, 1, 2, 3, 4], 105),
    "paper-amazon": ("amazon", 12, 7, [0, 1, 2], 57),
    "paper-arxiv": ("arxiv", 12, 8, [0, 1, 2], 60),
}
PROBES = {  # the frozen encoders of Tables 4, 12 and 20
    "paper-yearbook": {
        "dinov3-s",
        "vit-s16-in21k",
        "dinov2-s",
        "resnet50-in",
        "convnext-s",
        "eva02-b",
        "mae-b",
        "clip-b32",
        "siglip-b",
    },
    "paper-amazon": {"distilbert", "electra", "bert", "mpnet", "roberta", "modernbert", "deberta-v3"},
    "paper-arxiv": {
        "minilm-l6",
        "distilbert",
        "electra",
        "bert",
        "mpnet",
        "roberta",
        "modernbert",
        "deberta-v3",
    },
}


def applied(name: str, tmp_path: Path) -> dict:
    params_path = tmp_path / "params.yaml"
    shutil.copy(SHIPPED_PARAMS, params_path)
    apply_preset(name, params_path=params_path, presets=ROOT / "params")
    return yaml.safe_load(params_path.read_text())


def test_every_preset_is_tested():
    assert {p.stem for p in (ROOT / "params").glob("*.yaml")} == set(PAPER)


@pytest.mark.parametrize("preset", PAPER)
def test_preset_runs_the_papers_cohort(preset, tmp_path):
    dataset, n_heads, n_probes, seeds, runs = PAPER[preset]
    params = applied(preset, tmp_path)
    assert list(params["datasets"]) == [dataset]
    models = params["train"]["models"][dataset]
    infos = [get_model_info(m) for m in models]
    assert len(set(i.name for i in infos)) == len(models) == n_heads + n_probes
    assert sum(i.family != "Frozen" for i in infos) == n_heads
    probes = [i for i in infos if i.input == "pooled"]
    assert len(probes) == n_probes and all(i.family == "Frozen" for i in probes)
    assert params["train"]["seeds"] == seeds
    assert len(models) * len(params["train"]["seeds"]) == runs

    # every probe's encoder is computed by the embed stage, and they are the paper's
    encoders = params["embed"]["encoders"]
    assert {i.name.removeprefix("probe-") for i in probes} == set(encoders) == PROBES[preset]
    validate(load_params(params), dataset)


@pytest.mark.parametrize("preset", PAPER)
def test_learning_rates_of_the_published_runs(preset, tmp_path):
    """One rate for every text model; on Yearbook one for the models trained from scratch and one for the
    probes, as the authors' runs (tests/run/test_paper_presets.py checks each model's against their
    snapshots)."""
    params = applied(preset, tmp_path)
    if preset == "paper-yearbook":
        assert params["train"]["lr"] == {"default": 0.0005, "frozen": 0.0001}
    else:
        assert isinstance(params["train"]["lr"], float)
    assert "{default:" in (ROOT / "params" / f"{preset}.yaml").read_text()


@pytest.mark.compute
@pytest.mark.parametrize("preset", ["paper-amazon", "paper-arxiv"])
def test_text_presets_read_roberta_token_states(preset, tmp_path):
    """Section 3.2.2: every text head operates on cached RoBERTa token embeddings."""
    params = applied(preset, tmp_path)
    assert params["embed"]["text_encoder"] == "roberta"
    assert get_encoder_spec("roberta").dim == 768
    assert params["embed"]["pooling"] == "mean"  # the probes' pooled vectors (params.yaml default)


@pytest.mark.compute
def test_yearbook_saliency_grid_is_figure_3(tmp_path):
    """Figure 3: CNN-L, ResNet-S, MLP-L trained through 1950 and 1970, each shown on 1960, 1980, 2000."""
    from drift.protocol.slicing import slice_edges

    params = applied("paper-yearbook", tmp_path)
    grid = params["report"]["saliency"]["yearbook"]
    assert grid["models"] == ["cnn-l", "resnet-s", "mlp-l"]
    assert [tuple(c) for c in grid["cells"]] == [
        (c, e) for c in ("1950", "1970") for e in ("1960", "1980", "2000")
    ]
    assert set(grid["models"]) <= set(params["train"]["models"]["yearbook"])
    _, labels = slice_edges(SliceSpec(**params["yearbook"]["slices"]))
    assert {label for cell in grid["cells"] for label in cell} <= set(labels)

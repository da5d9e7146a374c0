"""`drift rehearse`: each paper preset through every stage on its fixture sample with stand-in encoders (the tiny
profile here; `make test-slow` runs the default one), and planted faults that fail in one line."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import torch
from conftest import ROOT, SHIPPED_PARAMS, drift_cli, only, repro_in_process, tiny_params
from torch import nn

from drift.core.encoder_registry import ENCODERS, EncoderSpec
from drift.core.errors import DriftError
from drift.models import _BUILD, MODELS, ModelInfo
from drift.run.rehearse import PROFILES, rehearse
from drift.train.rates import engine_choice, measured_engines, rates_path, read_rates, write_rates

PRESETS = ("paper-yearbook", "paper-amazon", "paper-arxiv")


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Rates go to a private drift cache dir, never the user's."""
    monkeypatch.setenv("DRIFT_CACHE_DIR", str(tmp_path / "drift-cache"))


def _status():
    """The project's run outputs and params as git sees them (ignored files included)."""
    return subprocess.run(["git", "status", "--porcelain", "--ignored", "--", "params.yaml", "dvc.lock", "data",
                           "metrics", "plots", "tables", "reports"], cwd=ROOT, capture_output=True, text=True, check=False).stdout


@pytest.mark.parametrize("preset", PRESETS)
def test_tiny_rehearsal_of_each_preset(preset, tmp_path):
    before = _status()
    out = rehearse(preset, profile="tiny", workspace=tmp_path / "ws")
    failed = [s for s in out["stages"] if s["status"] != "passed"]
    assert out["ok"] and not failed, failed
    assert not (tmp_path / "ws").exists() and _status() == before  # nothing left, the project untouched
    (name, d), = out["datasets"].items()
    # every model of the (shrunk) roster trained at every kept cutoff of the one seed left
    shrunk = " ".join(out["shrunk"])
    assert "train.seeds" in shrunk and "train.epochs 10 -> 1" in shrunk
    assert f"{name} cutoffs trained" in shrunk or len(d["cutoffs"]) <= PROFILES["tiny"].cutoffs
    families = d["families"]
    assert 1 <= len(d["cutoffs"]) <= PROFILES["tiny"].cutoffs
    assert d["trainings"] == len(d["models"]) * len(d["cutoffs"]) and len(d["models"]) >= 10
    assert d["cells"] > 0 and d["rows"] > 0
    for enc, standin in out["standins"].items():  # the preset's widths
        assert standin["width"] == ENCODERS[enc].dim
    assert all(e["rows_per_s"] > 0 for e in d["encoders"].values())
    assert all(f["train_rows_per_s"] > 0 for f in families.values())
    stored = read_rates("cpu")[name]
    assert stored["preset"] == preset and stored["profile"] == "tiny" and stored["engines"]
    if name != "yearbook":  # text: token states at the preset's width, tokens per second measured
        assert out["standins"]["roberta"]["width"] == 768
        assert all(e["tokens_per_s"] > 0 for e in d["encoders"].values())


def _failed(out: dict) -> dict:
    assert not out["ok"]
    failed = [s for s in out["stages"] if s["status"] == "failed"]
    assert len(failed) == 1 and "\n" not in failed[0]["error"]
    later = out["stages"][out["stages"].index(failed[0]) + 1:]
    assert all(s["status"] == "skipped" for s in later)
    return failed[0]


class ShortPositions(nn.Module):
    """A head with a learned position table of 64: it fails on longer token rows."""

    def __init__(self, spec, n_outputs):
        super().__init__()
        self.positions = nn.Embedding(64, spec.shape[0])
        self.out = nn.Linear(spec.shape[0], n_outputs)

    def forward(self, x, mask):
        x = x + self.positions(torch.arange(x.shape[1]))
        return self.out(x.mean(1))


def test_a_head_that_fails_at_the_presets_max_length(monkeypatch):
    # registered as a head of drift.models.text_heads: a model's cache key covers the registry module defining it
    monkeypatch.setattr(ShortPositions, "__module__", "drift.models.text_heads")
    monkeypatch.setitem(MODELS, "tx-short", ModelInfo("tx-short", "Transformer", "S", "tokens", "TX-Short"))
    monkeypatch.setitem(_BUILD, "tx-short", (ShortPositions, {}))
    out = rehearse("paper-amazon", ["train.models.amazon=[tx-short]", "embed.encoders=[]"], profile="tiny",
                   record=False)
    failed = _failed(out)
    assert failed["stage"] == "train@amazon" and "index out of range" in failed["error"]
    assert failed["rerun"].endswith("dvc repro -s train@amazon")


def test_an_encoder_the_stand_in_cannot_build(monkeypatch):
    monkeypatch.setitem(ENCODERS, "xlnet", EncoderSpec("xlnet", "XLNet", "text", "hf", "xlnet-base-cased", 768, "mean"))
    out = rehearse("paper-amazon", ["embed.encoders=[xlnet]", "train.models.amazon=[ffn-s]"], profile="tiny",
                   record=False)
    failed = _failed(out)
    assert failed["stage"] == "embed@amazon"
    assert failed["error"].startswith("no stand-in configuration for text encoder xlnet")


def test_a_bad_slice_span_fails_before_any_compute():
    result = drift_cli("rehearse", "paper-yearbook", "--tiny", "-S", "yearbook.slices.start=2020")
    assert result.returncode != 0
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert any("slices" in line and "2020" in line for line in lines), lines


def test_overrides_are_checked():
    with pytest.raises(DriftError, match="unknown parameter train.epoch"):
        rehearse("paper-amazon", ["train.epoch=3"], profile="tiny")
    with pytest.raises(DriftError, match="give key=value"):
        rehearse("paper-amazon", ["train.epochs"], profile="tiny")


def test_engine_auto_is_a_function_of_family_and_device_not_of_the_rates_file():
    before = {(f, d): engine_choice(f, d)[0] for f in ("FFN", "Recurrent", "Frozen", "CNN") for d in ("cpu", "cuda")}
    assert before[("Frozen", "cpu")] == "batched" and before[("FFN", "cpu")] == "solo"
    assert before[("FFN", "cuda")] == "batched" and before[("Recurrent", "cuda")] == "solo"
    write_rates("cpu", "amazon", {"engines": {"FFN": {"solo": 100.0, "batched": 250.0},
                                              "Frozen": {"solo": 90.0, "batched": 40.0}}})
    assert {(f, d): engine_choice(f, d)[0] for f, d in before} == before
    assert measured_engines("amazon", "FFN") == {"solo": 100.0, "batched": 250.0}  # shown, never chosen from
    assert measured_engines("amazon", "FFN", device="cuda") is None  # measured on the CPU only
    assert json.loads(rates_path().read_text())  # one file in the drift cache dir


def test_the_same_params_train_the_same_checkpoint_keys_under_two_rates_files(project, tmp_path, monkeypatch):
    params = only(tiny_params(), "sotu")
    params["train"].update(engine="auto", seeds=[0])
    repo = project(params)
    keys = []
    for faster in ("solo", "batched"):
        monkeypatch.setenv("DRIFT_CACHE_DIR", str(tmp_path / f"rates-{faster}"))
        other = "batched" if faster == "solo" else "solo"
        write_rates("cpu", "sotu", {"engines": {f: {faster: 500.0, other: 1.0} for f in ("FFN", "Frozen")}})
        shutil.rmtree(tmp_path / "cache", ignore_errors=True)
        repro_in_process(repo, "sotu", stages=("ingest", "slice", "embed", "train"))
        keys.append(json.loads((repo / "data/models/sotu/checkpoints.json").read_text()))
        metrics = json.loads((repo / ".drift/runs/train/sotu.json").read_text())
        assert {m: metrics["engines"][m] for m in ("ffn-s", "probe-minilm")} == {"ffn-s": "solo",
                                                                                  "probe-minilm": "batched"}
    assert keys[0] == keys[1] and keys[0]


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
def test_default_rehearsal_of_each_preset(preset):
    out = rehearse(preset)  # the default profile: full-depth stand-ins, every encoder, 3 cutoffs, 2 epochs
    assert out["ok"], [s for s in out["stages"] if s["status"] == "failed"]
    assert out["seconds"] < 900
    assert all(s.get("layers") != 1 for s in out["standins"].values())


def test_plan_projects_from_rehearsed_rates(tmp_path):
    from drift.run.plan import plan

    families = {f: {"train_rows_per_s": 100.0, "eval_rows_per_s": 1000.0}
                for f in ("FFN", "TextCNN", "Recurrent", "Transformer", "Frozen")}
    encoders = {e: {"rows_per_s": 10.0, "full_depth": True}
                for e in ("roberta", "distilbert", "electra", "bert", "mpnet", "modernbert", "deberta-v3")}
    write_rates("cpu", "amazon", {"families": families, "encoders": encoders, "preset": "paper-amazon",
                                  "profile": "default", "measured_at": "now",
                                  "engines": {"FFN": {"solo": 100.0, "batched": 300.0}}})
    out = plan("paper-amazon", SHIPPED_PARAMS, ROOT / "params", manifest_dir=tmp_path,
               cache_path=tmp_path / "bench.json", seconds=0.1)
    rates = out["benchmark"]["rates"]["amazon"]
    assert all(r["source"].startswith("rehearsal (paper-amazon, default profile") for r in rates.values())
    assert rates["ffn-s"]["train_rows_per_s"] == 100.0  # train.engine solo: the solo rate as measured
    d = out["datasets"]["amazon"]
    ffn = d["models"]["ffn-m"]
    assert abs(ffn["train_hours_here"] - ffn["row_passes"] / 100.0 / 3600) < 1e-9
    assert abs(d["projected_embed_hours"]["here"] - 7 * d["rows"] / 10.0 / 3600) < 1e-6
    auto = plan("paper-amazon", SHIPPED_PARAMS, ROOT / "params", manifest_dir=tmp_path,
                cache_path=tmp_path / "bench.json", seconds=0.1, rates_device="cpu")
    assert auto["benchmark"]["rates"]["amazon"]["ffn-s"]["train_rows_per_s"] == 100.0

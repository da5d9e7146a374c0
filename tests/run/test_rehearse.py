"""`drift rehearse`: planted faults that fail in one line, --data and the shipped samples winning over the
files params.yaml names, the rates it stores (each preset's tiny rehearsal runs from a wheel:
tests/pipeline/test_rehearse_wheel.py; `make test-slow` runs the default profile here)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import yaml

from drift.core.errors import DriftError
from drift.core.params import load_params
from drift.data.datasets import dataset_cfg
from drift.run.rehearse import PROFILES, rehearsal_params, rehearse
from drift.train.rates import engine_choice, measured_engines, rates_path, write_rates
from tests.helpers import ROOT, SHIPPED_PARAMS, drift_cli, only, repro_in_process, tiny_params

PRESETS = ("paper-yearbook", "paper-amazon", "paper-arxiv")


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Rates go to a private drift cache dir, never the user's."""
    monkeypatch.setenv("DRIFT_CACHE_DIR", str(tmp_path / "drift-cache"))


# the tiny rehearsal of each preset runs from an installed wheel: tests/pipeline/test_rehearse_wheel.py


def _failed(out: dict) -> dict:
    assert not out["ok"]
    failed = [s for s in out["stages"] if s["status"] == "failed"]
    assert len(failed) == 1 and "\n" not in failed[0]["error"]
    later = out["stages"][out["stages"].index(failed[0]) + 1 :]
    assert all(s["status"] == "skipped" for s in later)
    return failed[0]


def patched_checkout(tmp_path, appended: dict[str, str]):
    """A copy of the checkout's package, stage scripts and params with `appended` {file: code} added at the
    end of those files: the code a rehearsal copies into its workspace, and so the code its stages run."""
    copy = tmp_path / "checkout"
    ignore = shutil.ignore_patterns("__pycache__")
    for name in ("drift", "stages", "params"):
        shutil.copytree(ROOT / name, copy / name, ignore=ignore)
    shutil.copy(ROOT / "params.yaml", copy / "params.yaml")
    for name, code in appended.items():
        with open(copy / name, "a") as f:
            f.write("\n" + textwrap.dedent(code))
    return copy


def rehearse_with(checkout, tmp_path, preset: str, overrides: list[str]) -> dict:
    """A tiny rehearsal run by the package in `checkout` (its own process, outside the checkout)."""
    code = (
        "import json, sys; from drift.run.rehearse import rehearse; "
        "print(json.dumps(rehearse(sys.argv[1], sys.argv[2:], profile='tiny', record=False)))"
    )
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, "-c", code, preset, *overrides],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


SHORT_POSITIONS = {  # a head with a learned position table of 64: it fails on longer token rows
    "drift/models/text_heads.py": """
        class ShortPositions(nn.Module):
            def __init__(self, spec, n_outputs):
                super().__init__()
                self.positions = nn.Embedding(64, spec.shape[0])
                self.out = nn.Linear(spec.shape[0], n_outputs)

            def forward(self, x, mask):
                x = x + self.positions(torch.arange(x.shape[1]))
                return self.out(x.mean(1))


        FAMILIES["short"] = ShortPositions
        """,
    "drift/core/model_registry.py": """
        FAMILIES["short"] = Family("Short", "tokens", False, {})
        MODELS["tx-short"] = head_info("tx-short", {"family": "short"}, "TX-Short", "S")
        """,
}


@pytest.mark.compute
@pytest.mark.pipeline
def test_a_head_that_fails_at_the_presets_max_length(tmp_path):
    checkout = patched_checkout(tmp_path, SHORT_POSITIONS)
    out = rehearse_with(
        checkout, tmp_path, "paper-amazon", ["train.models.amazon=[tx-short]", "embed.encoders=[]"]
    )
    failed = _failed(out)
    assert failed["stage"] == "train@amazon" and "index out of range" in failed["error"]
    assert failed["rerun"].endswith("dvc repro -s train@amazon")
    assert [s["status"] for s in out["stages"][:4]] == ["passed"] * 4  # check, ingest, slice, embed


@pytest.mark.compute
@pytest.mark.pipeline
def test_an_encoder_the_stand_in_cannot_build(tmp_path):
    checkout = patched_checkout(
        tmp_path,
        {
            "drift/core/encoder_registry.py": """
        ENCODERS["xlnet"] = EncoderSpec("xlnet", "XLNet", "text", "hf", "xlnet-base-cased", 768, "mean")
        """
        },
    )
    out = rehearse_with(
        checkout, tmp_path, "paper-amazon", ["embed.encoders=[xlnet]", "train.models.amazon=[ffn-s]"]
    )
    failed = _failed(out)
    assert failed["stage"] == "embed@amazon"
    assert failed["error"].startswith("no stand-in configuration for text encoder xlnet")


def _params_naming_elsewhere(tmp_path):
    """params.yaml whose datasets.amazon.input names a folder that is not there (the user's corpus, on another
    disk)."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["datasets"]["amazon"] = {"input": str(tmp_path / "elsewhere" / "amazon")}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def test_the_sample_wins_over_the_files_params_yaml_names(tmp_path):
    elsewhere = f"datasets.amazon.input={tmp_path / 'elsewhere' / 'amazon'}"  # an override names it too
    params, _ = rehearsal_params(
        "paper-amazon", [elsewhere], PROFILES["tiny"], False, _params_naming_elsewhere(tmp_path)
    )
    typed = load_params(params)
    assert dataset_cfg(typed, "amazon").source == typed.datasets["amazon"].input == "data/raw/amazon"


@pytest.mark.compute
def test_data_wins_over_the_files_params_yaml_names(tmp_path):
    sample = tmp_path / "my-sample"
    sample.mkdir()
    for category in ("All_Beauty", "Software"):
        shutil.copy(ROOT / "tests/fixtures/amazon2023" / f"{category}.jsonl", sample)
    out = rehearse(
        "paper-amazon",
        ["amazon.categories=[All_Beauty,Software]", "train.models.amazon=[ffn-s]", "embed.encoders=[]"],
        data=sample,
        profile="tiny",
        record=False,
        params_path=_params_naming_elsewhere(tmp_path),
    )
    assert out["ok"], [s for s in out["stages"] if s["status"] == "failed"]
    assert out["samples"]["amazon"] == f"--data {sample}"
    assert out["datasets"]["amazon"]["rows"] > 0 and out["datasets"]["amazon"]["cells"] > 0


def test_a_bad_slice_span_fails_before_any_compute():
    result = drift_cli("rehearse", "paper-yearbook", "--tiny", "-S", "yearbook.slices.start=2020")
    assert result.returncode != 0
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert any("slices" in line and "2020" in line for line in lines), lines


@pytest.mark.compute
def test_overrides_are_checked():
    with pytest.raises(DriftError, match="unknown parameter train.epoch"):
        rehearse("paper-amazon", ["train.epoch=3"], profile="tiny")
    with pytest.raises(DriftError, match="give key=value"):
        rehearse("paper-amazon", ["train.epochs"], profile="tiny")


def test_engine_auto_is_a_function_of_family_and_device_not_of_the_rates_file():
    before = {
        (f, d): engine_choice(f, d)[0] for f in ("FFN", "Recurrent", "Frozen", "CNN") for d in ("cpu", "cuda")
    }
    assert before[("Frozen", "cpu")] == "batched" and before[("FFN", "cpu")] == "solo"
    assert before[("FFN", "cuda")] == "batched" and before[("Recurrent", "cuda")] == "solo"
    write_rates(
        "cpu",
        "amazon",
        {"engines": {"FFN": {"solo": 100.0, "batched": 250.0}, "Frozen": {"solo": 90.0, "batched": 40.0}}},
    )
    assert {(f, d): engine_choice(f, d)[0] for f, d in before} == before
    assert measured_engines("amazon", "FFN") == {"solo": 100.0, "batched": 250.0}  # shown, never chosen from
    assert measured_engines("amazon", "FFN", device="cuda") is None  # measured on the CPU only
    assert json.loads(rates_path().read_text())  # one file in the drift cache dir


@pytest.mark.compute
@pytest.mark.pipeline
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
        assert {m: metrics["engines"][m] for m in ("ffn-s", "probe-minilm")} == {
            "ffn-s": "solo",
            "probe-minilm": "batched",
        }
    assert keys[0] == keys[1] and keys[0]


@pytest.mark.compute
@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
def test_default_rehearsal_of_each_preset(preset):
    out = rehearse(preset)  # the default profile: full-depth stand-ins, every encoder, 3 cutoffs, 2 epochs
    assert out["ok"], [s for s in out["stages"] if s["status"] == "failed"]
    assert out["seconds"] < 900
    assert all(s.get("layers") != 1 for s in out["standins"].values())


def test_plan_projects_from_rehearsed_rates(tmp_path):
    from drift.run.plan import plan

    families = {
        f: {"train_rows_per_s": 100.0, "eval_rows_per_s": 1000.0}
        for f in ("FFN", "TextCNN", "Recurrent", "Transformer", "Frozen")
    }
    encoders = {
        e: {"rows_per_s": 10.0, "full_depth": True}
        for e in ("roberta", "distilbert", "electra", "bert", "mpnet", "modernbert", "deberta-v3")
    }
    write_rates(
        "cpu",
        "amazon",
        {
            "families": families,
            "encoders": encoders,
            "preset": "paper-amazon",
            "profile": "default",
            "measured_at": "now",
            "engines": {"FFN": {"solo": 100.0, "batched": 300.0}},
        },
    )
    out = plan(
        "paper-amazon",
        SHIPPED_PARAMS,
        ROOT / "params",
        manifest_dir=tmp_path,
        cache_path=tmp_path / "bench.json",
        seconds=0.1,
    )
    rates = out["benchmark"]["rates"]["amazon"]
    assert all(r["source"].startswith("rehearsal (paper-amazon, default profile") for r in rates.values())
    assert rates["ffn-s"]["train_rows_per_s"] == 100.0  # train.engine solo: the solo rate as measured
    d = out["datasets"]["amazon"]
    ffn = d["models"]["ffn-m"]
    assert abs(ffn["train_hours_here"] - ffn["row_passes"] / 100.0 / 3600) < 1e-9
    assert abs(d["projected_embed_hours"]["here"] - 7 * d["rows"] / 10.0 / 3600) < 1e-6
    auto = plan(
        "paper-amazon",
        SHIPPED_PARAMS,
        ROOT / "params",
        manifest_dir=tmp_path,
        cache_path=tmp_path / "bench.json",
        seconds=0.1,
        rates_device="cpu",
    )
    assert auto["benchmark"]["rates"]["amazon"]["ffn-s"]["train_rows_per_s"] == 100.0

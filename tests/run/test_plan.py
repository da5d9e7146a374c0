"""drift plan: counts against hand computations, the paper's Table 1 runs, the benchmark cache, --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

import drift.run.plan as plan_module
from drift.cli import app
from drift.cli.plan_commands import plan_tables
from drift.core.errors import DriftError
from drift.run.plan import plan
from tests.helpers import SHIPPED_PARAMS

ROOT = Path(__file__).resolve().parents[2]
PRESETS = ROOT / "params"


def write_params(tmp_path: Path, **changes) -> Path:
    """params.yaml of the repository with sections replaced (a shallow update per top-level key)."""
    params = yaml.safe_load((SHIPPED_PARAMS).read_text())
    for key, value in changes.items():
        params[key] = (
            {**params[key], **value} if isinstance(params.get(key), dict) and key != "datasets" else value
        )
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def small_testbed(tmp_path: Path) -> Path:
    """3 slices of 80 portraits, 2 seeds, 2 epochs, 2 models + 2 references, one vision encoder."""
    return write_params(
        tmp_path,
        datasets={"synth-portraits": {"input": "requirements.lock"}},
        **{
            "synth-portraits": {
                "k": 3,
                "per_slice": 80,
                "min_samples": 10,
                "slices": {"unit": "year", "start": 2000, "end": 2003},
            }
        },
        split={"seed": 0, "test_fraction": 0.3},
        embed={"encoders": ["dinov2-s"]},
        train={
            "seeds": [0, 1],
            "epochs": 2,
            "models": {"synth-portraits": ["mlp-s", "cnn-s"]},
            "baselines": ["baseline-prior", "baseline-linear"],
        },
    )


def test_counts_of_a_small_testbed_by_hand(tmp_path):
    out = plan(
        params_path=small_testbed(tmp_path), presets=PRESETS, manifest_dir=tmp_path / "none", bench=False
    )
    d = out["datasets"]["synth-portraits"]
    # each slice: 80 rows, 24 test (80 * 0.3), 56 train; cutoffs 0, 1, 2 train on 56, 112, 168 rows
    assert d["slices"]["source"] == "params" and d["rows"] == 240
    assert d["model_seed_runs"] == 2 * 2  # 2 models x 2 seeds
    assert d["trainings"] == 2 * 2 * 3  # x 3 cutoffs
    assert d["reference_fits"] == 2 * 3  # once per cutoff, seed-independent
    assert d["row_passes"] == 2 * 2 * 2 * (56 + 112 + 168)  # models x seeds x epochs x rows per cutoff
    assert d["encoder_passes"] == 240 * 1  # dinov2-s once per row
    assert d["checkpoints"] == 4 * 2 * 3  # (models + references) x seeds x cutoffs
    assert d["cells"] == 4 * 2 * 3 * 3
    # scored rows per checkpoint: f_0: 24 + 80 + 80, f_1: 24 + 24 + 80, f_2: 24 * 3
    assert d["eval_rows"] == 4 * 2 * (184 + 128 + 72)
    assert out["trainings"] == d["trainings"] and out["projected_hours"] == {}


@pytest.mark.compute
def test_counts_from_a_slice_manifest_by_hand(tmp_path):
    """Uneven slices, one too small to train or score, one empty: the manifest's numbers, not an even spread."""
    params_path = write_params(
        tmp_path,
        datasets={"sotu": {"input": "requirements.lock"}},
        sotu={"min_samples": 10, "slices": {"unit": "decade", "start": 1960, "end": 2000}},
        embed={"text_encoder": "minilm-l6", "encoders": ["minilm-l6", "bert"]},
        train={"seeds": [0], "epochs": 3, "models": {"sotu": ["ffn-s"]}, "baselines": ["baseline-prior"]},
    )
    manifests = tmp_path / "slices"
    manifests.mkdir()
    slices = [
        {"index": 0, "label": "1960s", "rows": 20, "train": 14, "test": 6, "trainable": True, "usable": True},
        {"index": 1, "label": "1970s", "rows": 5, "train": 4, "test": 1, "trainable": False, "usable": False},
        {"index": 2, "label": "1990s", "rows": 30, "train": 21, "test": 9, "trainable": True, "usable": True},
    ]
    manifest = {
        "dataset": "sotu",
        "task": "binary",
        "modality": "text",
        "label_names": ["dem", "rep"],
        "min_samples": 10,
        "slices": [{**s, "start": "", "end": ""} for s in slices],
    }
    (manifests / "sotu.json").write_text(json.dumps(manifest))
    d = plan(params_path=params_path, presets=PRESETS, manifest_dir=manifests, bench=False)["datasets"][
        "sotu"
    ]
    assert d["slices"] | {"note": None} == {
        "edges": 4,
        "non_empty": 3,
        "trainable": 2,
        "usable": 2,
        "source": "manifest",
        "note": None,
    }
    assert d["trainings"] == 2 and d["reference_fits"] == 2
    # cutoff 0 trains on 14 rows, cutoff 2 on 14 + 4 + 21 = 39 (the small slice's rows still count), 3 epochs
    assert d["row_passes"] == 3 * (14 + 39)
    assert d["encoder_passes"] == 55 * 2  # minilm-l6 once (text encoder and probe), bert
    assert d["cells"] == 2 * 2 * 2  # 2 models x 2 cutoffs x 2 usable slices
    assert d["eval_rows"] == 2 * ((6 + 30) + (6 + 9))  # f_0: test of 1960s, all of 1990s; f_2: tests

    # a manifest made under another min_samples is stale: the params' cap per slice is used, and said
    (manifests / "sotu.json").write_text(json.dumps({**manifest, "min_samples": 40}))
    d = plan(params_path=params_path, presets=PRESETS, manifest_dir=manifests, bench=False)["datasets"][
        "sotu"
    ]
    assert d["slices"]["source"] == "params" and d["rows"] == 100 * 4


@pytest.mark.parametrize(
    "preset, runs, cutoffs", [("paper-yearbook", 105, 104), ("paper-amazon", 57, 20), ("paper-arxiv", 60, 26)]
)
def test_presets_give_table_1(preset, runs, cutoffs, tmp_path):
    out = plan(preset, params_path=SHIPPED_PARAMS, presets=PRESETS, manifest_dir=tmp_path, bench=False)
    ((name, d),) = out["datasets"].items()
    assert out["model_seed_runs"] == runs == d["paper"]["model_seed_runs"]
    assert d["slices"]["trainable"] == cutoffs and d["trainings"] == runs * cutoffs


def test_unknown_preset_lists_the_valid_ones():
    with pytest.raises(DriftError) as error:
        plan("paper-yerbook", params_path=SHIPPED_PARAMS, presets=PRESETS, bench=False)
    message = str(error.value)
    assert "\n" not in message and "paper-yearbook" in message and "paper-arxiv" in message


def tiny_bench(tmp_path: Path) -> Path:
    return write_params(
        tmp_path,
        datasets={"synth-portraits": {"input": "requirements.lock"}},
        train={"seeds": [0], "epochs": 1, "models": {"synth-portraits": ["mlp-s", "mlp-m"]}},
    )


def test_second_plan_reads_the_cache(tmp_path, monkeypatch):
    params_path, cache = tiny_bench(tmp_path), tmp_path / "cache" / "bench.json"
    first = plan(params_path=params_path, presets=PRESETS, cache_path=cache, seconds=0.05)
    # the CPU's matmul rate and mlp-s (for mlp-m too)
    assert first["benchmark"]["measured_now"] == 2

    def not_again(*args, **kwargs):
        raise AssertionError("the benchmark ran again")

    monkeypatch.setattr(plan_module, "measure_model", not_again)
    monkeypatch.setattr(plan_module, "measure_matmul", not_again)
    second = plan(params_path=params_path, presets=PRESETS, cache_path=cache, seconds=0.05)
    assert second["benchmark"]["measured_now"] == 0
    assert second["projected_hours"] == first["projected_hours"] and second["projected_hours"]["here"] > 0


def test_device_rate_divides_the_hours_here(tmp_path):
    out = plan(
        params_path=tiny_bench(tmp_path),
        presets=PRESETS,
        cache_path=tmp_path / "bench.json",
        device_rates={"mygpu": 40.0},
        seconds=0.05,
    )
    hours = out["projected_hours"]
    assert hours["mygpu"] == pytest.approx(hours["here"] / 40)
    assert set(hours) == {"here", "A100", "H100", "mygpu"} and "given" in out["devices"]["mygpu"]["source"]
    assert all(len(line) <= 80 for r in plan_tables(out) for line in _render(r).splitlines())


def _render(renderable) -> str:
    console = Console(width=80, record=True)
    with console.capture():
        console.print(renderable)
    return console.export_text()


def test_cli_json_keys_and_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIFT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(ROOT)  # presets are read from params/
    runner = CliRunner()
    result = runner.invoke(
        app, ["plan", "--params", str(tiny_bench(tmp_path)), "--json", "--device-rate", "A100=50"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    for key in ("model_seed_runs", "trainings", "row_passes", "encoder_passes", "cells", "projected_hours"):
        assert key in out
    assert out["projected_hours"]["A100"] == pytest.approx(out["projected_hours"]["here"] / 50)
    assert (tmp_path / "cache" / "plan-benchmarks.json").exists()
    result = runner.invoke(app, ["plan", "nope", "--no-bench"])
    assert result.exit_code == 2 and "unknown preset 'nope'" in result.output
    result = runner.invoke(app, ["plan", "--no-bench", "--rows", "amazon"])
    assert result.exit_code == 2 and "NAME=NUMBER" in result.output

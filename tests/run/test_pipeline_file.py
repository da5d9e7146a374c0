"""dvc.yaml is what drift/run/pipeline.py writes from drift/core/paths.py: one source for every path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from drift.core.paths import CHECKED, PATHS, dataset_paths, dvc_path
from drift.run.pipeline import STAGES, dvc_yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.pipeline
def test_dvc_yaml_is_written_by_the_pipeline_table():
    result = subprocess.run(
        [sys.executable, "-m", "drift.run.pipeline", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_every_stage_input_is_an_output_of_an_earlier_stage():
    stages = yaml.safe_load(dvc_yaml())["stages"]
    written = set()
    for name, stage in stages.items():
        spec = stage.get("do", stage)
        for dep in spec["deps"]:
            if dep.startswith("data/"):
                within = any(dep.startswith(out + "/") for out in written)  # a file of an output folder
                assert dep in written or within, f"{name} reads {dep}, which no earlier stage writes"
        for out in spec.get("outs", []):
            written.add(out if isinstance(out, str) else next(iter(out)))


def test_code_and_dvc_yaml_agree_on_paths():
    # the code's path for a dataset is dvc.yaml's with ${key} filled in, for every path a stage names
    text = dvc_yaml()
    named = {
        k
        for s in STAGES.values()
        for field in (
            "inputs",
            "outs",
            "outs_uncached",
            "outs_block",
            "outs_persist",
            "metrics",
            "metrics_dirs",
        )
        for k in s.get(field, [])
    } | {p[0] for s in STAGES.values() for p in s.get("plots", [])}
    for key in named:
        assert dvc_path(key) in text
        assert str(dataset_paths("sotu")[key]) == dvc_path(key).replace("${key}", "sotu")
    assert set(named) <= set(PATHS)


def test_the_check_stage_runs_first_every_time():
    """params.yaml is validated on every `dvc repro` / `dvc exp run`: the check stage always runs (models
    included), and every ingest (so every stage) comes after it through its file per dataset (its reader),
    whose bytes change only with the reader."""
    stages = yaml.safe_load(dvc_yaml())["stages"]
    assert next(iter(stages)) == "check"
    check = stages["check"]
    assert check["always_changed"] is True and "params.yaml" in check["deps"]
    assert check["outs"] == [CHECKED] and dvc_path("checked") in stages["ingest"]["do"]["deps"]
    # params.yaml names no reader: each ingest's reader comes through the check stage's file
    assert not any("reader" in dep for dep in stages["ingest"]["do"]["deps"])
    # the rosters are checked against the torch-free model table here, before any ingest: its code is a dep,
    # the model classes are not (editing a head does not re-run the check)
    assert "drift/core/model_registry.py" in check["deps"] and "drift/run/checks.py" in check["deps"]
    assert not any(dep.startswith("drift/models/") for dep in check["deps"])


def test_a_run_stages_nothing_the_user_did_not_stage():
    """DVC's autostage would `git add` dvc.lock and every .gitignore it touches after each run: off, so an
    unchanged re-run leaves `git status` as it was."""
    import configparser

    config = configparser.ConfigParser()
    config.read(ROOT / ".dvc" / "config")
    assert config.get("core", "autostage", fallback="false").strip().lower() in ("false", "0", "no")

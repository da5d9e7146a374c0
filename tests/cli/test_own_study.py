"""A study of one's own data, and only it: a dataset's section overrides `train` and `embed` for that dataset
alone (one-line errors naming it), and `drift run <dataset>` runs its stages alone through DVC."""

from __future__ import annotations

import sys

import pytest
import yaml

from drift.cli.run_commands import dvc_command
from drift.core.errors import DriftError
from drift.core.params import load_params
from tests.helpers import SHIPPED_PARAMS, drift_cli, run, tiny_params


def shipped() -> dict:
    return yaml.safe_load(SHIPPED_PARAMS.read_text())


def test_a_sections_train_and_embed_act_on_its_dataset_alone():
    doc = shipped()
    doc["sotu"]["train"] = {"epochs": 20, "lr": {"frozen": 0.1}}
    doc["sotu"]["embed"] = {"batch_size": 8}
    everyone, sotu = load_params(doc), load_params(doc, "sotu")
    other = load_params(doc, "synth-portraits")
    assert (sotu.train.epochs, sotu.embed.batch_size) == (20, 8)
    assert sotu.train.lr == {"default": 0.001, "frozen": 0.1}  # a mapping merges key by key
    for params in (everyone, other):
        assert (params.train.epochs, params.embed.batch_size, params.train.lr["frozen"]) == (5, 32, 0.01)
    assert (
        sotu.overrides
        == everyone.overrides
        == {"sotu": {"train": doc["sotu"]["train"], "embed": {"batch_size": 8}}}
    )


@pytest.mark.parametrize(
    "override, line",
    [
        (
            {"train": {"epohcs": 3}},
            "in sotu.train, sotu's own settings: unknown parameter train.epohcs: did you mean train.epochs?",
        ),
        ({"embed": {"max_length": 100000}}, "in sotu.embed, sotu's own settings: "),
        ({"train": 5}, "sotu.train must be a mapping of train settings for sotu, got 5"),
    ],
)
def test_a_bad_override_is_one_line_naming_its_dataset(override, line):
    doc = shipped()
    doc["sotu"].update(override)
    with pytest.raises(DriftError) as e:
        load_params(doc)  # every dataset's overrides are checked, whichever dataset is asked for
    assert str(e.value).startswith(line) and "\n" not in str(e.value)


@pytest.mark.compute
@pytest.mark.pipeline
def test_drift_run_runs_its_datasets_stages_alone(project):
    params = tiny_params()
    params["train"]["models"]["synth-portraits"] = ["mlp-s"]
    repo = project(params)
    out = run(["drift", "run", "synth-portraits"], repo).stdout
    ran = [line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")]
    assert {"ingest@synth-portraits", "train@synth-portraits", "report@synth-portraits"} <= set(ran), out
    assert not [s for s in ran if "@sotu" in s], ran
    assert (repo / "metrics/synth-portraits/mlp-s.json").exists() and not (repo / "metrics/sotu").exists()
    bad = drift_cli("run", "sotuu", cwd=repo)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
    assert "dataset 'sotuu' is not in params.yaml `datasets`: did you mean sotu?" in bad.stderr
    # the command line is DVC's own, every value one argument (no shell): a value with spaces stays whole
    assert dvc_command(["sotu"], ["sotu.train.epochs=20", "x=a b; rm -rf /"], "long run", False) == [
        sys.executable,
        "-m",
        "dvc",
        "exp",
        "run",
        "report@sotu",
        "-S",
        "sotu.train.epochs=20",
        "-S",
        "x=a b; rm -rf /",
        "-n",
        "long run",
    ]

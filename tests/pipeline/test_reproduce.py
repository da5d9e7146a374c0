"""A fresh run reproduces the committed results: synth-portraits with the default params (every row, every
slice, every cutoff) and the roster cut to mlp-s and the two references, run by the stages' own main() in this
process with the caches in a temporary folder; each model's metrics/synth-portraits/<model>.json must equal
the committed one, every number to the last bit (the CPU code path is pinned: drift/core/environment.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.helpers import make_project, only, repro_in_process

pytestmark = pytest.mark.compute  # its lane (tests/conftest.py): out of `make test-fast`

ROOT = Path(__file__).resolve().parents[2]
DATASET, MODELS = "synth-portraits", ("mlp-s", "baseline-prior", "baseline-linear")
VARYING = ("lock_sha256",)  # the lock file's hash: the same lock here, but not part of what a run computes


def committed(model: str) -> dict:
    return json.loads((ROOT / "metrics" / DATASET / f"{model}.json").read_text())


def test_a_fresh_run_reproduces_the_committed_metrics(tmp_path):
    params = only(yaml.safe_load((ROOT / "params.yaml").read_text()), DATASET)
    params["train"]["models"][DATASET] = ["mlp-s"]
    params["report"]["saliency"][DATASET]["models"] = ["mlp-s"]
    repo = make_project(tmp_path / "repo", params, tmp_path / "cache")
    repro_in_process(repo, DATASET, stages=("ingest", "slice", "embed", "train", "evaluate", "report"))
    for model in MODELS:
        fresh = json.loads((repo / "metrics" / DATASET / f"{model}.json").read_text())
        want = committed(model)
        for key in VARYING:
            fresh.pop(key, None), want.pop(key, None)
        assert fresh == want, model

"""The check stage validates params.yaml without the heavy libraries: no torch, transformers, timm or lancedb
is imported on its path (a fresh interpreter runs stages/check.py and lists what it loaded), and the
torch-free model table it reads says exactly what drift/models builds."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.helpers import ROOT, SHIPPED_PARAMS

HEAVY = ("torch", "transformers", "timm", "lancedb", "sentence_transformers", "sklearn")


@pytest.mark.pipeline
def test_the_check_stage_imports_no_torch(tmp_path):
    shutil.copy(SHIPPED_PARAMS, tmp_path / "params.yaml")
    probe = (
        "import runpy, sys\nsys.argv = ['stages/check.py']\n"
        f"runpy.run_path({str(ROOT / 'stages' / 'check.py')!r}, run_name='__main__')\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"
    written = sorted(p.name for p in (tmp_path / "data" / "checked").iterdir())
    assert written == [
        f"{ds}{part}.json" for ds in ("sotu", "synth-portraits") for part in (".embed", "", ".train")
    ]
    record = json.loads((tmp_path / "data" / "checked" / "sotu.json").read_text())
    assert record["reader"] == "drift/data/datasets/sotu.py" and len(record["code"]) == 64


def test_the_torch_free_model_table_is_what_drift_models_builds():
    from drift import models
    from drift.core import model_registry

    assert models.MODELS is model_registry.MODELS and not models._table_problems()
    heads = {n for n, info in model_registry.MODELS.items() if model_registry.family_of(info)}
    # probes and references as their classes say
    assert set(models._DERIVED) | heads == set(model_registry.MODELS)

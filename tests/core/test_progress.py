"""Progress on long work (drift/core/progress.py): plain lines at least every DRIFT_PROGRESS_INTERVAL seconds
when stderr is not a terminal (as under DVC), from a timer, so a slow step still reports; a stage's stderr
carries them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from drift.core.errors import DriftError
from drift.core.progress import interval, progress_line
from tests.helpers import ROOT, SHIPPED_PARAMS

LINE = re.compile(r"^work: \d/5 \(\d+%\), [\d.,]+/s, elapsed \d:\d\d:\d\d(, left \d:\d\d:\d\d)?$")


def _env(**extra):
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


@pytest.mark.pipeline
def test_plain_lines_every_interval_even_while_a_step_runs():
    code = (
        "import time\nfrom drift.core.progress import progress\nwith progress('work', total=5) as bar:\n"
        "    time.sleep(0.9)\n    for _ in range(5):\n        time.sleep(0.1); bar.advance()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=_env(DRIFT_PROGRESS_INTERVAL="0.2"),
    )
    lines = out.stderr.splitlines()
    assert len(lines) >= 5 and all(LINE.match(line) for line in lines), out.stderr
    # a step that has not finished still reports
    assert lines[0].startswith("work: 0/5 (0%)")
    assert lines[-1].startswith("work: 5/5 (100%)") and out.stdout == ""
    quiet = subprocess.run(
        [sys.executable, "-c", code.replace("0.9", "0").replace("0.1", "0")],
        capture_output=True,
        text=True,
        check=True,
        env=_env(),
    )
    assert quiet.stderr == ""  # shorter than the interval: nothing


def test_progress_line_and_interval(monkeypatch):
    assert (
        progress_line("embed sotu", 50, 200, 10.0)
        == "embed sotu: 50/200 (25%), 5.0/s, elapsed 0:00:10, left 0:00:30"
    )
    assert progress_line("ingest x", 1200, None, 2.0) == "ingest x: 1,200, 600/s, elapsed 0:00:02"
    monkeypatch.delenv("DRIFT_PROGRESS_INTERVAL", raising=False)
    assert interval() == 10.0
    monkeypatch.setenv("DRIFT_PROGRESS_INTERVAL", "soon")
    with pytest.raises(DriftError, match="DRIFT_PROGRESS_INTERVAL='soon' is not a positive number"):
        interval()


@pytest.mark.pipeline
def test_a_stage_reports_progress_on_stderr(tmp_path):
    shutil.copytree(ROOT / "stages", tmp_path / "stages")
    shutil.copy(SHIPPED_PARAMS, tmp_path / "params.yaml")
    out = subprocess.run(
        [sys.executable, "stages/ingest.py", "sotu"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(DRIFT_PROGRESS_INTERVAL="0.05"),
    )
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("ingest sotu: ")]
    assert len(lines) >= 2 and re.search(r"[\d,]+, [\d.,]+/s, elapsed", lines[-1]), out.stderr

"""One reader of params.yaml: every command that reads it refuses a key named twice in one mapping (PyYAML
alone keeps the last silently), in the same one line, before it does anything else."""

from __future__ import annotations

import shutil

import pytest

from tests.helpers import ROOT, SHIPPED_PARAMS, drift_cli

# split.seed named twice: the last would win under a plain yaml.safe_load
TWICE = SHIPPED_PARAMS.read_text().replace("split:\n", "split:\n  seed: 7\n", 1)
REFUSAL = "names 'seed' twice in one mapping"

COMMANDS = [
    ("check",),
    ("models",),
    ("plan",),
    ("plan", "paper-amazon"),
    ("rehearse", "paper-amazon"),
    ("preset", "paper-amazon"),
    ("init", "mine", "table.csv", "--text", "note", "--label", "kind"),
    ("run", "sotu"),
    ("cache", "list"),
    ("policy", "sotu"),
]


@pytest.fixture
def workspace(tmp_path):
    assert TWICE != SHIPPED_PARAMS.read_text(), "params.yaml has no `split:` section to name a key twice in"
    (tmp_path / "params.yaml").write_text(TWICE)
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    shutil.copytree(ROOT / "params", tmp_path / "params")  # the presets
    rows = [f"2019-0{1 + i % 9}-1{i % 9},note {i} about thing {i % 5},{'ab'[i % 2]}" for i in range(60)]
    (tmp_path / "table.csv").write_text("date,note,kind\n" + "\n".join(rows) + "\n")
    return tmp_path


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_every_command_refuses_a_key_named_twice(workspace, command):
    before = (workspace / "params.yaml").read_text()
    out = drift_cli(*command, cwd=workspace)
    assert out.returncode != 0 and REFUSAL in out.stdout + out.stderr, (out.stdout[-800:], out.stderr[-800:])
    assert (workspace / "params.yaml").read_text() == before  # nothing written


def test_compare_reads_params_the_same_way(workspace):
    """`drift compare` reads params.yaml at each revision with the same reader
    (drift.report.results.params_at)."""
    from types import SimpleNamespace

    from drift.core.errors import DriftError
    from drift.report.results import params_at

    with pytest.raises(DriftError, match=REFUSAL):
        params_at(SimpleNamespace(root_dir=str(workspace)), "workspace")

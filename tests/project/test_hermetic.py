"""The suite ignores the workspace's params.yaml: in a workspace where a user has `drift init`-ed a table of
their own and applied a preset, the tests that read params still pass (they build their params from
params.yaml as committed, tests/conftest.py `shipped_params`, or their own), and `drift preset` kept the
user's dataset and said so. DVC's logging, set up by the suite, outlives every test's captured output."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.helpers import ROOT, SHIPPED_PARAMS

BIN = os.path.dirname(sys.executable)
PARAM_TESTS = [
    "tests/core/test_params.py",
    "tests/cli/test_cli.py::test_models_for_a_dataset_use_its_inputs_and_outputs",
    "tests/data/test_table.py::test_configured_dataset_in_params",
]


def _run(cmd, cwd, env):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)


@pytest.mark.pipeline
def test_param_reading_tests_pass_in_a_users_workspace(tmp_path):
    ws = tmp_path / "ws"
    for name in ("drift", "tests", "params", "stages"):
        shutil.copytree(ROOT / name, ws / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copytree(ROOT / ".dvc" / "plots", ws / ".dvc" / "plots")
    for name in ("dvc.yaml", "requirements.lock", "pyproject.toml", ".gitignore"):
        shutil.copy(ROOT / name, ws / name)
    shutil.copy(SHIPPED_PARAMS, ws / "params.yaml")
    for git in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "clone"],
    ):
        # a clone: params.yaml as shipped
        subprocess.run(["git", *git], cwd=ws, check=True, capture_output=True)
    day = dt.date(2019, 1, 1)
    lines = ["date,subject,kind"] + [
        f"{day + dt.timedelta(days=9 * i)},{['fix', 'feat', 'docs'][i % 3]} change number {i} in module {i % 7},"
        f"{['fix', 'feat', 'docs'][i % 3]}"
        for i in range(240)
    ]
    (ws / "commits.csv").write_text("\n".join(lines) + "\n")
    env = {
        **os.environ,
        "PYTHONPATH": str(ws),
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "HF_HUB_OFFLINE": "1",
    }
    init = _run(
        [f"{BIN}/drift", "init", "commits", "commits.csv", "--text", "subject", "--label", "kind"], ws, env
    )
    assert init.returncode == 0, init.stderr
    preset = _run([f"{BIN}/drift", "preset", "paper-amazon"], ws, env)
    assert preset.returncode == 0, preset.stderr
    assert "kept commits" in preset.stdout and "sotu, synth-portraits -> amazon" in preset.stdout, (
        preset.stdout
    )
    params = yaml.safe_load((ws / "params.yaml").read_text())
    assert set(params["datasets"]) == {"amazon", "commits"} and "commits" in params
    suite = _run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *PARAM_TESTS], ws, env
    )
    assert suite.returncode == 0, suite.stdout[-3000:] + suite.stderr[-2000:]


def test_preset_only_drops_the_users_datasets_and_says_so(tmp_path):
    from drift.core.presets import apply_preset

    params = yaml.safe_load(SHIPPED_PARAMS.read_text())
    params["datasets"]["mine"] = {"input": "t.csv"}
    params["mine"] = {"kind": "table", "time": "t", "text": ["x"], "label": "y", "task": "binary"}
    params["train"]["models"]["mine"] = ["ffn-s"]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    changed = apply_preset("paper-amazon", path, ROOT / "params", check=lambda doc: None, only=True)
    assert changed[0] == "datasets (sotu, synth-portraits -> amazon; dropped mine and their sections)"
    after = yaml.safe_load(path.read_text())
    assert (
        set(after["datasets"]) == {"amazon"}
        and "mine" not in after
        and "mine" not in after["train"]["models"]
    )


def test_dvc_logs_to_a_stream_that_outlives_each_test(capsys):
    """DVC's log handlers hold the stream sys.stdout was when dvc was first imported (tests/conftest.py
    imports it first): never a test's own capture, which is closed when that test ends and would make the
    next in-process DVC call that logs (Repo.init) fail in whichever test happens to run later."""
    import logging

    import dvc  # noqa: F401

    streams = [h.stream for h in logging.getLogger("dvc").handlers if hasattr(h, "stream")]
    assert streams, "dvc set up no stream handlers"
    for stream in streams:
        inner = getattr(stream, "wrapped", stream)  # colorama's wrapper, where dvc installed it
        assert inner is not sys.stdout and inner is not sys.stderr and not inner.closed

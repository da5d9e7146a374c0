"""Helpers the tests share: the shipped params and cut-down ones, a real project copy in a temporary git + DVC
repository, the stage scripts run in process, the `drift` command in process. Imported as `tests.helpers`;
tests/conftest.py holds the process set-up, the fixtures and the lanes."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from drift.core.environment import deterministic_kernels

# drift's layer packages, bottom to top (docs/architecture.md): a module imports only its layer or below, and
# the tests live in a folder per layer
LAYER_PACKAGES = (
    "core",
    "protocol",
    "data",
    "store",
    "encoders",
    "models",
    "train",
    "evaluate",
    "report",
    "analysis",
    "run",
    "cli",
)

ROOT = Path(__file__).resolve().parents[1]


def shipped_params() -> Path:
    """params.yaml as committed (git's HEAD), written to a file of this process: what the tests build their
    params from, whatever the workspace's params.yaml holds uncommitted (a user's datasets, sections, a
    preset). Outside a git checkout, the workspace's own. tests/core/test_params.py checks it against the
    schema."""
    shown = subprocess.run(["git", "show", "HEAD:params.yaml"], cwd=ROOT, capture_output=True, text=True)
    if shown.returncode != 0:
        return ROOT / "params.yaml"
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="drift-shipped-")) / "params.yaml"
    path.write_text(shown.stdout)
    atexit.register(shutil.rmtree, path.parent, True)
    return path


SHIPPED_PARAMS = shipped_params()
BIN = Path(sys.executable).parent


def metrics_json(**stats) -> str:
    """A whole metrics/<ds>/<model>.json (drift.report.metrics_file.ModelMetrics, validated) around the few
    fields a test sets: the others empty (None), the metric accuracy, one seed, family FFN."""
    from drift.report.metrics_file import ModelMetrics

    empty = {"id": None, "future": None, "decay": None}
    base = {
        **empty,
        "metric": "accuracy",
        "higher_is_better": True,
        "k": 3,
        "seeds": 1,
        "family": "FFN",
        "reference": stats.get("family") == "Reference",
        **{f"{s}_std": None for s in empty},
        **{f"{s}_ci95": [None, None] for s in empty},
        "protocols": {
            "wild-time": {
                "eval_fix_split": None,
                "eval_fix_average": None,
                "eval_fix_worst": None,
                "eval_stream_average": None,
                "eval_stream_worst": None,
            },
            "clear": {
                "in_domain": None,
                "next_domain": None,
                "backward_transfer": None,
                "forward_transfer": None,
            },
        },
        "lock_sha256": None,
    }
    return ModelMetrics.model_validate({**base, **stats}).dumps()


def tiny_params() -> dict:
    """The shipped params.yaml cut down so a whole `dvc repro` takes a minute on two cores."""
    params = yaml.safe_load(SHIPPED_PARAMS.read_text())
    params["sotu"].update(
        cap_per_slice=24, min_samples=10, slices={"unit": "decade", "start": 1960, "end": 2010}
    )
    params["synth-portraits"].update(
        k=3, per_slice=80, slices={"unit": "year", "start": 2000, "end": 2003}, min_samples=10
    )
    params["embed"].update(max_length=32)
    params["report"]["saliency"]["synth-portraits"]["cells"] = [["2000", "2001"], ["2001", "2002"]]
    params["train"].update(epochs=1, models={"sotu": ["ffn-s", "probe-minilm"], "synth-portraits": ["mlp-s"]})
    # the label-free part: small, not absent
    params["report"]["shift"].update(n=40, permutations=20, max_rows=100)
    return params


def dvc_params(*names: str) -> dict:
    """tiny_params() for the tests of DVC's behaviour with the pipeline (what re-runs, what is pulled, what a
    remote holds), where each stage's process costs more than its work: only these datasets, sotu over three
    decades (1980-2010, at most 24 paragraphs each) instead of five, the references cut to baseline-prior and
    baseline-linear (no test of DVC's behaviour reads baseline-tfidf). Three cutoffs still give every matrix
    an off-diagonal."""
    params = only(tiny_params(), *names)
    params["sotu"]["slices"] = {"unit": "decade", "start": 1980, "end": 2010}
    params["train"]["baselines"] = ["baseline-prior", "baseline-linear"]
    return params


def params_of(**changes) -> dict:
    """The repository's params.yaml as plain data, each dotted key of `changes` set to its value."""
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    for dotted, value in changes.items():
        *keys, last = dotted.split(".")
        node = data
        for key in keys:
            node = node[key]
        node[last] = value
    return data


def refused(data: dict) -> str:
    """The one line load_params refuses `data` with (the test fails if it takes it)."""
    from drift.core.errors import DriftError
    from drift.core.params import load_params

    with pytest.raises(DriftError) as e:
        load_params(data)
    return str(e.value)


def only(params: dict, *names: str) -> dict:
    """Keep just these datasets in the pipeline."""
    params["datasets"] = {n: params["datasets"][n] for n in names}
    return params


def run(
    cmd: list[str], cwd: Path, check: bool = True, env: dict | None = None
) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **(env or {})}
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


def make_project(path: Path, params: dict, cache_dir: Path) -> Path:
    """A copy of the pipeline (dvc.yaml, stages, .dvc/plots) in a fresh git + DVC repository."""
    path.mkdir(parents=True, exist_ok=True)
    for name in ("dvc.yaml", ".gitignore", "requirements.lock"):
        shutil.copy(ROOT / name, path / name)
    shutil.copytree(ROOT / "stages", path / "stages", ignore=shutil.ignore_patterns("__pycache__"))
    params["embed"]["cache_dir"] = str(cache_dir)
    (path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    # stages depend on the library's files by path: a copy lets DVC hash them (the installed package runs)
    shutil.copytree(ROOT / "drift", path / "drift", ignore=shutil.ignore_patterns("__pycache__"))
    run(["git", "init", "-q"], path)
    run(["git", "config", "user.email", "test@example.com"], path)
    run(["git", "config", "user.name", "test"], path)
    run(["dvc", "init", "-q"], path)
    shutil.copytree(ROOT / ".dvc" / "plots", path / ".dvc" / "plots", dirs_exist_ok=True)
    run(["git", "add", "-A"], path)
    run(["git", "commit", "-qm", "pipeline"], path)
    return path


def drift_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The `drift` command in this process (Typer's runner), answered like a finished process: returncode,
    stdout, stderr apart. No Python start per call; tests/report/test_report.py checks the console script
    itself once."""
    from typer.testing import CliRunner

    from drift.cli import app

    old = os.getcwd()
    os.chdir(cwd or old)
    try:
        result = CliRunner().invoke(app, [str(a) for a in args])
    finally:
        os.chdir(old)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


STAGES = ("ingest", "slice", "embed", "train", "evaluate", "report")


def repro_in_process(repo: Path, *datasets: str, stages=STAGES) -> None:
    """The stage scripts' own main() in this process, in dvc.yaml's order: the code `dvc repro` runs, without
    DVC's bookkeeping and a Python start (torch imports) per stage. For tests whose subject is the numbers a
    run produces; tests of DVC's behaviour run `dvc repro` itself."""
    import runpy

    import torch

    cwd, threads, strict = os.getcwd(), torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    os.chdir(repo)
    try:
        for stage in stages:
            main = runpy.run_path(str(repo / "stages" / f"{stage}.py"))["main"]
            for name in datasets:
                main([name])
    finally:
        os.chdir(cwd)
        torch.set_num_threads(threads)
        deterministic_kernels(strict)


def checked_params(source):
    """params.yaml (a path or a document) as the check stage and the CLI check it:
    drift.core.params.load_params, then every dataset section typed by its module
    (drift.data.datasets.check_datasets)."""
    from drift.core.params import load_params
    from drift.data.datasets import check_datasets

    params = load_params(source)
    check_datasets(params)
    return params

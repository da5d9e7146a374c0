"""Shared test helpers: a real project copy in a temporary git repository, run with real DVC."""
from __future__ import annotations

import atexit
import functools
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from drift.core.environment import deterministic_kernels, pin_cpu_code_path

pin_cpu_code_path()  # before any test imports torch: the code path the committed numbers were computed on

# bytecode caches (gitignored __pycache__/) are kept even where PYTHONDONTWRITEBYTECODE asks otherwise: without them
# every pytest worker and every stage process `dvc repro` starts compiles drift/ again and pytest rewrites every test
# module again, about 5 s of CPU a process on the reference machine (docs/decisions.md)
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

ROOT = Path(__file__).resolve().parents[1]


def shipped_params() -> Path:
    """params.yaml as committed (git's HEAD), written to a file of this process: what the tests build their params
    from, whatever the workspace's params.yaml holds uncommitted (a user's datasets, sections, a preset). Outside
    a git checkout, the workspace's own. tests/test_params.py checks it against the schema."""
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

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Rich sizes its console from a terminal on any standard stream: the tests read what a pipe gets (80 columns)
os.environ.setdefault("COLUMNS", "80")
# every `dvc` command otherwise starts a detached analytics daemon (about 0.8 s of CPU each, not counted by the
# test's own timing) that tries to reach the network
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
# OpenMP's idle threads sleep instead of spinning: the suite runs more torch processes than cores (pytest workers,
# stage scripts, Ray workers), where libgomp's spin-wait costs CPU the others need (docs/decisions.md "Costs a
# process pays whatever it computes"); no arithmetic changes. Nothing above imports torch, which reads it at load
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def metrics_json(**stats) -> str:
    """A whole metrics/<ds>/<model>.json (drift.report.metrics_file.ModelMetrics, validated) around the few
    fields a test sets: the others empty (None), the metric accuracy, one seed, family FFN."""
    from drift.report.metrics_file import ModelMetrics

    empty = {"id": None, "future": None, "decay": None}
    base = {**empty, "metric": "accuracy", "higher_is_better": True, "k": 3, "seeds": 1, "family": "FFN",
            "reference": stats.get("family") == "Reference", **{f"{s}_std": None for s in empty},
            **{f"{s}_ci95": [None, None] for s in empty},
            "protocols": {"wild-time": {"eval_fix_split": None, "eval_fix_average": None, "eval_fix_worst": None,
                                        "eval_stream_average": None, "eval_stream_worst": None},
                          "clear": {"in_domain": None, "next_domain": None, "backward_transfer": None,
                                    "forward_transfer": None}},
            "lock_sha256": None}
    return ModelMetrics.model_validate({**base, **stats}).dumps()


def tiny_params() -> dict:
    """The shipped params.yaml cut down so a whole `dvc repro` takes a minute on two cores."""
    params = yaml.safe_load(SHIPPED_PARAMS.read_text())
    params["sotu"].update(cap_per_slice=24, min_samples=10, slices={"unit": "decade", "start": 1960, "end": 2010})
    params["synth-portraits"].update(k=3, per_slice=80, slices={"unit": "year", "start": 2000, "end": 2003},
                                     min_samples=10)
    params["embed"].update(max_length=32)
    params["report"]["saliency"]["synth-portraits"]["cells"] = [["2000", "2001"], ["2001", "2002"]]
    params["train"].update(epochs=1, models={"sotu": ["ffn-s", "probe-minilm"], "synth-portraits": ["mlp-s"]})
    params["report"]["shift"].update(n=40, permutations=20, max_rows=100)  # the label-free part: small, not absent
    return params


def dvc_params(*names: str) -> dict:
    """tiny_params() for the tests of DVC's behaviour with the pipeline (what re-runs, what is pulled, what a
    remote holds), where each stage's process costs more than its work: only these datasets, sotu over three
    decades (1980-2010, at most 24 paragraphs each) instead of five, the references cut to baseline-prior and baseline-linear
    (no test of DVC's behaviour reads baseline-tfidf). Three cutoffs still give every matrix an off-diagonal."""
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


def run(cmd: list[str], cwd: Path, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **(env or {})}
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
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
    stdout, stderr apart. No Python start per call; tests/test_report.py checks the console script itself once."""
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


@pytest.fixture
def project(tmp_path):
    """Factory: project(params) → a ready repository using a private embedding cache."""
    def factory(params: dict | None = None, name: str = "repo") -> Path:
        return make_project(tmp_path / name, params or tiny_params(), tmp_path / "cache")
    return factory


@pytest.fixture
def s3_server(monkeypatch):
    """A real S3 server (moto's standalone server) on 127.0.0.1 for one test, stopped after it: yields an
    S3Server (tests/s3_server.py) with `.endpoint` (the URL), `.env` (AWS_ENDPOINT_URL, keys, region,
    AWS_ALLOW_HTTP; also set in this process's environment for the test) and `.bucket(name)`."""
    from s3_server import start_s3_server

    server = start_s3_server()
    for key, value in server.env.items():
        monkeypatch.setenv(key, value)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def s3_store():
    """One S3 server for a test file, bucket BUCKET (tests/s3_server.py) created and the AWS_* variables set in
    this process (subprocesses and Ray workers started after it inherit them); yields the endpoint URL."""
    from s3_server import BUCKET, start_s3_server

    server = start_s3_server()
    saved = {k: os.environ.get(k) for k in server.env}
    os.environ.update(server.env)
    server.bucket(BUCKET)
    try:
        yield server.endpoint
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# what makes a test a `pipeline` one (left out of `make test-fast`): a DVC repository, a Ray cluster, a
# subprocess, a server; searched in the test's source, the functions of its module it calls and its fixtures
HEAVY = re.compile(r"make_project|repro_in_process|subprocess|Popen|\brun\(\[|[\"']dvc[\"']|\bray\.|[\"']ray[\"']|"
                   r"s3_server|s3_store|chromium")
# what makes it a `compute` one (also left out): a real encoder or vision backbone, a model trained, a report's
# figures drawn, a vector index built, a rehearsal
COMPUTE = re.compile(r"make_encoder|text_encoder|TextEncoder|VisionEncoder|SentenceTransformer|\btimm\b|"
                     r"torchvision\.models\.|vision_encoder|"
                     r"embed_dataset|embed_all|train_one|train_many|train_roster|train_group|build_model\(|"
                     r"create_model\(|forward_backward|write_report|write_policy_report|\breport\(tmp_path|"
                     r"saliency|lancedb|\brehearse\(")


@functools.cache
def _own_source(func) -> tuple[str | None, frozenset[str]]:
    """func's source (None where it has none) and the global names its code, nested code included, uses; once
    per function for the whole collection (a module's helpers and fixtures serve many tests)."""
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError):
        return None, frozenset()
    codes, names = [func.__code__], set()
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes.extend(c for c in code.co_consts if inspect.iscode(c))
    return source, frozenset(names)


def _sources(func, module, seen: set) -> list[str]:
    """The source of func and of every function of `module` it names, transitively (nested code included)."""
    if func in seen or not inspect.isfunction(func):
        return []
    seen.add(func)
    source, names = _own_source(func)
    if source is None:
        return []
    out = [source]
    for name in names:
        called = getattr(module, name, None)
        if inspect.isfunction(called) and called.__module__ == module.__name__:
            out += _sources(called, module, seen)
    return out


def test_sources(item) -> list[str]:
    """The source of a test, of the functions of its module it calls and of the fixtures it uses."""
    seen: set = set()
    sources = _sources(item.function, item.module, seen)
    for name in item.fixturenames:
        for fixture in item._fixtureinfo.name2fixturedefs.get(name, ()):
            sources += _sources(fixture.func, inspect.getmodule(fixture.func), seen)
    return sources


@functools.cache
def _lanes_of(text: str) -> tuple[bool, bool]:
    return bool(HEAVY.search(text)), bool(COMPUTE.search(text))


# the test files that take longest, longest first (measured: docs/decisions.md "The suite under 15 minutes"). With
# `--dist loadfile --no-loadscope-reorder` (make test) xdist hands files out in collection order, so these start
# first and the short files fill in around them; no long file is left to start last while the other worker idles
LONGEST_FIRST = (
    "test_rehearse_wheel.py",
    "test_learning_real.py",
    "test_bench.py",
    "test_remote.py",
    "test_pipeline.py",
    "test_cells.py",
    "test_cache.py",
    "test_rehearse.py",
    "test_real_pipelines.py",
    "test_compare.py",
    "test_table.py",
    "test_executor.py",
    "test_executor_s3.py",
    "test_testbed.py",
)


def pytest_collection_modifyitems(config, items):
    # the lanes of `make test-fast`: a test is `pipeline` when its sources match HEAVY, `compute` when COMPUTE
    for item in items:
        if isinstance(item, pytest.Function):
            lanes = [_lanes_of(text) for text in test_sources(item)]
            if any(heavy for heavy, _ in lanes):
                item.add_marker(pytest.mark.pipeline)
            if any(compute for _, compute in lanes):
                item.add_marker(pytest.mark.compute)
    # the longest files first, the others after them in their own order (a stable sort)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def checked_params(source):
    """params.yaml (a path or a document) as the check stage and the CLI check it: drift.core.params.load_params,
    then every dataset section typed by its module (drift.data.datasets.check_datasets)."""
    from drift.core.params import load_params
    from drift.data.datasets import check_datasets

    params = load_params(source)
    check_datasets(params)
    return params

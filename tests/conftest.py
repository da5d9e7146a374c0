"""The suite's set-up: the pinned CPU path and the environment every test process runs in, the shared
fixtures, and the lanes. The helpers the tests import are in tests/helpers.py.

Lanes (`make test-fast` runs neither): a test in tests/pipeline/ is `pipeline` (a DVC repository, a Ray
cluster, a subprocess or a server), any other says so itself with `pytest.mark.pipeline` or
`pytest.mark.compute` (a real encoder, a model trained, a report's figures drawn), on the test or as its
module's `pytestmark`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from drift.core.environment import pin_cpu_code_path

pin_cpu_code_path()  # before any test imports torch: the code path the committed numbers were computed on

# bytecode caches (gitignored __pycache__/) are kept even where PYTHONDONTWRITEBYTECODE asks otherwise:
# without them every pytest worker and every stage process `dvc repro` starts compiles drift/ again and pytest
# rewrites every test module again, about 5 s of CPU a process on the reference machine (docs/decisions.md)
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Rich sizes its console from a terminal on any standard stream: the tests read what a pipe gets (80 columns)
os.environ.setdefault("COLUMNS", "80")
# every `dvc` command otherwise starts a detached analytics daemon (about 0.8 s of CPU each, not counted by
# the test's own timing) that tries to reach the network
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
# OpenMP's idle threads sleep instead of spinning: the suite runs more torch processes than cores (pytest
# workers, stage scripts, Ray workers), where libgomp's spin-wait costs CPU the others need (docs/decisions.md
# "Costs a process pays whatever it computes"); no arithmetic changes. Nothing above imports torch, which
# reads it at load
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# DVC binds its log handlers to sys.stdout as it is when dvc is first imported: imported first inside a
# test's capsys or CliRunner, they write to that test's stream after it is closed, and the next in-process
# DVC call that logs fails (LoggingException). Imported here, they hold pytest's stream for the session
import dvc  # noqa: E402, F401


@pytest.fixture
def project(tmp_path):
    """Factory: project(params) → a ready repository using a private embedding cache."""
    from tests.helpers import make_project, tiny_params

    def factory(params: dict | None = None, name: str = "repo") -> Path:
        return make_project(tmp_path / name, params or tiny_params(), tmp_path / "cache")

    return factory


@pytest.fixture
def s3_server(monkeypatch):
    """A real S3 server (moto's standalone server) on 127.0.0.1 for one test, stopped after it: yields an
    S3Server (tests/s3_server.py) with `.endpoint` (the URL), `.env` (AWS_ENDPOINT_URL, keys, region,
    AWS_ALLOW_HTTP; also set in this process's environment for the test) and `.bucket(name)`."""
    from tests.s3_server import start_s3_server

    server = start_s3_server()
    for key, value in server.env.items():
        monkeypatch.setenv(key, value)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def s3_store():
    """One S3 server for a test file, bucket BUCKET (tests/s3_server.py) created and the AWS_* variables set
    in this process (subprocesses and Ray workers started after it inherit them); yields the endpoint URL."""
    from tests.s3_server import BUCKET, start_s3_server

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


# the test files that take longest, longest first (measured: docs/decisions.md "The suite under 15 minutes").
# With `--dist loadfile --no-loadscope-reorder` (make test) xdist hands files out in collection order, so
# these start first and the short files fill in around them; no long file is left to start last while the
# other worker idles
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


PIPELINE = Path(__file__).resolve().parent / "pipeline"


def pytest_collection_modifyitems(config, items):
    # tests/pipeline/'s tests are in the pipeline lane by where they live; the others carry their marks
    for item in items:
        if PIPELINE in item.path.parents:
            item.add_marker(pytest.mark.pipeline)
    # the longest files first, the others after them in their own order (a stable sort)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))

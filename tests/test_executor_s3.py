"""A Ray run whose store and caches live only on object storage (a real S3 server on 127.0.0.1): the same
embeddings, checkpoints and eval JSON as the local executor with the store on disk, byte for byte; and
check_reachable checks an s3:// store's endpoint, not a path (slow: the tiny project twice)."""
from __future__ import annotations

import uuid

import pytest
from conftest import STAGES, make_project, only, repro_in_process, tiny_params
from s3_server import BUCKET
from test_executor import DATASETS, outputs, ray_copy, read_store

from drift.core.errors import DriftError
from drift.core.objectstore import ObjectPath
from drift.core.params import ComputeParams

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def s3_cluster(s3_store):
    """A local cluster started after the server: its workers inherit the AWS_* variables, and no other path."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield s3_store
    ray.shutdown()


def test_check_reachable_checks_the_endpoint_of_an_s3_store(s3_cluster, monkeypatch):
    from drift.core.executor import check_reachable

    check_reachable([ObjectPath(f"s3://{BUCKET}/nothing-yet")], ComputeParams(executor="ray"))
    with pytest.raises(DriftError, match="store is not reachable from Ray node .*bucket no-such-bucket"):
        check_reachable(["s3://no-such-bucket/store"], ComputeParams(executor="ray"))


def test_ray_with_the_store_on_s3_gives_the_local_bytes(s3_cluster, tmp_path):
    params = only(tiny_params(), *DATASETS)
    params["embed"]["chunk_rows"] = 32
    local = make_project(tmp_path / "local", params, tmp_path / "cache-local")
    repro_in_process(local, *DATASETS, stages=STAGES[:5])
    expected = outputs(local)

    store = ObjectPath(f"s3://{BUCKET}/ray-{uuid.uuid4().hex[:8]}")
    repo, _ = ray_copy((local, params, expected), tmp_path, store)
    repro_in_process(repo, *DATASETS, stages=("embed", "train", "evaluate"))
    assert read_store(store) == read_store(tmp_path / "cache-local")
    got = outputs(repo)
    assert got.keys() == expected.keys() and [p for p in got if got[p] != expected[p]] == []
    assert (store / "checkpoints").rglob("*.ckpt") and (store / "cells").rglob("*.json")

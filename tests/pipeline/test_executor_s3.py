"""A Ray run whose workers share no filesystem with the stage, only a real S3 server on 127.0.0.1 holding the
store and caches: their working directory is a folder of their own, and the whole checkout is moved away while
they compute (embedding, training, evaluation), so nothing they read comes from the stage's disk. The same
embeddings, checkpoints and eval JSON as the local executor with the store on disk, byte for byte; and
check_reachable checks an s3:// store's endpoint, not a path. Both modalities, one small project: ~40 s."""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from drift.core.errors import DriftError
from drift.core.objectstore import ObjectPath
from drift.core.params import ComputeParams
from tests.core.test_executor import DATASETS, outputs, ray_copy, read_store, small_params
from tests.helpers import make_project, repro_in_process
from tests.s3_server import BUCKET

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def s3_cluster(s3_store, tmp_path_factory):
    """One local cluster for the file, started after the server (its workers inherit the AWS_* variables),
    each worker in a working directory of its own (a copy of an empty folder), not the checkout's."""
    own = tmp_path_factory.mktemp("worker-dir")
    (own / "README").write_text("a Ray worker's own working directory: no checkout here\n")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"working_dir": str(own)})
    yield s3_store
    ray.shutdown()


@contextmanager
def checkout_away(repo: Path, seen: list):
    """The checkout renamed while the call runs (the stage's process only waits then): a worker reading it by
    path fails. `seen` gets each worker's working directory, as a task reports it."""
    hidden = repo.with_name(repo.name + "-away")
    os.rename(repo, hidden)
    try:
        seen += ray.get([ray.remote(num_cpus=1)(lambda: os.getcwd()).remote() for _ in range(2)])
        yield
    finally:
        os.rename(hidden, repo)


def test_check_reachable_checks_the_endpoint_of_an_s3_store(s3_cluster):
    from drift.core.executor import check_reachable

    check_reachable([ObjectPath(f"s3://{BUCKET}/nothing-yet")], ComputeParams(executor="ray"))
    with pytest.raises(DriftError, match="store is not reachable from Ray node .*bucket no-such-bucket"):
        check_reachable(["s3://no-such-bucket/store"], ComputeParams(executor="ray"))


def test_ray_workers_that_see_only_the_s3_store_give_the_local_bytes(s3_cluster, tmp_path, monkeypatch):
    import drift.core.executor
    import drift.encoders.embed
    import drift.evaluate.fill_matrices
    import drift.train.loop

    params = small_params()
    local = make_project(tmp_path / "local", params, tmp_path / "cache-local")
    repro_in_process(local, *DATASETS, stages=("ingest", "slice", "embed", "train", "evaluate"))
    expected = outputs(local)

    store = ObjectPath(f"s3://{BUCKET}/ray-{uuid.uuid4().hex[:8]}")
    repo, _ = ray_copy((local, params, expected), tmp_path, store)
    calls, seen = [], []

    def away(name):
        real = getattr(drift.core.executor, name)

        def call(*args, **kwargs):
            calls.append(name)
            with checkout_away(repo, seen):
                return real(*args, **kwargs)

        return call

    for module, name in (
        (drift.train.loop, "run_tasks"),
        (drift.evaluate.fill_matrices, "run_tasks"),
        (drift.encoders.embed, "map_actors"),
    ):
        monkeypatch.setattr(module, name, away(name))
    repro_in_process(repo, *DATASETS, stages=("embed", "train", "evaluate"))

    assert "map_actors" in calls and calls.count("run_tasks") == 2 * len(DATASETS)  # train and evaluate: each
    assert seen and all(
        not Path(cwd).is_relative_to(tmp_path) and not (Path(cwd) / "data").exists() for cwd in seen
    )
    assert read_store(store) == read_store(tmp_path / "cache-local")  # the actors' vectors
    got = outputs(repo)
    assert got.keys() == expected.keys() and any(p.endswith(".pt") for p in got)
    assert [p for p in got if got[p] != expected[p]] == []
    assert list((store / "checkpoints").rglob("*.ckpt")) and list((store / "cells").rglob("*.json"))


def test_a_checkpoint_the_s3_cache_lacks_travels_as_its_bytes(s3_cluster, tmp_path):
    """Checkpoints pulled by DVC into a workspace whose store never held them still reach the workers."""
    from drift.evaluate.fill_matrices import shipped_checkpoint
    from drift.store.cells import ResultCache

    cache = ResultCache(ObjectPath(f"s3://{BUCKET}/lacks-{uuid.uuid4().hex[:8]}"))
    path = tmp_path / "cutoff000.pt"
    path.write_bytes(b"a checkpoint's bytes")
    assert shipped_checkpoint(path, None, cache) == b"a checkpoint's bytes"  # no checkpoints.json entry
    assert shipped_checkpoint(path, "ab" * 32, cache) == b"a checkpoint's bytes"  # not in the cache
    cache.put_checkpoint("ab" * 32, path)
    assert shipped_checkpoint(path, "ab" * 32, cache) == "ab" * 32

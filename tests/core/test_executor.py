"""The heavy work on Ray (drift/core/executor.py): a real local Ray cluster of two CPUs, never a mock.

The small project (small_params) run with executor local, then with executor ray from an empty cache
(embedding, training and evaluation all on Ray): the same embeddings, checkpoints and eval JSON, byte for
byte. A Ray worker killed (SIGKILL) in the middle of training: Ray retries the task, which resumes from the
checkpoint cache, and the result is the same. `dvc exp run --queue` twice and `dvc queue start -j 2` on Ray
share the store (slow)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from drift.core.errors import DriftError
from drift.core.params import ComputeParams
from tests.helpers import STAGES, make_project, only, repro_in_process, run, tiny_params

ray = pytest.importorskip("ray")
DATASETS = ("sotu", "synth-portraits")


@pytest.fixture(scope="module")
def cluster():
    """One local cluster for the module (its start costs ~5 s); the stages join it (ray.is_initialized). This
    module's functions travel by value (workers cannot import tests/)."""
    from ray import cloudpickle  # Ray's own copy pickles remote functions

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    ray.shutdown()


def outputs(repo: Path) -> dict[str, bytes]:
    """What train and evaluate wrote: every checkpoint and eval JSON, by path."""
    return {
        str(p.relative_to(repo)): p.read_bytes()
        for folder in ("data/models", "data/eval")
        for p in sorted((repo / folder).rglob("*"))
        if p.is_file()
    }


def set_params(repo: Path, params: dict) -> None:
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def small_params() -> dict:
    """The tiny project cut further, each input kind kept: token states (ffn-s), pooled vectors (the linear
    reference), raw text (TF-IDF), pixels (mlp-s); several embed chunks, so both actors commit."""
    params = only(tiny_params(), *DATASETS)
    params["sotu"].update(cap_per_slice=14, slices={"unit": "decade", "start": 1970, "end": 2000})
    params["synth-portraits"].update(per_slice=40, slices={"unit": "year", "start": 2000, "end": 2002})
    params["report"]["saliency"]["synth-portraits"]["cells"] = [["2000", "2001"]]
    params["train"]["models"] = {"sotu": ["ffn-s"], "synth-portraits": ["mlp-s"]}
    params["embed"]["chunk_rows"] = 16
    return params


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The small project (small_params) through evaluate with the local executor: (repo, params, outputs)."""
    tmp = tmp_path_factory.mktemp("executor")
    params = small_params()
    repo = make_project(tmp / "local", params, tmp / "cache-local")
    repro_in_process(repo, *DATASETS, stages=STAGES[:5])
    return repo, params, outputs(repo)


def ray_copy(reference, tmp_path: Path, cache: Path) -> tuple[Path, dict]:
    """The reference project's data (slices; models and eval removed) with compute.executor ray and `cache`."""
    local, params, _ = reference
    repo = tmp_path / "ray"
    shutil.copytree(local, repo, symlinks=True, ignore=shutil.ignore_patterns("models", "eval", "features"))
    params = json.loads(json.dumps(params))
    params["embed"]["cache_dir"] = str(cache)
    params["compute"] = {"executor": "ray", "embed_actors": 2}
    set_params(repo, params)
    return repo, params


def read_store(cache: Path) -> dict:
    """Every table of an embedding store: {table: {key: pooled and tokens bytes}}."""
    import lance

    found = {}
    for path in sorted(cache.glob("*.lance")):
        table = lance.dataset(str(path)).to_table()
        columns = [c for c in ("pooled", "tokens") if c in table.column_names]
        found[path.name] = {
            key: tuple(str(table.column(c)[i]) for c in columns)
            for i, key in enumerate(table.column("key").to_pylist())
        }
    return found


@pytest.mark.compute
@pytest.mark.pipeline
def test_ray_gives_the_local_results_byte_for_byte(cluster, reference, tmp_path):
    local, _, expected = reference
    repo, _ = ray_copy(reference, tmp_path, tmp_path / "cache-ray")
    repro_in_process(repo, *DATASETS, stages=("embed", "train", "evaluate"))

    # the actors' vectors
    assert read_store(tmp_path / "cache-ray") == read_store(local.parent / "cache-local")
    got = outputs(repo)
    assert got.keys() == expected.keys() and any(p.endswith(".pt") for p in got)
    assert [p for p in got if got[p] != expected[p]] == []
    embed = json.loads((repo / ".drift/runs/embed/sotu-minilm-l6.json").read_text())
    assert (embed["executor"], embed["workers"], embed["computed"]) == ("ray", 2, embed["unique"])
    for name in DATASETS:
        train = json.loads((repo / f".drift/runs/train/{name}.json").read_text())
        evaluate = json.loads((repo / f".drift/runs/evaluate/{name}.json").read_text())
        assert (train["executor"], train["workers"], train["reused"]) == ("ray", 2, 0) and train[
            "trained"
        ] > 0
        assert (evaluate["executor"], evaluate["workers"], evaluate["reused"]) == ("ray", 2, 0)
        assert json.loads((local / f".drift/runs/train/{name}.json").read_text())["executor"] == "local"


MARKER: Path | None = None  # set by the test below; the function is pickled by value with it


def dying_train_group(group):
    """Trains the first cutoff of the first task that runs into the cache, then SIGKILLs its own worker; every
    other attempt (Ray's retry included) is the real train_group."""
    from drift.train.loop import train_group

    try:
        fd = os.open(MARKER, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # one task only, whichever starts first
    except FileExistsError:
        return train_group(group)
    os.write(fd, json.dumps({"pid": os.getpid(), "model": group.name, "todo": len(group.todo)}).encode())
    os.close(fd)
    train_group(dataclasses.replace(group, todo=group.todo[:1]))
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.compute
@pytest.mark.pipeline
def test_a_worker_killed_while_training_is_retried_and_resumes(cluster, reference, tmp_path, monkeypatch):
    import drift.train.loop

    global MARKER
    local, _, expected = reference
    cache = tmp_path / "cache-ray"
    shutil.copytree(
        local.parent / "cache-local", cache, ignore=shutil.ignore_patterns("checkpoints", "cells")
    )
    repo, _ = ray_copy(reference, tmp_path, cache)
    repro_in_process(repo, "synth-portraits", stages=("embed",))  # from the store: nothing computed
    MARKER = tmp_path / "killed"
    monkeypatch.setattr(drift.train.loop, "train_group", dying_train_group)
    repro_in_process(repo, "synth-portraits", stages=("train", "evaluate"))

    killed = json.loads(MARKER.read_text())
    assert killed["todo"] > 1  # it died with cutoffs left to train
    with pytest.raises(ProcessLookupError):
        os.kill(killed["pid"], 0)  # that worker is gone
    got = {p: b for p, b in outputs(repo).items() if "synth-portraits" in p}
    want = {p: b for p, b in expected.items() if "synth-portraits" in p}
    assert got.keys() == want.keys() and [p for p in got if got[p] != want[p]] == []
    train = json.loads((repo / ".drift/runs/train/synth-portraits.json").read_text())
    assert train["trained"] == sum(p.endswith(".pt") for p in want) - train["reused"]


@pytest.mark.pipeline
def test_a_path_no_worker_sees_is_one_line_naming_it(cluster, tmp_path):
    from drift.core.executor import check_reachable

    check_reachable([tmp_path], ComputeParams(executor="ray"))
    missing = tmp_path / "elsewhere"
    with pytest.raises(DriftError, match=f"{missing} is not visible from Ray node .*embed.cache_dir"):
        check_reachable([tmp_path, tmp_path / "elsewhere"], ComputeParams(executor="ray"))


@pytest.mark.pipeline
def test_a_cluster_that_cannot_be_joined_is_one_line_and_quick():
    # a fresh process: this one may hold the module's cluster
    started = time.perf_counter()
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from drift.core.executor import connect\n"
            "from drift.core.params import ComputeParams\n"
            "connect(ComputeParams(executor='ray', address='127.0.0.1:9'))",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "RAY_ADDRESS": ""},
    )
    assert result.returncode != 0 and time.perf_counter() - started < 30
    assert "DriftError: cannot join the Ray cluster at 127.0.0.1:9" in result.stderr
    assert "compute.address" in result.stderr.splitlines()[-1]


def test_the_local_executor_runs_in_order_here():
    from drift.core.executor import run_tasks, workers

    assert run_tasks(pid_of, [3, 1, 2], ComputeParams()) == [
        (3, os.getpid()),
        (1, os.getpid()),
        (2, os.getpid()),
    ]
    assert workers(ComputeParams(executor="local")) == 1


@pytest.mark.pipeline
def test_ray_tasks_come_back_in_order_from_other_processes(cluster):
    from drift.core.executor import run_tasks, workers

    results = run_tasks(pid_of, list(range(6)), ComputeParams(executor="ray"))
    assert [x for x, _ in results] == list(range(6)) and os.getpid() not in {pid for _, pid in results}
    assert workers(ComputeParams(executor="ray", cpus_per_task=1.0)) == 2
    assert workers(ComputeParams(executor="ray", cpus_per_task=2.0)) == 1


def pid_of(x):
    time.sleep(0.05 * (6 - x))  # the first items finish last: the order is the items', not the finish's
    return x, os.getpid()


@pytest.mark.pipeline
@pytest.mark.slow
def test_queued_experiments_on_ray_share_the_store(tmp_path):
    """Two experiments queued and run two at a time by DVC, each stage on Ray (a local cluster per stage
    process): both complete on Ray, sharing the checkpoint cache beside the store, where each checkpoint is
    once (the references' fit, seed-independent, is shared by both)."""
    params = only(tiny_params(), "synth-portraits")
    params["compute"] = {"executor": "ray"}
    repo = make_project(tmp_path / "repo", params, tmp_path / "cache")
    env = {"RAY_ADDRESS": ""}
    run(["dvc", "exp", "run", "--queue", "-S", "train.seeds=[0]", "-n", "seed0"], repo, env=env)
    run(["dvc", "exp", "run", "--queue", "-S", "train.seeds=[1]", "-n", "seed1"], repo, env=env)
    run(["dvc", "queue", "start", "-j", "2"], repo, env=env)
    deadline = time.time() + 600
    while time.time() < deadline:
        status = run(["dvc", "queue", "status"], repo).stdout
        if "Running" not in status and "Queued" not in status:
            break
        time.sleep(5)
    status = run(["dvc", "queue", "status"], repo).stdout
    assert status.count("Success") == 2, (
        status + run(["dvc", "queue", "logs", "seed0"], repo, check=False).stdout
    )
    # each experiment's run record, kept in the main repository under its name
    records = [
        json.loads((repo / f".drift/runs/exps/{name}/train/synth-portraits.json").read_text())
        for name in ("seed0", "seed1")
    ]
    assert all(r["executor"] == "ray" and r["workers"] >= 1 for r in records), records
    checkpoints = list((tmp_path / "cache" / "checkpoints").rglob("*.pt"))
    cutoffs, models = 3, 1 + 2  # mlp-s per seed; the two references once (seed-independent)
    assert len(checkpoints) == cutoffs * (models + 1)

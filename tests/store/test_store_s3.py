"""The store and caches on object storage, against a real S3-compatible server on 127.0.0.1
(tests/s3_server.py): the embedding store's reads and writes, concurrent appends from processes that share no
lock, compaction, the checkpoint and cell caches with their checksums, and each fault of the store in one
line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import numpy as np
import pytest

from drift.core.errors import DriftError
from drift.core.objectstore import ObjectPath, check_store, location
from drift.core.params import EmbedParams
from drift.store.cells import ResultCache
from drift.store.embeddings import EmbeddingStore, committed, compact_table, table_info
from drift.store.location import cache_dir
from tests.s3_server import BUCKET, free_port

DIM = 4


def prefix() -> ObjectPath:
    return ObjectPath(f"s3://{BUCKET}/{uuid.uuid4().hex[:8]}")


def rows(keys):
    pooled = np.array([[hash(k) % 97 + i for i in range(DIM)] for k in keys], np.float32)
    tokens = [np.full((1 + len(k) % 3, DIM), len(k), np.float16) for k in keys]
    return pooled, tokens


@pytest.mark.pipeline
def test_cache_dir_on_object_storage(s3_store, tmp_path):
    where = cache_dir(EmbedParams(cache_dir=f"s3://{BUCKET}/team/store/"))
    assert isinstance(where, ObjectPath) and str(where) == f"s3://{BUCKET}/team/store"
    assert tmp_path / where == where  # a repository-relative join keeps an absolute location
    assert isinstance(location(tmp_path), type(tmp_path))


@pytest.mark.pipeline
def test_store_round_trip_and_compaction(s3_store):
    root = prefix()
    store = EmbeddingStore(root, "enc", "f" * 64, DIM, with_tokens=True)
    assert str(store.path).startswith("s3://") and not committed(store.path)
    keys = ["a", "bb", "ccc"]
    pooled, tokens = rows(keys)
    store.append(keys, pooled, tokens)
    store.append(["ccc", "dddd"], *rows(["ccc", "dddd"]))  # a key stored twice, as by two racing writers
    assert committed(store.path) and store.missing(["a", "zz", "dddd"]) == ["zz"]
    fresh = EmbeddingStore(root, "enc", "f" * 64, DIM, with_tokens=True)
    np.testing.assert_array_equal(fresh.read_pooled(["ccc", "a"]), pooled[[2, 0]])
    flat, offsets = fresh.read_tokens(["bb"])
    np.testing.assert_array_equal(flat, tokens[1]) and list(offsets) == [0, len(tokens[1])]
    info = table_info(store.path)
    assert (info["rows"], info["unique"], info["bytes"] > 0) == (5, 4, True)
    report = compact_table(store.path)
    assert report["duplicates_removed"] == 1 and table_info(store.path)["rows"] == 4
    np.testing.assert_array_equal(EmbeddingStore(root, "enc", "f" * 64, DIM, True).read_pooled(keys), pooled)


WRITER = """
import sys, numpy as np
from drift.store.embeddings import EmbeddingStore
from drift.core.objectstore import ObjectPath
root, name = sys.argv[1], sys.argv[2]
store = EmbeddingStore(ObjectPath(root), "enc", "c" * 64, 4, with_tokens=False)
for i in range(int(sys.argv[3])):
    keys = [f"{name}-{i}-{j}" for j in range(3)]
    store.append(keys, np.full((3, 4), i, np.float32))
"""


@pytest.mark.pipeline
def test_concurrent_appends_lose_and_duplicate_nothing(s3_store):
    """Three processes, no lock they share, appending from an empty prefix (they race to create the table
    too)."""
    root = prefix()
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root), f"w{n}", "6"],
            env=os.environ.copy(),
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(3)
    ]
    errors = [w.communicate(timeout=120)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0, 0], errors
    keys = EmbeddingStore(root, "enc", "c" * 64, DIM, with_tokens=False).keys().to_pylist()
    assert len(keys) == 3 * 6 * 3 and len(set(keys)) == len(keys)


@pytest.mark.pipeline
def test_cell_cache_on_object_storage(s3_store, tmp_path):
    root = prefix()
    cache = ResultCache(root)
    import torch

    source = tmp_path / "f.pt"
    torch.save({"weight": torch.arange(4.0)}, source)  # a plain state dict: the cache refuses anything else
    state = source.read_bytes()
    cache.put_checkpoint("ab" * 32, source)
    cache.put_cell("ab" * 32, "cd" * 32, 0.75)
    cache.sync()
    again = ResultCache(root)
    assert again.checkpoint("ab" * 32) == state and again.cell("ab" * 32, "cd" * 32) == (True, 0.75)
    assert again.checkpoint("ef" * 32) is None and again.cell("ab" * 32, "ef" * 32) == (False, None)
    # a half-written object (a client that died mid-upload through a non-atomic tool): a miss, never served
    path = again.checkpoint_file("ab" * 32)
    path.write_bytes(path.read_bytes()[:-3])
    cell = again.cell_file("ab" * 32, "cd" * 32)
    cell.write_bytes(cell.read_bytes()[:10])
    assert again.checkpoint("ab" * 32) is None and again.cell("ab" * 32, "cd" * 32) == (False, None)
    assert again.corrupt == [str(path), str(cell)]
    target = tmp_path / "placed.pt"
    cache.put_checkpoint("ab" * 32, source)  # a re-run completes what is missing
    cache.place("ab" * 32, target)
    assert target.read_bytes() == state


@pytest.mark.pipeline
def test_half_written_table_object_is_not_served(s3_store):
    """A data file with no committed manifest (a writer killed mid-append) is invisible; the rows stay whole."""
    root = prefix()
    store = EmbeddingStore(root, "enc", "d" * 64, DIM, with_tokens=False)
    store.append(["k1", "k2"], np.ones((2, DIM), np.float32))
    (store.path / "data" / "torn.lance").write_bytes(b"LANC half")
    (store.path / "_versions" / "9.manifest-tmp").write_bytes(b"half")
    fresh = EmbeddingStore(root, "enc", "d" * 64, DIM, with_tokens=False)
    assert fresh.keys().to_pylist() == ["k1", "k2"]
    fresh.append(["k3"], np.zeros((1, DIM), np.float32))
    assert sorted(EmbeddingStore(root, "enc", "d" * 64, DIM, False).keys().to_pylist()) == ["k1", "k2", "k3"]


@pytest.mark.pipeline
def test_store_faults_are_one_line(s3_store, monkeypatch):
    check_store(prefix())  # reachable, bucket there
    with pytest.raises(DriftError, match="bucket no-such-bucket .* does not exist: create it"):
        check_store("s3://no-such-bucket/store")
    monkeypatch.setenv("AWS_ALLOW_HTTP", "false")
    with pytest.raises(DriftError, match="AWS_ALLOW_HTTP=true"):
        check_store(prefix())
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(DriftError, match="does not answer .*: start it, or set AWS_ENDPOINT_URL") as e:
        check_store(prefix())
    assert "\n" not in str(e.value) and "testing" not in str(e.value)  # one line, no secret


@pytest.mark.pipeline
def test_refused_credentials_are_one_line(s3_store, monkeypatch):
    from moto.core.authorization import enable_iam_authentication

    with enable_iam_authentication():  # the server now checks keys: "testing" is no IAM user's
        with pytest.raises(
            DriftError, match="refused the credentials for s3://drift-test/.*: set AWS_ACCESS_KEY_ID"
        ) as e:
            check_store(prefix())
    assert "\n" not in str(e.value) and "testing" not in str(e.value)


@pytest.mark.pipeline
def test_cache_commands_on_object_storage(s3_store, tmp_path, monkeypatch):
    """`drift cache`, `compact`, `verify` and `gc` with --cache-dir s3://...: the same answers as on disk."""
    from tests.helpers import drift_cli

    root = prefix()
    used = EmbeddingStore(root, "minilm-l6", "a" * 64, DIM, with_tokens=False)
    used.append(["k0", "k1"], np.zeros((2, DIM), np.float32))
    used.append(["k1", "k2"], np.ones((2, DIM), np.float32))
    EmbeddingStore(root, "vit-s16-in21k", "b" * 64, DIM, with_tokens=False).append(
        ["k0"], np.zeros((1, DIM), np.float32)
    )
    cells = ResultCache(root)
    import torch

    source = tmp_path / "f.pt"
    torch.save({"weight": torch.zeros(2)}, source)
    cells.put_checkpoint("11" * 32, source)  # listed below: kept
    cells.put_checkpoint("22" * 32, source)  # listed nowhere: collected
    cells.put_cell(ResultCache(root).checkpoint_digest("11" * 32), "33" * 32, 0.5)
    repo = tmp_path / "repo"
    (repo / "data/embeddings").mkdir(parents=True)
    (repo / "data/embeddings/sotu.json").write_text(json.dumps({"store": used.path.name}))
    (repo / "data/models/sotu").mkdir(parents=True)
    (repo / "data/models/sotu/checkpoints.json").write_text(json.dumps({"ffn-s/seed0/k0.pt": "11" * 32}))

    listed = json.loads(drift_cli("cache", "--json", "--cache-dir", str(root), cwd=repo).stdout)
    assert sorted((t["encoder"], t["rows"], t["unique"], t["datasets"]) for t in listed) == [
        ("minilm-l6", 4, 3, ["sotu"]),
        ("vit-s16-in21k", 1, 1, []),
    ]
    verified = drift_cli("cache", "verify", "--json", "--cache-dir", str(root), cwd=repo)
    assert verified.returncode == 0 and json.loads(verified.stdout)["checked"] == {
        "tables": 2,
        "checkpoints": 2,
        "cells": 1,
        "features": 0,
    }
    compacted = json.loads(drift_cli("cache", "compact", "--json", "--cache-dir", str(root), cwd=repo).stdout)
    assert sum(t["duplicates_removed"] for t in compacted["tables"]) == 1
    collected = json.loads(
        drift_cli("cache", "gc", "--json", "--grace-minutes", "0", "--cache-dir", str(root), cwd=repo).stdout
    )
    assert [d["table"] for d in collected["deleted"]] == ["vit-s16-in21k-bbbbbbbbbbbbbbbb.lance"]
    assert collected["checkpoints"]["checkpoints"] == [str(cells.checkpoint_file("22" * 32))]
    assert [
        t["table"]
        for t in json.loads(drift_cli("cache", "--json", "--cache-dir", str(root), cwd=repo).stdout)
    ] == [used.path.name]
    assert (
        ResultCache(root).checkpoint("11" * 32) == source.read_bytes()
        and ResultCache(root).checkpoint("22" * 32) is None
    )
    damaged = cells.checkpoint_file("11" * 32)
    damaged.write_bytes(damaged.read_bytes()[:-1])  # a half-written object
    verified = drift_cli("cache", "verify", "--json", "--cache-dir", str(root), cwd=repo)
    assert verified.returncode == 1 and json.loads(verified.stdout)["corrupt"] == [
        {
            "path": str(damaged),
            "problem": f"{len(source.read_bytes()) - 1} bytes where {len(source.read_bytes())} were written",
        }
    ]
    missing = drift_cli("cache", "--cache-dir", "s3://no-such-bucket/store", cwd=repo)
    assert missing.returncode != 0 and "bucket no-such-bucket" in missing.stderr + missing.stdout


def test_machine_measurements_stay_local_with_a_store_on_s3(monkeypatch, tmp_path):
    from drift.store.location import default_cache_dir, local_cache_dir

    monkeypatch.setenv("DRIFT_CACHE_DIR", f"s3://{BUCKET}/shared")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_cache_dir() == ObjectPath(f"s3://{BUCKET}/shared")
    assert local_cache_dir() == tmp_path / ".cache" / "drift"
    monkeypatch.setenv("DRIFT_CACHE_DIR", str(tmp_path / "here"))
    assert local_cache_dir() == default_cache_dir() == tmp_path / "here"

"""The store and caches on object storage, against a real S3-compatible server on 127.0.0.1 (tests/s3_server.py):
the embedding store's reads and writes, concurrent appends from processes that share no lock, compaction, the
checkpoint and cell caches with their checksums, and each fault of the store in one line."""
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
from drift.store.cells import CellCache
from drift.store.embeddings import EmbeddingStore, committed, compact_table, table_info
from drift.store.location import cache_dir
from s3_server import BUCKET, free_port

DIM = 4


def prefix() -> ObjectPath:
    return ObjectPath(f"s3://{BUCKET}/{uuid.uuid4().hex[:8]}")


def rows(keys):
    pooled = np.array([[hash(k) % 97 + i for i in range(DIM)] for k in keys], np.float32)
    tokens = [np.full((1 + len(k) % 3, DIM), len(k), np.float16) for k in keys]
    return pooled, tokens


def test_cache_dir_on_object_storage(s3_server, tmp_path):
    where = cache_dir(EmbedParams(cache_dir=f"s3://{BUCKET}/team/store/"))
    assert isinstance(where, ObjectPath) and str(where) == f"s3://{BUCKET}/team/store"
    assert tmp_path / where == where  # a repository-relative join keeps an absolute location
    assert isinstance(location(tmp_path), type(tmp_path))


def test_store_round_trip_and_compaction(s3_server):
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


def test_concurrent_appends_lose_and_duplicate_nothing(s3_server):
    """Three processes, no lock they share, appending from an empty prefix (they race to create the table too)."""
    root = prefix()
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(root), f"w{n}", "6"], env=os.environ.copy(),
                                stderr=subprocess.PIPE, text=True) for n in range(3)]
    errors = [w.communicate(timeout=120)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0, 0], errors
    keys = EmbeddingStore(root, "enc", "c" * 64, DIM, with_tokens=False).keys().to_pylist()
    assert len(keys) == 3 * 6 * 3 and len(set(keys)) == len(keys)


def test_cell_cache_on_object_storage(s3_server, tmp_path):
    root = prefix()
    cache = CellCache(root)
    source = tmp_path / "f.pt"
    source.write_bytes(b"state dict bytes")
    cache.put_checkpoint("ab" * 32, source)
    cache.put_cell("ab" * 32, "cd" * 32, 0.75)
    cache.sync()
    again = CellCache(root)
    assert again.checkpoint("ab" * 32) == b"state dict bytes" and again.cell("ab" * 32, "cd" * 32) == (True, 0.75)
    assert again.checkpoint("ef" * 32) is None and again.cell("ab" * 32, "ef" * 32) == (False, None)
    # a half-written object (a client that died mid-upload through a non-atomic tool): a miss, never served
    path = again.checkpoint_path("ab" * 32)
    path.write_bytes(path.read_bytes()[:-3])
    cell = again.cell_path("ab" * 32, "cd" * 32)
    cell.write_bytes(cell.read_bytes()[:10])
    assert again.checkpoint("ab" * 32) is None and again.cell("ab" * 32, "cd" * 32) == (False, None)
    assert again.corrupt == [str(path), str(cell)]
    target = tmp_path / "placed.pt"
    cache.put_checkpoint("ab" * 32, source)  # a re-run completes what is missing
    cache.place("ab" * 32, target)
    assert target.read_bytes() == b"state dict bytes"


def test_half_written_table_object_is_not_served(s3_server):
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


def test_store_faults_are_one_line(s3_server, monkeypatch):
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

"""The embedding cache as a feature store: hit/miss per fingerprint field, incremental appends, a real SIGKILL
and resume, concurrent writers, compaction, `drift cache`, and `dvc exp run --temp` reusing the store; an
edit of the encoder's code or a library version is a miss.

Real MiniLM weights and real sotu paragraphs throughout; subprocesses run one torch thread each."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from functools import lru_cache
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
import torch
from typer.testing import CliRunner

from drift.core.params import EmbedParams
from drift.data.records import payload_key
from drift.encoders.embed import EmbedRun, embed_dataset, text_encoder
from drift.store.embeddings import (
    EmbeddingsManifest,
    EmbeddingStore,
    StoreManifest,
    committed,
    open_store,
    table_info,
)
from drift.store.slices import hand_manifest, write_slice_table
from tests.helpers import dvc_params, run

EMBED = {"text_encoder": "minilm-l6", "max_length": 16, "batch_size": 16, "chunk_rows": 32}
CFG = EmbedParams(**EMBED)


@lru_cache(maxsize=1)
def paragraphs() -> tuple[str, ...]:
    from drift.data.datasets import sotu
    from drift.data.ledger import Ledger

    texts = dict.fromkeys(
        r["text"] for r in sotu.read(sotu.PARAMS(min_words=30, start_year=1853), Ledger("sotu"))
    )
    return tuple(texts)


def slice_table(path: Path, texts) -> Path:
    texts = list(texts)
    n = len(texts)
    write_slice_table(
        pa.table(
            {
                "id": [str(i) for i in range(n)],
                "key": [payload_key(t) for t in texts],
                "slice": pa.array([i * 4 // max(n, 1) for i in range(n)], pa.int32()),
                "split": ["train"] * n,
                "label": [i % 2 for i in range(n)],
                "text": texts,
            }
        ),
        path,
        hand_manifest(path.stem),
    )
    return path


@pytest.fixture(scope="module")
def minilm():
    return text_encoder(CFG)


# ---------------------------------------------------------------- hit / miss


@pytest.mark.compute
def test_every_fingerprint_field_is_a_miss_and_nothing_else_is(tmp_path, minilm, monkeypatch):
    import dataclasses

    path = slice_table(tmp_path / "d.lance", paragraphs()[:3])
    cache = tmp_path / "cache"
    base, metrics = embed_dataset(path, CFG, cache, encoder=minilm)
    assert (metrics.computed, metrics.cache_hits) == (3, 0)

    # batch size, chunking and device are not part of the key: all hits
    minilm.batch_size = 2
    again, metrics = embed_dataset(path, EmbedParams(**{**EMBED, "chunk_rows": 1}), cache, encoder=minilm)
    assert (metrics.computed, metrics.cache_hits) == (0, 3) and again == base
    minilm.batch_size = CFG.batch_size

    def miss(change, undo):
        change()
        try:
            manifest, metrics = embed_dataset(path, CFG, cache, encoder=minilm)
        finally:
            undo()
        assert (metrics.computed, metrics.cache_hits) == (3, 0)
        assert manifest.fingerprint != base.fingerprint and manifest.store != base.store
        return manifest

    miss(lambda: setattr(minilm, "max_length", 8), lambda: setattr(minilm, "max_length", 16))
    miss(lambda: setattr(minilm, "dtype", "bfloat16"), lambda: setattr(minilm, "dtype", "float32"))
    spec = minilm.spec
    miss(
        lambda: setattr(minilm, "spec", dataclasses.replace(spec, pooling="cls")),
        lambda: setattr(minilm, "spec", spec),
    )
    # another version of a library the encoder's code imports (or of one they require): a miss
    import drift.core.environment as environment

    real = environment.package_version

    def upgrade(distribution):
        monkeypatch.setattr(
            environment, "package_version", lambda d: "99.0" if d == distribution else real(d)
        )
        minilm._code = None  # the fingerprint's code part is computed once per encoder

    def downgrade():
        monkeypatch.undo()
        minilm._code = None

    for distribution in ("transformers", "tokenizers", "torch"):
        miss(lambda d=distribution: upgrade(d), downgrade)
    fields = {table_info(p)["fingerprint_fields"]["max_length"] for p in cache.glob("*.lance")}
    assert fields == {8, 16}  # each table records the fields it was computed under

    # the same weights under a changed byte: a new checkpoint, a miss
    original = minilm.path
    copy = tmp_path / "weights"
    copy.mkdir()
    for f in original.iterdir():  # everything else shared
        if f.name != "model.safetensors":
            (copy / f.name).symlink_to(f)
    data = bytearray((original / "model.safetensors").read_bytes())
    data[-1] ^= 1  # last byte of the last tensor: still loads, a different checkpoint
    (copy / "model.safetensors").write_bytes(bytes(data))
    changed = text_encoder(EmbedParams(**EMBED, weights={"minilm-l6": str(copy)}))
    manifest, metrics = embed_dataset(path, CFG, cache, encoder=changed)
    assert metrics.computed == 3
    assert manifest.fingerprint_fields["weights_sha256"] != base.fingerprint_fields["weights_sha256"]
    assert len(list(cache.glob("*.lance"))) == 8


@pytest.mark.compute
@pytest.mark.pipeline
def test_editing_the_encoder_code_recomputes_every_row(tmp_path, minilm):
    """The encoder's code is part of its fingerprint: in a copy of the repository, the same code serves the
    store's rows; the text encoder's module edited (token states scaled by 0.5) computes every row again, into
    another table, with other vectors."""
    from drift.core.closure import ROOT

    path = slice_table(tmp_path / "d.lance", paragraphs()[:3])
    cache = tmp_path / "cache"
    base, _ = embed_dataset(path, CFG, cache, encoder=minilm)
    copy = tmp_path / "copy"
    for name in ("drift", "stages"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)

    def embed_in_copy(name):
        env = {**__import__("os").environ, "PYTHONPATH": str(copy)}
        process = subprocess.run(
            [
                sys.executable,
                str(script),
                str(path),
                str(cache),
                str(tmp_path / f"{name}.json"),
                "0",
                json.dumps(EMBED),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert process.returncode == 0, process.stderr
        out = json.loads((tmp_path / f"{name}.json").read_text())
        return {
            "manifest": StoreManifest.model_validate(out["manifest"]),
            "metrics": EmbedRun.model_validate(out["metrics"]),
        }

    same = embed_in_copy("same")
    assert (same["metrics"].computed, same["metrics"].cache_hits) == (0, 3)
    assert same["manifest"].fingerprint == base.fingerprint
    module = copy / "drift/encoders/text.py"
    source = module.read_text()
    assert "hidden = out.last_hidden_state.float()" in source
    module.write_text(
        source.replace(
            "hidden = out.last_hidden_state.float()", "hidden = out.last_hidden_state.float() * 0.5"
        )
    )
    edited = embed_in_copy("edited")
    assert (edited["metrics"].computed, edited["metrics"].cache_hits) == (3, 0)
    assert edited["manifest"].store != base.store
    assert edited["manifest"].fingerprint_fields["code_sha256"] != base.fingerprint_fields["code_sha256"]
    keys = [payload_key(t) for t in paragraphs()[:3]]
    old, new = (
        open_store(base, cache).read_tokens(keys)[0],
        open_store(edited["manifest"], cache).read_tokens(keys)[0],
    )
    np.testing.assert_allclose(new.astype(np.float32), old.astype(np.float32) * 0.5, atol=2e-3)


# ---------------------------------------------------------------- incremental, bit for bit


@pytest.mark.compute
def test_appending_a_slice_embeds_only_new_rows_and_reads_equal_writes(tmp_path, minilm):
    texts = paragraphs()[:40]
    cache = tmp_path / "cache"
    path = slice_table(tmp_path / "d.lance", texts[:30])
    first, metrics = embed_dataset(path, CFG, cache, encoder=minilm)
    assert metrics.computed == 30
    slice_table(path, texts)  # a new slice of 10 rows appended to the raw data
    _, metrics = embed_dataset(path, CFG, cache, encoder=minilm)
    assert (metrics.computed, metrics.cache_hits) == (10, 30)
    # another dataset with some of the same paragraphs: those are not embedded again
    other = slice_table(tmp_path / "other.lance", texts[35:] + paragraphs()[100:105])
    _, metrics = embed_dataset(other, CFG, cache, encoder=minilm)
    assert (metrics.computed, metrics.cache_hits) == (5, 5)

    # what the store returns is what the encoder produced, bit for bit (float32 pooled, float16 tokens)
    keys = [payload_key(t) for t in texts]
    order = np.random.default_rng(0).permutation(len(keys)).tolist() + [3, 3]  # any order, repeats
    store = open_store(first, cache)
    pooled = store.read_pooled([keys[i] for i in order])
    flat, offsets = store.read_tokens([keys[i] for i in order])
    assert flat.dtype == np.float16 and offsets[-1] == len(flat)
    reference = EmbeddingStore(cache, "minilm-l6", first.fingerprint, 384, True)
    for row, i in enumerate(order[:5]):
        p, f, n = minilm.encode_flat([texts[i]])
        np.testing.assert_allclose(pooled[row], p[0], atol=2e-6)
        np.testing.assert_allclose(
            flat[offsets[row] : offsets[row + 1]].astype(np.float32), f.astype(np.float32), atol=2e-3
        )
    ds = lance.dataset(str(reference.path))
    stored = ds.to_table(columns=["key", "tokens"]).to_pydict()
    by_key = dict(zip(stored["key"], stored["tokens"]))
    for row, i in enumerate(order):
        expected = np.asarray(by_key[keys[i]], np.float16)
        assert flat[offsets[row] : offsets[row + 1]].tobytes() == expected.tobytes()


def test_store_round_trip_is_bit_exact_across_commits_and_compaction(tmp_path):
    rng = np.random.default_rng(1)
    store = EmbeddingStore(tmp_path, "enc", "e" * 64, dim=16, with_tokens=True)
    keys = [f"key{i}" for i in range(200)]
    pooled = rng.standard_normal((200, 16)).astype(np.float32)
    tokens = [rng.standard_normal((int(n), 16)).astype(np.float16) for n in rng.integers(1, 40, 200)]
    for start in range(0, 200, 10):  # 20 commits, one fragment each
        store.append(keys[start : start + 10], pooled[start : start + 10], tokens[start : start + 10])
    order = rng.permutation(200)
    reader = EmbeddingStore(tmp_path, "enc", "e" * 64, dim=16, with_tokens=True)
    before = reader.read_pooled([keys[i] for i in order]), reader.read_tokens([keys[i] for i in order])
    assert before[0].tobytes() == pooled[order].tobytes()
    assert before[1][0].tobytes() == np.concatenate([tokens[i] for i in order]).tobytes()
    assert store.maybe_compact() is not None  # 20 small fragments: compacted
    info = table_info(store.path)
    assert info["fragments"] == 1 and info["rows"] == 200
    assert len(list((store.path / "data").iterdir())) == 1  # the small files are gone, not only unreferenced
    # the reader pinned the old version, whose files compaction removed: it re-reads and gets the same bytes
    after = reader.read_pooled([keys[i] for i in order]), reader.read_tokens([keys[i] for i in order])
    assert after[0].tobytes() == before[0].tobytes() and after[1][0].tobytes() == before[1][0].tobytes()
    assert (after[1][1] == before[1][1]).all()


@pytest.mark.compute
def test_batch_size_halves_on_cuda_out_of_memory(minilm, monkeypatch):
    texts = list(paragraphs()[:10])
    expected = minilm.encode(texts)
    real = type(minilm).encode_flat
    sizes = []

    def flaky(self, batch):
        sizes.append(len(batch))
        if len(batch) > 4:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(self, batch)

    monkeypatch.setattr(type(minilm), "encode_flat", flaky)
    minilm.batch_size = 16
    try:
        pooled, flat, lengths = minilm.encode(texts)
        assert minilm.batch_size == 4  # halved twice, and kept for the rest of the run
    finally:
        minilm.batch_size = CFG.batch_size
    assert sizes == [10, 8, 4, 4, 2]
    np.testing.assert_allclose(pooled, expected[0], atol=1e-5)
    assert (lengths == expected[2]).all() and flat.shape == expected[1].shape


# ---------------------------------------------------------------- killed and concurrent processes

DRIVER = """
import json, sys, time
from pathlib import Path
import torch
torch.set_num_threads(1)
from drift.core.params import EmbedParams
from drift.encoders.embed import embed_dataset
from drift.encoders.text import TextEncoder
slice_path, cache, out, delay = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
if delay:  # slow each batch down, so the test can kill the run mid-way
    real = TextEncoder.encode_flat
    TextEncoder.encode_flat = lambda self, texts: (time.sleep(delay), real(self, texts))[1]
cfg = EmbedParams(**json.loads(sys.argv[5]))
manifest, metrics = embed_dataset(Path(slice_path), cfg, Path(cache))
Path(out).write_text(json.dumps({"manifest": manifest.model_dump(), "metrics": metrics.model_dump()}))
"""


def driver(tmp_path: Path, slice_path: Path, cache: Path, name: str, delay: float = 0.0) -> subprocess.Popen:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    return subprocess.Popen(
        [
            sys.executable,
            str(script),
            str(slice_path),
            str(cache),
            str(tmp_path / f"{name}.json"),
            str(delay),
            json.dumps(EMBED),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen, tmp_path: Path, name: str) -> dict:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    out = json.loads((tmp_path / f"{name}.json").read_text())
    return {
        "manifest": StoreManifest.model_validate(out["manifest"]),
        "metrics": EmbedRun.model_validate(out["metrics"]),
    }


def all_vectors(manifest: StoreManifest, cache: Path, keys: list[str]):
    store = open_store(manifest, cache)
    return store.read_pooled(keys), *store.read_tokens(keys)


@pytest.mark.compute
@pytest.mark.pipeline
def test_sigkill_mid_run_resumes_with_only_missing_rows_and_same_vectors(tmp_path, minilm):
    texts = paragraphs()[200:424]
    keys = [payload_key(t) for t in texts]
    path = slice_table(tmp_path / "d.lance", texts)
    killed = driver(tmp_path, path, tmp_path / "cache", "killed", delay=0.1)
    table = None
    deadline = time.time() + 120
    while time.time() < deadline:  # kill once a couple of chunks are committed (version 1 is the empty table)
        tables = list((tmp_path / "cache").glob("*.lance"))
        if tables and committed(tables[0]) and len(list((tables[0] / "_versions").glob("*.manifest"))) >= 3:
            table = tables[0]
            break
        time.sleep(0.02)
    assert table is not None, "the embed run committed nothing"
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert killed.returncode == -signal.SIGKILL
    done = lance.dataset(str(table)).count_rows()
    assert 0 < done < len(texts), "the run was not killed mid-way"

    resumed = driver(tmp_path, path, tmp_path / "cache", "resumed")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the subprocesses, so the same kernels run
    try:  # the uninterrupted run, meanwhile, in this process
        reference, _ = embed_dataset(path, CFG, tmp_path / "ref-cache", encoder=minilm)
    finally:
        torch.set_num_threads(threads)
    resumed = finish(resumed, tmp_path, "resumed")
    assert (resumed["metrics"].computed, resumed["metrics"].cache_hits) == (len(texts) - done, done)
    assert resumed["manifest"] == reference  # deterministic: downstream stages see no change
    assert lance.dataset(str(table)).count_rows() == len(texts)  # no row twice
    got = all_vectors(resumed["manifest"], tmp_path / "cache", keys)
    want = all_vectors(reference, tmp_path / "ref-cache", keys)
    for a, b in zip(got, want):
        assert a.tobytes() == b.tobytes()  # the same batches ran: the same vectors, bit for bit


@pytest.mark.pipeline
def test_two_processes_embedding_at_once_lose_nothing(tmp_path):
    texts = paragraphs()[600:760]
    keys = [payload_key(t) for t in texts]
    path = slice_table(tmp_path / "d.lance", texts)
    first, second = (
        driver(tmp_path, path, tmp_path / "cache", "a"),
        driver(tmp_path, path, tmp_path / "cache", "b"),
    )
    a, b = finish(first, tmp_path, "a"), finish(second, tmp_path, "b")
    assert a["manifest"] == b["manifest"]
    assert a["metrics"].computed + a["metrics"].cache_hits == len(texts)
    store = open_store(a["manifest"], tmp_path / "cache")
    ds = lance.dataset(str(store.path))
    ds.validate()
    stored = ds.to_table(columns=["key"]).column("key").to_pylist()
    assert set(stored) == set(keys)  # every row, perhaps some twice
    before = all_vectors(a["manifest"], tmp_path / "cache", keys)

    result = CliRunner().invoke(cache_app(), ["compact", "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    assert f"{len(stored) - len(keys):,} duplicates removed" in result.output
    assert sorted(
        lance.dataset(str(store.path)).to_table(columns=["key"]).column("key").to_pylist()
    ) == sorted(keys)
    after = all_vectors(a["manifest"], tmp_path / "cache", keys)
    for x, y in zip(before, after):
        assert x.tobytes() == y.tobytes()  # compaction keeps the row readers were already using


WRITER = """
import sys
import numpy as np
from drift.store.embeddings import EmbeddingStore
cache, worker = sys.argv[1], int(sys.argv[2])
store = EmbeddingStore(cache, "enc", "c" * 64, dim=8, with_tokens=True)
for step in range(12):
    ids = [(worker * 7 + step * 5 + j) % 150 for j in range(10)]  # writers overlap on purpose
    rngs = [np.random.default_rng(i) for i in ids]
    store.append([f"k{i}" for i in ids], np.stack([r.standard_normal(8) for r in rngs]).astype(np.float32),
                 [np.full((1 + i % 4, 8), i, np.float16) for i in ids])
"""


@pytest.mark.pipeline
def test_many_writers_racing_to_create_and_append(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    processes = [
        subprocess.Popen(
            [sys.executable, str(script), str(tmp_path), str(w)], stderr=subprocess.PIPE, text=True
        )
        for w in range(4)
    ]
    for p in processes:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    store = EmbeddingStore(tmp_path, "enc", "c" * 64, dim=8, with_tokens=True)
    written = sorted({(w * 7 + s * 5 + j) % 150 for w in range(4) for s in range(12) for j in range(10)})
    assert table_info(store.path)["rows"] == 4 * 12 * 10
    keys = [f"k{i}" for i in written]
    pooled = store.read_pooled(keys)
    assert (
        pooled.tobytes()
        == np.stack([np.random.default_rng(i).standard_normal(8) for i in written])
        .astype(np.float32)
        .tobytes()
    )
    flat, offsets = store.read_tokens(keys)
    assert (np.diff(offsets) == [1 + i % 4 for i in written]).all()
    assert (flat[offsets[:-1], 0] == np.array(written, np.float16)).all()
    assert store.maybe_compact() is not None and table_info(store.path)["rows"] == len(written)


def test_a_table_killed_while_being_created_is_created_again(tmp_path):
    store = EmbeddingStore(tmp_path, "enc", "b" * 64, dim=4, with_tokens=False)
    store.append(["a"], np.ones((1, 4), np.float32))
    shutil.rmtree(store.path / "_versions")  # as if killed before the first commit: data files, no version
    assert not committed(store.path)
    fresh = EmbeddingStore(tmp_path, "enc", "b" * 64, dim=4, with_tokens=False)
    assert fresh.missing(["a", "b"]) == ["a", "b"]
    fresh.append(["b"], np.full((1, 4), 2, np.float32))
    assert table_info(fresh.path)["rows"] == 1 and fresh.read_pooled(["b"]).tolist() == [[2.0] * 4]


def test_appends_are_picked_up_reading_only_new_fragments(tmp_path, monkeypatch):
    import drift.store.embeddings as store_module

    store = EmbeddingStore(tmp_path, "enc", "a" * 64, dim=4, with_tokens=False)
    store.append(["a", "b"], np.zeros((2, 4), np.float32))
    reader = EmbeddingStore(tmp_path, "enc", "a" * 64, dim=4, with_tokens=False)
    assert reader.missing(["a", "c"]) == ["c"]
    scanned = []
    real = store_module._key_column
    monkeypatch.setattr(
        store_module,
        "_key_column",
        lambda ds, fragments=None: scanned.append(fragments) or real(ds, fragments),
    )
    store.append(["c"], np.ones((1, 4), np.float32))
    assert reader.read_pooled(["c", "a"]).tolist() == [[1.0] * 4, [0.0] * 4]  # committed after it was pinned
    assert len(scanned) == 1 and len(scanned[0]) == 1  # the new fragment only
    store_module.compact_table(store.path)
    assert reader.missing(["a", "b", "c", "d"]) == ["d"] and scanned[-1] is None  # a rewrite: every key again


# ---------------------------------------------------------------- drift cache


def cache_app():
    from drift.cli.cache import cache_app

    return cache_app


@pytest.mark.compute
def test_drift_cache_list_compact_and_gc(tmp_path, monkeypatch, minilm):
    cache = tmp_path / "cache"
    repo = tmp_path / "repo"
    (repo / "data/embeddings").mkdir(parents=True)
    manifest, _ = embed_dataset(
        slice_table(tmp_path / "d.lance", paragraphs()[:5]), CFG, cache, encoder=minilm
    )
    (repo / "data/embeddings/sotu.json").write_text(
        EmbeddingsManifest(encoders={"minilm-l6": manifest}).dumps()
    )
    unused = EmbeddingStore(cache, "enc", "d" * 64, dim=4, with_tokens=False)
    for i in range(3):
        unused.append([f"k{i}", "k0"], np.zeros((2, 4), np.float32))
    monkeypatch.chdir(repo)
    runner = CliRunner()

    listed = runner.invoke(cache_app(), ["list", "--json", "--cache-dir", str(cache)])
    assert listed.exit_code == 0, listed.output
    tables = {t["table"]: t for t in json.loads(listed.stdout)}
    used = tables[manifest.store]
    assert (used["encoder"], used["rows"], used["dim"], used["datasets"]) == ("minilm-l6", 5, 384, ["sotu"])
    assert used["fingerprint"] == manifest.fingerprint and used["fragments"] >= 1 and used["bytes"] > 0
    assert tables[unused.path.name]["rows"] == 6 and tables[unused.path.name]["unique"] == 3
    # bare `drift cache`
    shown = runner.invoke(cache_app(), [], env={"DRIFT_CACHE_DIR": str(cache), "COLUMNS": "200"})
    assert shown.exit_code == 0 and "minilm-l6" in shown.output and "sotu" in shown.output

    compacted = runner.invoke(cache_app(), ["compact", unused.path.stem, "--cache-dir", str(cache)])
    assert compacted.exit_code == 0 and "3 duplicates removed, fragments 3 → 1" in compacted.output

    dry = runner.invoke(cache_app(), ["gc", "--dry-run", "--grace-minutes", "0", "--cache-dir", str(cache)])
    assert dry.exit_code == 0 and f"would delete {unused.path.name}" in dry.output and unused.path.exists()
    recent = runner.invoke(cache_app(), ["gc", "--cache-dir", str(cache)])  # written a moment ago: kept
    assert recent.exit_code == 0 and unused.path.exists() and "keep" in recent.output
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"store": unused.path.name}))
    kept = runner.invoke(
        cache_app(), ["gc", "--grace-minutes", "0", "--keep-manifests", str(other), "--cache-dir", str(cache)]
    )
    assert kept.exit_code == 0 and unused.path.exists()
    gone = runner.invoke(cache_app(), ["gc", "--grace-minutes", "0", "--cache-dir", str(cache)])
    assert gone.exit_code == 0 and not unused.path.exists() and (cache / manifest.store).exists()

    # clear one-line errors
    monkeypatch.chdir(tmp_path)
    for args, message in [
        (["gc", "--cache-dir", str(cache)], "refusing to delete every table"),
        (["compact", "nope", "--cache-dir", str(cache)], "no table nope.lance"),
        (
            ["gc", "--keep-manifests", "missing.json", "--cache-dir", str(cache)],
            "no manifest at missing.json",
        ),
    ]:
        result = runner.invoke(cache_app(), args)
        assert result.exit_code == 2 and message in result.output, result.output
        assert len(result.stderr.strip().splitlines()) == 1
    assert runner.invoke(cache_app(), ["list", "--cache-dir", str(tmp_path / "none")]).exit_code == 0


def test_a_manifest_whose_table_is_gone_is_a_clear_error(tmp_path):
    from drift.core.errors import DriftError

    with pytest.raises(DriftError, match="run `dvc repro -f embed@<dataset>`"):
        open_store(
            StoreManifest(
                encoder="minilm-l6",
                fingerprint="0" * 64,
                fingerprint_fields={},
                store="gone",
                dim=384,
                rows=3,
                keys_sha256="",
            ),
            tmp_path,
        )


# ---------------------------------------------------------------- dvc exp run --temp


@pytest.mark.compute
@pytest.mark.pipeline
def test_temp_experiments_reuse_the_store(project):
    """sotu over three decades (conftest.dvc_params), ffn-s; the first run stops at embed@sotu (train,
    evaluate and report add nothing to what is checked: the temporary experiments' embed stage)."""
    params = dvc_params("sotu")
    params["train"]["models"] = {"sotu": ["ffn-s"]}
    repo = project(params)
    run(["dvc", "repro", "embed@sotu"], repo)
    first = json.loads((repo / ".drift/runs/embed/sotu-minilm-l6.json").read_text())
    assert first["computed"] == first["unique"] > 0
    run(["git", "add", "-A"], repo)
    run(["git", "commit", "-qm", "first run"], repo)

    # a training change in a temporary workspace: train runs, the embed stage does not even run (its outputs,
    # the manifest and the feature files, are in DVC's cache, which the temporary copy checks out)
    out = run(
        ["dvc", "exp", "run", "--temp", "-n", "epochs", "-S", "train.epochs=2", "train@sotu"], repo
    ).stdout
    assert "Running stage 'train@sotu'" in out and "Running stage 'embed@sotu'" not in out, out

    # more rows per decade in a temporary workspace: only the new paragraphs run the encoder
    run(["dvc", "exp", "run", "--temp", "-n", "bigger", "-S", "sotu.cap_per_slice=30", "embed@sotu"], repo)
    bigger = experiment_metrics(repo, "bigger")
    assert bigger["unique"] > first["unique"] and 0 < bigger["computed"] < bigger["unique"]
    assert bigger["cache_hits"] >= first["unique"] * 0.9


def experiment_metrics(repo: Path, name: str) -> dict:
    """The embed run record of a finished experiment, kept in the main repository (also for --temp)."""
    return json.loads((repo / f".drift/runs/exps/{name}/embed/sotu-minilm-l6.json").read_text())

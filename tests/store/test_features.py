"""Feature files (drift/store/features.py) and the batch reader (drift/models/inputs.py): the same floats
reach the models as from the store held in memory, bit for bit; rebuilt only when the rows or the store table
change; the prefetching iterator keeps order, bounds its lookahead, raises the reader's errors and stops when
left.

Real MiniLM weights on real sotu paragraphs (tests/store/test_cache.py's helpers)."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pyarrow as pa
import pytest
import torch

from drift.core.errors import DriftError
from drift.core.params import EmbedParams, TrainParams, load_params
from drift.data.records import payload_key, record_schema
from drift.encoders.embed import embed_dataset, text_encoder
from drift.models.inputs import (
    length_bucketed_batches,
    load_inputs,
    open_inputs,
    prefetched,
)
from drift.store.embeddings import EmbeddingsManifest, open_store
from drift.store.features import (
    DiskArray,
    ensure_features,
    is_current,
    keys_sha256,
    write_features,
)
from drift.store.slices import hand_manifest, read_slice_table, write_slice_table

CFG = EmbedParams(text_encoder="minilm-l6", max_length=64, batch_size=16, chunk_rows=16)


def paragraphs(n: int, skip: int = 0) -> list[str]:
    from drift.data.datasets import sotu
    from drift.data.ledger import Ledger

    texts = list(
        dict.fromkeys(r["text"] for r in sotu.read(sotu.PARAMS(min_words=5, start_year=1853), Ledger("sotu")))
    )
    return texts[skip : skip + n]


def text_table(path, texts, k=4):
    n = len(texts)
    write_slice_table(
        pa.table(
            {
                "id": [str(i) for i in range(n)],
                "key": [payload_key(t) for t in texts],
                "slice": pa.array([i * k // n for i in range(n)], pa.int32()),
                "split": ["train" if i % 3 else "test" for i in range(n)],
                "label": [i % 2 for i in range(n)],
                "text": texts,
            }
        ),
        path,
        hand_manifest(path.stem, [str(s) for s in range(k)], label_names=["no", "yes"]),
    )
    return path


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal to the bit (torch.equal takes -0.0 for 0.0)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype == torch.float32:
        return torch.equal(a.view(torch.int32), b.view(torch.int32))
    return torch.equal(a, b)


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    """A slice table of 60 paragraphs (one repeated), embedded with MiniLM, and its feature files."""
    tmp = tmp_path_factory.mktemp("features")
    texts = paragraphs(59)
    texts = texts + [texts[7]]  # a repeated text: the same key on two rows
    path = text_table(tmp / "d.lance", texts)
    cache = tmp / "cache"
    manifest, _ = embed_dataset(path, CFG, cache, encoder=text_encoder(CFG))
    headers = write_features(path, {"minilm-l6": manifest}, cache, tmp / "features")
    return tmp, path, cache, manifest, headers


def batches_to_check(n: int, lengths: np.ndarray) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    last = int(np.argmax(np.arange(n)))  # the last row: its padding runs past the end of the file
    longest = int(np.argmax(lengths))
    return [
        rng.permutation(n)[:16],
        np.array([last, 0, longest]),
        np.array([3, 3, 59, 7]),
        np.arange(n),
        np.array([n - 1]),
        np.sort(rng.permutation(n)[:20]),
    ] + length_bucketed_batches(np.arange(n), lengths, 8, rng)


@pytest.mark.compute
@pytest.mark.parametrize("max_tokens", [64, 9])
def test_feature_files_give_the_stores_batches_bit_for_bit(embedded, max_tokens):
    tmp, path, cache, manifest, headers = embedded
    table = read_slice_table(path)
    store = open_store(manifest, cache)
    for kind in ("tokens", "pooled"):
        old = load_inputs(kind, table, store, max_tokens=max_tokens)
        new = open_inputs(kind, tmp / "features" / "minilm-l6", max_tokens=max_tokens)
        assert isinstance(new.data, DiskArray) and new.spec() == old.spec()
        if kind == "tokens":
            np.testing.assert_array_equal(new.lengths, old.lengths)
            assert (old.lengths < np.diff(old.offsets)).any() == (max_tokens == 9)  # truncation is exercised
        for rows in batches_to_check(
            table.num_rows, old.lengths if kind == "tokens" else np.ones(table.num_rows)
        ):
            a, b = old.batch(rows), new.batch(rows)
            assert len(a) == len(b) and all(same_bits(x, y) for x, y in zip(a, b)), (kind, rows)
    assert headers["minilm-l6"]["rows"] == 60 and headers["minilm-l6"]["fingerprint"] == manifest.fingerprint
    # standard .npy: NumPy memory-maps them too
    tokens = np.load(tmp / "features" / "minilm-l6" / "tokens.npy", mmap_mode="r")
    flat, offsets = store.read_tokens(table.column("key"))
    np.testing.assert_array_equal(np.asarray(tokens), flat)


@pytest.mark.compute
def test_training_and_prediction_are_bit_identical(embedded):
    from drift.evaluate.predict import predict
    from drift.protocol.tasks import get_task
    from drift.train.loop import train_one

    tmp, path, cache, manifest, _ = embedded
    table = read_slice_table(path)
    store = open_store(manifest, cache)
    targets = get_task("binary").target_tensor(table.column("label").to_pylist())
    rows = np.arange(0, 60, 3)  # both labels (i % 2)
    task = get_task("binary")
    torch.set_num_threads(1)
    for name, kind in (
        ("ffn-s", "tokens"),
        ("tx-s", "tokens"),
        ("bigru-s", "tokens"),
        ("probe-minilm", "pooled"),
    ):
        models = []
        for inputs in (
            load_inputs(kind, table, store, max_tokens=16),
            open_inputs(kind, tmp / "features" / "minilm-l6", max_tokens=16),
        ):
            model = train_one(
                name,
                inputs,
                rows,
                targets,
                task,
                task.n_outputs(2),
                TrainParams(epochs=2, batch_size=8, lr=1e-3),
                seed=3,
            )
            models.append((model, predict(model, inputs, np.arange(60), batch_size=16)))
        (a, pa_), (b, pb) = models
        assert all(same_bits(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values())), name
        assert np.array_equal(pa_.view(np.int32), pb.view(np.int32)), name


def test_pixels_out_of_core(tmp_path):
    rng = np.random.default_rng(0)
    n, shape = 50, (3, 8, 6)
    images = rng.integers(0, 256, (n, *shape), dtype=np.uint8)
    schema = record_schema("binary", "image", 2, image_shape=shape)
    table = pa.table(
        {
            "id": [str(i) for i in range(n)],
            "key": [payload_key(im) for im in images],
            "time": pa.array([0] * n, pa.timestamp("us")),
            "label": [i % 2 for i in range(n)],
            "image": [im.reshape(-1).tolist() for im in images],
        },
        schema=schema,
    )
    table = table.append_column("slice", pa.array([i // 10 for i in range(n)], pa.int32()))
    table = table.append_column("split", pa.array(["train"] * n))
    path = tmp_path / "img.lance"
    write_slice_table(table, path, hand_manifest("img", modality="image"))
    headers = write_features(path, {}, None, tmp_path / "features", modality="image")
    assert headers["pixels"]["image_shape"] == list(shape)
    old = load_inputs("pixels", read_slice_table(path))
    new = open_inputs("pixels", tmp_path / "features" / "pixels")
    assert new.spec() == old.spec()
    for rows in (np.arange(n), np.array([49, 0, 0, 17]), rng.permutation(n)[:7]):
        assert same_bits(old.batch(rows)[0], new.batch(rows)[0])


@pytest.mark.compute
def test_rebuilt_only_when_rows_or_store_change(embedded, tmp_path):
    src, path, cache, manifest, _ = embedded
    out = tmp_path / "features"
    keys = read_slice_table(path, columns=["key"]).column("key")
    built = ensure_features("tokens", path, keys, out, manifest, cache)
    stamp = (built / "tokens.npy").stat().st_mtime_ns
    assert ensure_features("tokens", path, keys, out, manifest, cache) == built
    assert (built / "tokens.npy").stat().st_mtime_ns == stamp  # current: nothing written
    # other rows (a reordered table): stale, rebuilt for them
    reordered = pa.chunked_array([keys.combine_chunks().take(np.arange(59, -1, -1))])
    assert not is_current(built, keys_sha256(reordered), manifest)
    # another store table (new fingerprint) for the same rows: stale
    assert not is_current(built, keys_sha256(keys), manifest.model_copy(update={"fingerprint": "0" * 64}))
    # an encoder no longer in the manifest: its directory goes
    (out / "old-encoder").mkdir()
    (out / "old-encoder" / "header.json").write_text(json.dumps({}))
    write_features(path, {"minilm-l6": manifest}, cache, out)
    assert sorted(p.name for p in out.iterdir()) == ["minilm-l6"]


def test_disk_array_reads_rows_and_spans(tmp_path):
    data = np.arange(40 * 3, dtype=np.float32).reshape(40, 3)
    np.save(tmp_path / "a.npy", data)
    disk = DiskArray(tmp_path / "a.npy")
    assert disk.shape == (40, 3) and disk.dtype == np.float32
    for rows in (np.arange(40), np.array([5, 6, 7, 1, 39, 5]), np.array([], np.int64)):
        np.testing.assert_array_equal(disk.read_rows(rows), data[rows])
    starts = np.array([38, 0, 20, 39])
    np.testing.assert_array_equal(
        disk.read_spans(starts, 4), data[np.minimum(starts[:, None] + np.arange(4), 39)]
    )
    # a file cut short (a copy interrupted) is a one-line error, not zeros
    raw = (tmp_path / "a.npy").read_bytes()
    (tmp_path / "b.npy").write_bytes(raw[:-12])
    with pytest.raises(DriftError, match="shorter than its header"):
        DiskArray(tmp_path / "b.npy").read_rows(np.array([39]))


def test_missing_feature_files_are_a_clear_error(tmp_path):
    with pytest.raises(DriftError, match="no feature files"):
        open_inputs("tokens", tmp_path / "nothing")


# ---------------------------------------------------------------- prefetching


def test_prefetch_keeps_order_and_bounds_lookahead():
    loaded, used = [], []

    def load(i):
        loaded.append(i)
        return i * 10

    for item, value in prefetched(range(20), load, depth=3):
        time.sleep(0.002)  # the consumer is slower: the reader runs as far ahead as it may
        assert value == item * 10
        assert len(loaded) - len(used) <= 3 + 2  # queued + being loaded + this one
        used.append(item)
    assert used == list(range(20))
    assert list(prefetched(range(5), load, depth=0)) == [(i, i * 10) for i in range(5)]


def test_prefetch_raises_the_readers_error_and_stops_when_left():
    def broken(i):
        if i == 4:
            raise DriftError("row 4 unreadable")
        return i

    got = []
    with pytest.raises(DriftError, match="row 4"):
        for item, _ in prefetched(range(10), broken, depth=2):
            got.append(item)
    assert got == [0, 1, 2, 3]
    before = threading.active_count()
    for item, _ in prefetched(range(10_000), lambda i: i, depth=2):
        if item == 3:
            break
    assert threading.active_count() == before  # the reader thread ended with the loop


@pytest.mark.compute
def test_inputs_prefetch_matches_batch_and_moves_to_a_device(embedded):
    tmp, *_ = embedded
    inputs = open_inputs("tokens", tmp / "features" / "minilm-l6", max_tokens=16)
    batches = length_bucketed_batches(np.arange(60), inputs.lengths, 8, np.random.default_rng(1))
    got = list(inputs.prefetch(batches, depth=2, device="cpu", pin=False))
    assert [r.tolist() for r, _ in got] == [b.tolist() for b in batches]
    for (_, (x, mask)), rows in zip(got, batches):
        ex, em = inputs.batch(rows)
        assert same_bits(x, ex) and torch.equal(mask, em) and x.device.type == "cpu"
    if torch.cuda.is_available():  # pinned memory, non-blocking copies: same values on the device
        rows, (x, mask) = next(iter(inputs.prefetch(batches, device="cuda")))
        assert x.is_cuda and same_bits(x.cpu(), inputs.batch(rows)[0])


@pytest.mark.compute
def test_slice_data_builds_and_reads_the_feature_files(embedded, tmp_path, monkeypatch):
    """The train and evaluate stages' view: data/features/<dataset> is written on first use (when the embed
    stage has not), then read; its batches are the store's."""
    import shutil

    from drift.models.slice_data import SliceData, input_settings
    from tests.helpers import tiny_params

    src, path, cache, manifest, _ = embedded
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data" / "slices").mkdir(parents=True)
    (tmp_path / "data" / "embeddings").mkdir()
    shutil.copy(path, "data/slices/sotu.lance")
    shutil.copy(path.with_suffix(".json"), "data/slices/sotu.json")
    (tmp_path / "data" / "embeddings" / "sotu.json").write_text(
        EmbeddingsManifest(encoders={"minilm-l6": manifest}).dumps()
    )
    params = tiny_params()
    params["embed"].update(cache_dir=str(cache), max_length=64)
    data = SliceData("sotu", input_settings(load_params(params)))
    inputs = data.inputs("ffn-s")
    assert (
        isinstance(inputs.data, DiskArray)
        and (tmp_path / "data/features/sotu/minilm-l6/header.json").exists()
    )
    assert data.inputs("probe-minilm").kind == "pooled"
    old = load_inputs("tokens", read_slice_table(path), open_store(manifest, cache), max_tokens=64)
    rows = np.random.default_rng(2).permutation(60)[:10]
    assert all(same_bits(a, b) for a, b in zip(old.batch(rows), inputs.batch(rows)))

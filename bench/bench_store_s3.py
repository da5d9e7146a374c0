"""The embedding store on object storage against the store on local disk, measured in the same run.

A local S3-compatible server (moto's standalone server on 127.0.0.1, the one the tests use) and a temporary
folder each receive the same rows through EmbeddingStore.append (one Lance commit per chunk, token states
included), then a fresh EmbeddingStore reads them all back (pooled vectors and token states, by key). Printed:
append rows/s and read rows/s on each, and S3's rate as a fraction of local disk's. Best of --repeats,
interleaved. moto is a Python server on the same cores: a real endpoint's latency and bandwidth differ, the
ratio bounds what the store's own code costs on object storage. Figures: bench/README.md,
docs/how-to/store-on-s3.md.

    python bench/bench_store_s3.py            # 5,000 rows of 384 dims, up to 32 tokens each, chunks of 500
    python bench/bench_store_s3.py --quick    # 600 rows of 64 dims, 8 tokens each, chunks of 100: seconds
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drift.core.environment import pin_cpu_code_path  # noqa: E402

pin_cpu_code_path()  # the stages' CPU path (compute.cpu_path portable) for whatever this run computes

from drift.core.objectstore import ObjectPath  # noqa: E402
from drift.store.embeddings import EmbeddingStore  # noqa: E402

BUCKET = "drift-bench"


def start_server():
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    os.environ.update(
        AWS_ENDPOINT_URL=url,
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_REGION="us-east-1",
        AWS_ALLOW_HTTP="true",
    )
    boto3.client("s3", endpoint_url=url, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    return server


def make_rows(n: int, dim: int, tokens: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    keys = [uuid.UUID(int=int(rng.integers(1 << 62)) << 64 | i).hex for i in range(n)]
    pooled = rng.standard_normal((n, dim), dtype=np.float32)
    lengths = rng.integers(tokens // 2, tokens + 1, n).astype(np.int32)
    flat = rng.standard_normal((int(lengths.sum()), dim), dtype=np.float32).astype(np.float16)
    return keys, pooled, flat, lengths


def append_all(root, rows, chunk: int, dim: int) -> float:
    keys, pooled, flat, lengths = rows
    store = EmbeddingStore(root, "bench", "e" * 64, dim, with_tokens=True)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    start = time.perf_counter()
    for i in range(0, len(keys), chunk):
        j = min(i + chunk, len(keys))
        store.append(keys[i:j], pooled[i:j], flat[offsets[i] : offsets[j]], lengths[i:j])
    return time.perf_counter() - start


def read_all(root, rows, dim: int) -> float:
    keys, pooled, flat, _ = rows
    start = time.perf_counter()
    store = EmbeddingStore(root, "bench", "e" * 64, dim, with_tokens=True)
    got_pooled = store.read_pooled(keys)
    got_flat, _ = store.read_tokens(keys)
    elapsed = time.perf_counter() - start
    assert np.array_equal(got_pooled, pooled) and np.array_equal(got_flat, flat), "read back other bytes"
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", type=int)
    parser.add_argument("--chunk", type=int)
    parser.add_argument("--dim", type=int)
    parser.add_argument("--tokens", type=int)
    parser.add_argument("--repeats", type=int)
    args = parser.parse_args()
    quick = dict(rows=600, chunk=100, dim=64, tokens=8, repeats=2)
    full = dict(rows=5_000, chunk=500, dim=384, tokens=32, repeats=3)
    cfg = {
        k: getattr(args, k) if getattr(args, k) is not None else v
        for k, v in (quick if args.quick else full).items()
    }
    rows = make_rows(cfg["rows"], cfg["dim"], cfg["tokens"])
    nbytes = rows[1].nbytes + rows[2].nbytes
    server = start_server()
    tmp = Path(tempfile.mkdtemp(prefix="bench-store-s3-"))
    best: dict[tuple[str, str], list[float]] = {
        ("append", "local"): [],
        ("append", "s3"): [],
        ("read", "local"): [],
        ("read", "s3"): [],
    }
    try:
        for r in range(cfg["repeats"]):
            for where in ("local", "s3"):
                root = tmp / f"r{r}" if where == "local" else ObjectPath(f"s3://{BUCKET}/r{r}")
                best[("append", where)].append(append_all(root, rows, cfg["chunk"], cfg["dim"]))
                best[("read", where)].append(read_all(root, rows, cfg["dim"]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        server.stop()
    n = cfg["rows"]
    print(
        f"{n:,} rows of {cfg['dim']} dims with up to {cfg['tokens']} float16 token states each "
        f"({nbytes / 2**20:.1f} MiB), chunks of {cfg['chunk']:,} rows (one commit each), best of {cfg['repeats']}; "
        "S3 = moto's server on 127.0.0.1"
    )
    for step, what in (
        ("append", f"append {n:,} rows in {-(-n // cfg['chunk'])} commits"),
        ("read", f"read {n:,} rows (pooled + tokens, a fresh store)"),
    ):
        local, s3 = n / min(best[(step, "local")]), n / min(best[(step, "s3")])
        number = 1 if step == "append" else 2
        print(
            f"{number}. {what}: local disk {local:,.0f} rows/s, S3 {s3:,.0f} rows/s: S3 at {s3 / local:.2f}x local"
        )


if __name__ == "__main__":
    main()

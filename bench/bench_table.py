"""The table reader (polars, drift/data/datasets/table.py) against the Amazon reader's line-by-line and fast
paths (drift/data/datasets/amazon.py, _io.py, _fast.py) on the same JSON-lines file, in the same run.

Grows the Amazon Reviews 2023 fixture to N rows (new timestamps and users), then runs the whole ingest
(reader, span filter, duplicate check, Parquet records) once per reader, each in its own subprocess so its
peak RSS is its own (os.wait4), beside its peak anonymous memory (RssAnon, sampled): polars maps a JSON-lines
file, and its pages count in RSS without being the reader's allocations. The table reader is configured as a
user would for that file: text [title, text], label rating (regression), time epoch_ms, id the reader's
default <file>:<row>.

    python bench/bench_table.py              # 1,000,000 rows
    python bench/bench_table.py --quick      # 20,000 rows: a smoke run (tests/project/test_bench.py)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "amazon2023"
SPAN = {"unit": "year", "start": 1990, "end": 2030}
READERS = ("line", "fast", "table")


def grow(n: int, path: Path) -> None:
    """n rows of Amazon Reviews 2023 JSON lines: the fixture's rows over and over, each with a new time and
    user."""
    rows = [
        json.loads(line) for line in (FIXTURES / "All_Beauty.jsonl").read_text().splitlines() if line.strip()
    ]
    with open(path, "w", encoding="utf-8") as f:
        for k in range(n):
            row = dict(rows[k % len(rows)])
            row["timestamp"] = 1_400_000_000_000 + k * 1000
            row["user_id"] = f"U{k}"
            f.write(json.dumps(row) + "\n")


def anonymous_mb() -> float:
    """This process's anonymous resident memory (RssAnon): its own allocations, not the file pages a reader
    maps."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssAnon")) / 1024


def child(kind: str, folder: Path) -> dict:
    from drift.core.params import parse
    from drift.data.datasets import dataset_params
    from drift.data.datasets.table import TableParams
    from drift.data.ingest import ingest

    out = Path(tempfile.mkdtemp(prefix="bench-table-"))
    peak, done = [0.0], threading.Event()

    def sample():
        while not done.wait(0.02):
            peak[0] = max(peak[0], anonymous_mb())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    if kind == "table":
        cfg = parse(
            TableParams,
            {
                "source": str(folder / "All_Beauty.jsonl"),
                "time": "timestamp",
                "time_encoding": "epoch_ms",
                "text": ["title", "text"],
                "label": "rating",
                "task": "regression",
                "slices": SPAN,
            },
            "bench",
        )
        counts = ingest("bench", cfg, out / "r.parquet", out / "q.parquet")
    else:
        cfg = dataset_params("amazon", {"source": str(folder), "categories": ["All_Beauty"], "slices": SPAN})
        counts = ingest("amazon", cfg, out / "r.parquet", out / "q.parquet", fast=kind == "fast")
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    return {"seconds": seconds, "peak_anon_mb": peak[0], "kept": counts["kept"], "read": counts["read"]}


def measure(kind: str, folder: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", kind, str(folder)], stdout=subprocess.PIPE, env=env
    )
    _, status, usage = os.wait4(proc.pid, 0)  # this child's rusage alone
    if status != 0:
        raise SystemExit(f"{kind} failed (status {status})")
    assert proc.stdout is not None  # stdout=PIPE
    result = json.loads(proc.stdout.read())
    return {**result, "peak_rss_mb": usage.ru_maxrss / 1024}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="20,000 rows")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], Path(args.child[1]))))
        return {}
    n = 20_000 if args.quick else args.rows
    with tempfile.TemporaryDirectory(prefix="bench-table-") as tmp:
        folder = Path(tmp)
        grow(n, folder / "All_Beauty.jsonl")
        size_mb = (folder / "All_Beauty.jsonl").stat().st_size / 2**20
        results = {kind: measure(kind, folder) for kind in READERS}
    print(f"{n:,} rows, {size_mb:.0f} MB of JSON lines")
    for kind, r in results.items():
        print(
            f"  {kind:6s} {r['seconds']:7.1f} s  peak RSS {r['peak_rss_mb']:6.0f} MB "
            f"(anonymous {r['peak_anon_mb']:5.0f} MB)  "
            f"kept {r['kept']:,} of {r['read']:,}"
        )
    return {"rows": n, "mb": size_mb, **results}


if __name__ == "__main__":
    main()

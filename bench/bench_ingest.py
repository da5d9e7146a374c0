"""Ingest benchmark: the line-by-line path, the fast path (1 and 2 parser threads) and
pandas.read_json(lines=True), on the same files in the same run.

Grows the real Amazon Reviews 2023 and arXiv fixtures (tests/fixtures/) 1x, 4x, 16x a base size, in their
on-disk format; each reader runs in its own subprocess (peak RSS from os.wait4). Our paths run the whole
ingest stage and must write byte-identical records; pandas only parses. Figures: bench/README.md.

    python bench/bench_ingest.py            # --scale 10: the base is 10 copies of each fixture
    python bench/bench_ingest.py --quick    # 1 copy of each fixture, one size: seconds
"""

from __future__ import annotations

import argparse
import datetime as dt
import email.utils
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"

try:
    import orjson

    def dumps(obj) -> bytes:
        return orjson.dumps(obj)
except ImportError:

    def dumps(obj) -> bytes:
        return json.dumps(obj).encode()


def fixture_rows(dataset: str) -> list[dict]:
    import gzip

    if dataset == "amazon":
        rows = []
        for p in sorted((FIXTURES / "amazon2023").iterdir()):
            opener = gzip.open if p.suffix == ".gz" else open
            with opener(p, "rt", encoding="utf-8") as f:
                rows += [json.loads(line) for line in f if line.strip()]
        return rows
    with open(FIXTURES / "arxiv" / "arxiv-metadata-sample.json", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def grow(dataset: str, rows: list[dict], copies: int, path: Path) -> int:
    """Writes `copies` copies of the rows, each copy with new ids and times shifted by k seconds."""
    n = 0
    with open(path, "wb") as f:
        for k in range(copies):
            for row in rows:
                r = dict(row)
                if dataset == "amazon":
                    r["user_id"] = f"{row['user_id']}-{k}"
                    r["timestamp"] = row["timestamp"] + 1000 * k
                else:
                    r["id"] = f"{row['id']}-{k}"
                    first = email.utils.parsedate_to_datetime(row["versions"][0]["created"])
                    r["versions"] = [
                        {
                            "version": "v1",
                            "created": email.utils.format_datetime(
                                first + dt.timedelta(seconds=k), usegmt=True
                            ),
                        }
                    ] + row["versions"][1:]
                f.write(dumps(r) + b"\n")
                n += 1
    return n


READERS = ["line", "fast-1", "fast-2", "pandas"]  # fast-N: the fast path on N parser threads


def child(kind: str, dataset: str, path: str) -> None:
    """Runs in the subprocess: read the file, print lines read, rows kept, seconds, RSS after imports."""
    import hashlib
    import resource

    if kind != "pandas":
        # the whole ingest stage: reader, time-span filter, duplicate check, Parquet records in batches
        import tempfile

        from drift.data.datasets import dataset_params
        from drift.data.ingest import ingest

        p = Path(path)
        cfg: dict[str, object] = (
            {"source": str(p.parent), "categories": [p.name.removesuffix(".jsonl")]}
            if dataset == "amazon"
            else {"source": path}
        )
        cfg["slices"] = {"unit": "year", "start": 1900, "end": 2100}
        import_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as out:
            counts = ingest(
                dataset,
                dataset_params(dataset, cfg),
                Path(out) / "records.parquet",
                Path(out) / "quarantine.parquet",
                fast=kind != "line",
            )
            seconds = time.perf_counter() - t0
            digest = hashlib.sha256((Path(out) / "records.parquet").read_bytes()).hexdigest()
        lines, kept = counts["read"], counts["kept"]
    else:
        import pandas as pd

        import_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        df = pd.read_json(path, lines=True)
        seconds = time.perf_counter() - t0
        lines = kept = len(df)
        digest = None
    print(
        json.dumps(
            {
                "lines": lines,
                "kept": kept,
                "seconds": seconds,
                "import_mb": import_kb / 1024,
                "records_sha256": digest,
            }
        )
    )


def measure(kind: str, dataset: str, path: Path) -> dict:
    """Runs one reader in a fresh subprocess; returns its report plus its own peak RSS in MB."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    if kind.startswith("fast-"):
        env["DRIFT_INGEST_THREADS"] = kind.removeprefix("fast-")
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", kind, dataset, str(path)], stdout=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None  # stdout=PIPE
    out = proc.stdout.read()
    _, status, usage = os.wait4(
        proc.pid, 0
    )  # this child's rusage alone (RUSAGE_CHILDREN keeps a running max)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{kind} reader failed on {path} (exit {proc.returncode})")
    report = json.loads(out)
    report["peak_mb"] = usage.ru_maxrss / 1024  # Linux: KiB
    report["cpu_s"] = usage.ru_utime + usage.ru_stime
    return report


QUICK = {"scale": 1, "sizes": "1"}  # --quick: both datasets, one copy of each fixture


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--scale", type=int, default=10, help="copies of each fixture in the 1x input (default 10)"
    )
    ap.add_argument("--sizes", default="1,4,16", help="multiples of the base input (default 1,4,16)")
    ap.add_argument("--datasets", default="amazon,arxiv")
    ap.add_argument("--child", nargs=3, metavar=("KIND", "DATASET", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help=f"tiny sizes, the same code path: {QUICK}")
    args = ap.parse_args(argv)
    if args.quick:  # the quick sizes as defaults: options given explicitly still win
        ap.set_defaults(**QUICK)
        args = ap.parse_args(argv)
    if args.child:
        child(*args.child)
        return

    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"ingest bench: scale {args.scale}, sizes {sizes}, python {sys.version.split()[0]}, "
        f"{os.cpu_count()} cores; line = line-by-line ingest (orjson), fast-N = fast path on N parser threads, "
        f"pandas = pd.read_json(lines=True) alone",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="drift-bench-") as tmp:
        results = []
        for dataset in args.datasets.split(","):
            rows = fixture_rows(dataset)
            for size in sizes:
                name = "Bench.jsonl" if dataset == "amazon" else "arxiv-metadata-oai-snapshot.json"
                folder = Path(tmp) / f"{dataset}-{size}x"
                folder.mkdir()
                path = folder / name
                n = grow(dataset, rows, args.scale * size, path)
                runs = {kind: measure(kind, dataset, path) for kind in READERS}
                assert all(r["lines"] == n for r in runs.values()), (runs, n)
                ours = [runs[k] for k in READERS if k != "pandas"]
                assert len({(r["kept"], r["records_sha256"]) for r in ours}) == 1, (
                    "fast and line records differ"
                )
                results.append((dataset, size, n, path.stat().st_size / 2**20, runs))
                path.unlink()  # keep the temp dir small
                print(f"  {dataset} {size}x done", file=sys.stderr, flush=True)

        cols = "".join(f" | {k + ' lines/s':>15} {'RSS MB':>7}" for k in READERS)
        header = (
            f"{'dataset':8} {'size':>5} {'lines':>9} {'MB':>6}{cols} | {'fast/pandas':>11} {'fast/line':>9} "
            f"{'2thr/1thr':>9}"
        )
        print(header)
        print("-" * len(header))
        for dataset, size, n, mb, runs in results:
            speed = {k: n / r["seconds"] for k, r in runs.items()}
            cells = "".join(f" | {speed[k]:>15,.0f} {runs[k]['peak_mb']:>7.0f}" for k in READERS)
            print(
                f"{dataset:8} {size:>4}x {n:>9,} {mb:>6.1f}{cells} | {speed['fast-2'] / speed['pandas']:>11.2f} "
                f"{speed['fast-2'] / speed['line']:>9.2f} {speed['fast-2'] / speed['fast-1']:>9.2f}"
            )
        print(
            "fast = fast-2 (both cores). Records are byte-identical between line, fast-1 and fast-2 (sha256)."
        )
        imports = {(k, r[0]): r[4][k]["import_mb"] for r in results for k in ("line", "pandas")}
        print(
            "RSS after imports, before reading (MB): "
            + ", ".join(f"{k} {d} {v:.0f}" for (k, d), v in sorted(imports.items()))
        )
        for dataset in args.datasets.split(","):
            for kind in ("line", "fast-2", "pandas"):
                rss = [r[4][kind]["peak_mb"] for r in results if r[0] == dataset]
                print(
                    f"{dataset}: {kind} peak RSS grows {rss[-1] / rss[0]:.2f}x while the input grows "
                    f"{sizes[-1] / sizes[0]:.0f}x"
                )


if __name__ == "__main__":
    main()

"""Nearest-neighbour distances for drift.analysis.novelty: the LanceDB table (flat scan below INDEX_MIN_ROWS
rows, an IVF index above) against brute-force NumPy, at a few sizes of the reference (training) side.

Each (backend, size) runs in a fresh process: build + one batched search, the peak memory it adds, and
LanceDB's recall of the exact nearest neighbour. Vectors: 384-d, 64 Gaussian clusters, unit-normalised. One
JSON line per (backend, size); LanceDB's carries time_vs_numpy and search_vs_numpy. Figures: bench/README.md.

    python bench/bench_novelty.py            # sizes 2k, 20k, 100k; 2,000 queries; ~2 min on 2 cores
    python bench/bench_novelty.py --quick    # 1,000 reference rows, 200 queries: seconds
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drift.core.environment import pin_cpu_code_path  # noqa: E402

pin_cpu_code_path()  # the stages' CPU path (compute.cpu_path portable) for whatever this run computes


def vectors(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(64, dim))
    x = centres[rng.integers(0, 64, n)] + 0.6 * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> float:
    """Reset the peak resident memory to the current one (Linux: clear_refs 5) and return it in MB."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_mb("VmRSS")


def peak_mb() -> float:
    return _status_mb("VmHWM")


def one(backend: str, size: int, folder: Path) -> dict:
    """Times and memory of one backend on the vectors `main` saved in `folder` (the import of lancedb,
    about 1 s, is outside the timing)."""
    import lancedb  # noqa: F401

    from drift.analysis.novelty import LanceNeighbours, NumpyNeighbours, nearest_numpy

    reference, query = np.load(folder / f"reference{size}.npy"), np.load(folder / "queries.npy")
    queries = len(query)
    slices = np.zeros(size, np.int32)
    exact = nearest_numpy(reference, query) if backend == "lancedb" else None
    before = reset_peak()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        index = (
            LanceNeighbours(reference, slices, tmp)
            if backend == "lancedb"
            else NumpyNeighbours(reference, slices)
        )
        built = time.perf_counter() - start
        found = index.nearest(query, 0)
        seconds = time.perf_counter() - start
    row = {
        "backend": backend,
        "reference_rows": size,
        "queries": queries,
        "build_s": round(built, 3),
        "total_s": round(seconds, 3),
        "peak_extra_mb": round(peak_mb() - before, 1),
    }
    if exact is not None:
        row["recall_at_1"] = float(np.mean(np.abs(found - exact) <= 1e-3 * np.maximum(exact, 1e-6)))
        row["indexed"] = isinstance(index, LanceNeighbours) and index.nprobes is not None
    return row


QUICK = {"sizes": [1000], "queries": 200}  # --quick: one size, a flat scan


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000, 100000])
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)  # backend size folder: run in this process
    parser.add_argument("--quick", action="store_true", help=f"tiny sizes, the same code path: {QUICK}")
    args = parser.parse_args(argv)
    if args.quick:  # the quick sizes as defaults: options given explicitly still win
        parser.set_defaults(**QUICK)
        args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), Path(args.one[2]))))
        return
    with tempfile.TemporaryDirectory() as folder:
        np.save(Path(folder) / "queries.npy", vectors(args.queries, args.dim, 1))
        for size in args.sizes:
            np.save(Path(folder) / f"reference{size}.npy", vectors(size, args.dim, 0))
            rows = []
            for backend in ("numpy", "lancedb"):
                out = subprocess.run(
                    [sys.executable, __file__, "--one", backend, str(size), folder],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            rows[1]["time_vs_numpy"] = round(rows[1]["total_s"] / rows[0]["total_s"], 2)
            rows[1]["search_vs_numpy"] = round(
                (rows[1]["total_s"] - rows[1]["build_s"]) / rows[0]["total_s"], 2
            )
            for row in rows:
                print(json.dumps(row))


if __name__ == "__main__":
    main()

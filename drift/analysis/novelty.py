"""Which rows drifted: each row of a period, how far it sits from the nearest training row of a
cutoff, on the same features as the shift matrix (drift.analysis.shift.shift_features).

Cutoff i's reference is its training rows (train split of slices <= i); its threshold is the `quantile` (0.95)
of the nearest-neighbour distances of its held-out rows (test split of the usable slices <= i). Cell (i, j) is
the share of novel rows (farther than the threshold) among the rows M scores cell (i, j) on; per period j, the
rows farthest from the last cutoff before j are the examples the report shows. Neighbours come by brute force
in NumPy (default) or from a LanceDB table (`backend`); every side is a seeded subsample of at most `max_rows`
query rows and `max_index_rows` training rows."""

from __future__ import annotations

import tempfile
import time
from typing import TYPE_CHECKING, cast

import numpy as np

from drift.core.errors import DriftError
from drift.protocol.matrix import eval_rows

if TYPE_CHECKING:
    from lancedb.query import LanceVectorQueryBuilder

INDEX_MIN_ROWS = 50_000  # below this a flat scan is exact and quick (bench/bench_novelty.py)
CHUNK_VALUES = 1 << 24  # brute force: distances computed per block of at most this many pairs (64 MB float32)


def nearest_numpy(reference: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Euclidean distance from each query to its nearest reference row, by blocks of queries."""
    reference = np.asarray(reference, np.float32)
    queries = np.asarray(queries, np.float32)
    norms = (reference * reference).sum(1)
    step = max(1, CHUNK_VALUES // max(len(reference), 1))
    out = np.empty(len(queries), np.float32)
    for start in range(0, len(queries), step):
        q = queries[start : start + step]
        d = norms[None, :] - 2.0 * (q @ reference.T)
        out[start : start + step] = d.min(1) + (q * q).sum(1)
    return np.sqrt(np.maximum(out, 0.0))


class NumpyNeighbours:
    def __init__(self, vectors: np.ndarray, slices: np.ndarray):
        self.vectors, self.slices = np.asarray(vectors, np.float32), slices

    def nearest(self, queries: np.ndarray, cutoff: int) -> np.ndarray:
        return nearest_numpy(self.vectors[self.slices <= cutoff], queries)


class LanceNeighbours:
    """The reference rows in a LanceDB table (under `folder`), searched with the filter `slice <= cutoff`."""

    def __init__(self, vectors: np.ndarray, slices: np.ndarray, folder: str, nprobes: int | None = None):
        # lazy: lancedb, only for the lancedb backend
        import lancedb
        import pyarrow as pa

        vectors = np.ascontiguousarray(vectors, np.float32)
        self.dim = vectors.shape[1]
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), self.dim)
        table = pa.table({"slice": pa.array(np.asarray(slices, np.int32)), "vector": column})
        self.table = lancedb.connect(folder).create_table("reference", table)
        self.nprobes = None
        if len(vectors) >= INDEX_MIN_ROWS:
            from lancedb.index import (
                IvfFlat,  # lazy: lancedb, only for the lancedb backend
            )

            partitions = int(np.sqrt(len(vectors)))
            self.table.create_index("vector", config=IvfFlat(distance_type="l2", num_partitions=partitions))
            self.nprobes = nprobes or max(1, partitions // 8)

    def nearest(self, queries: np.ndarray, cutoff: int) -> np.ndarray:
        queries = np.asarray(queries, np.float32)
        if not len(queries):
            return np.zeros(0, np.float32)
        # a vector's search builds a LanceVectorQueryBuilder; Table.search is typed as the base builder
        vector_search = cast(
            "LanceVectorQueryBuilder", self.table.search(queries if len(queries) > 1 else queries[0])
        )
        search = (
            vector_search.distance_type("l2")
            .limit(1)
            .where(f"slice <= {int(cutoff)}", prefilter=True)
            .select([])
        )
        if self.nprobes:
            search = search.nprobes(self.nprobes)
        found = search.to_arrow()
        out = np.full(len(queries), np.inf, np.float32)
        where = found.column("query_index").to_numpy() if len(queries) > 1 else np.zeros(found.num_rows, int)
        out[where] = found.column("_distance").to_numpy()  # squared L2
        return np.sqrt(np.maximum(out, 0.0))


def _sample(rows: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    return rows if len(rows) <= n else np.sort(rng.choice(rows, n, replace=False))


def novelty(
    features: np.ndarray,
    slices: np.ndarray,
    splits: np.ndarray,
    cutoffs: list[int],
    usable: list[bool],
    ids=None,
    quantile: float = 0.95,
    max_rows: int = 500,
    max_index_rows: int = 100_000,
    top: int = 5,
    seed: int = 0,
    backend: str = "numpy",
) -> dict:
    """{"share": K x K share of novel rows (nan = empty), "threshold": {cutoff: distance},
    "examples": [{"period", "cutoff", "rows", "ids", "distances"}] (the `top` most novel rows of each usable
    period j, against the last cutoff before j), "reference_rows", "seconds_search"}."""
    if not 0 < quantile < 1:
        raise DriftError(f"report.shift.novelty_quantile must lie strictly between 0 and 1, got {quantile}")
    if backend not in ("lancedb", "numpy"):
        raise DriftError(f"unknown novelty backend {backend!r}: lancedb or numpy")
    features = np.asarray(features, np.float32)
    k = len(usable)
    usable_slice = np.asarray(usable, dtype=bool)[slices]
    reference = _sample(np.flatnonzero(splits == "train"), max_index_rows, np.random.default_rng([seed, 0]))
    share = np.full((k, k), np.nan)
    thresholds, distances = {}, {}
    with tempfile.TemporaryDirectory(prefix="drift-novelty-") as folder:
        start = time.perf_counter()
        index: LanceNeighbours | NumpyNeighbours
        if backend == "lancedb":
            index = LanceNeighbours(features[reference], slices[reference], folder)
        else:
            index = NumpyNeighbours(features[reference], slices[reference])
        for i in cutoffs:
            if not np.any(slices[reference] <= i):
                continue
            held_out = _sample(
                np.flatnonzero((slices <= i) & (splits == "test") & usable_slice),
                max_rows,
                np.random.default_rng([seed, 1, i]),
            )
            cells = {
                j: _sample(
                    eval_rows(i, j, slices, splits),
                    max_rows,
                    np.random.default_rng([seed, 2, j, int(j <= i)]),
                )
                for j in range(k)
                if usable[j]
            }
            # one search per cutoff: its held-out rows, then every cell's rows
            queries = np.concatenate([held_out, *cells.values()]).astype(np.int64)
            found = index.nearest(features[queries], i)
            if not len(held_out):
                continue
            thresholds[i] = float(np.quantile(found[: len(held_out)], quantile))
            offset = len(held_out)
            for j, rows in cells.items():
                d = found[offset : offset + len(rows)]
                offset += len(rows)
                if len(rows):
                    share[i, j] = float(np.mean(d > thresholds[i]))
                    distances[i, j] = (rows, d)
        seconds = time.perf_counter() - start
    examples = []
    for j in range(k):
        before = [i for i in thresholds if i < j and (i, j) in distances]
        if not before:
            continue
        i = max(before)
        rows, d = distances[i, j]
        order = np.argsort(-d, kind="stable")[:top]
        examples.append(
            {
                "period": j,
                "cutoff": i,
                "rows": rows[order].tolist(),
                "ids": None if ids is None else [ids[r] for r in rows[order]],
                "distances": [round(float(x), 4) for x in d[order]],
                "novel": [bool(x > thresholds[i]) for x in d[order]],
            }
        )
    return {
        "share": share,
        "threshold": thresholds,
        "examples": examples,
        "reference_rows": len(reference),
        "quantile": quantile,
        "seconds_search": round(seconds, 3),
    }

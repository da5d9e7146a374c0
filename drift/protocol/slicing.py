"""Time slices (paper Section 4.1, Table 2) and the fixed, stratified 70/30 train/test split (Section 4.2).

A slice spec (the `slices:` key of a dataset's params) is one of
    {unit: year,      start: 1905, end: 2014}      yearly slices [1905, 1906) ... [2013, 2014)
    {unit: half-year, start: 2014, end: 2024}      "2014-H1", "2014-H2", ...
    {unit: quarter,   start: 2019, end: 2022}      "2019-Q1" ... "2021-Q4"
    {unit: month,     start: 2023, end: 2024}      "2023-01" ... "2023-12"
    {unit: decade,    start: 1850, end: 2030}      "1850s" ... "2020s"  (start, end multiples of 10)
    {unit: custom, edges: ["1950-01-01", "1970-07-01", "2000-01-01"], labels: [...]}  K = len(edges) - 1
`start` is inclusive, `end` exclusive, both years. Times outside [first edge, last edge) belong to no slice.
"""

from __future__ import annotations

import bisect
import datetime as dt
import hashlib

import numpy as np
import pyarrow as pa

from drift.core.errors import DriftError
from drift.core.params import DatasetParams, SliceSpec, SplitParams

UNITS = ("year", "half-year", "quarter", "month", "decade", "custom")
AUTO_UNITS = ("month", "quarter", "half-year", "year", "decade")  # the calendar units, finest first
MONTHS = {
    "half-year": (1, 7),
    "quarter": (1, 4, 7, 10),
    "month": tuple(range(1, 13)),
}  # each slice's first month


def slice_edges(spec: SliceSpec) -> tuple[list[dt.datetime], list[str]]:
    """The K+1 edges and K labels of a slice spec; a spec yielding no slices is a one-line error."""
    fields = spec.spec()
    unit = fields.get("unit")
    if unit not in UNITS:
        raise DriftError(f"unknown slice unit {unit!r}: valid: {', '.join(UNITS)}")
    if unit == "custom":
        try:
            edges = [_as_datetime(e) for e in fields["edges"]]
        except (KeyError, TypeError, ValueError) as e:
            raise DriftError(f"custom slices need `edges`: a list of dates like 1950-01-01 ({e})") from e
        if any(b <= a for a, b in zip(edges, edges[1:])):
            raise DriftError("custom slice edges must increase strictly")
        labels = fields.get("labels") or [str(e.date()) for e in edges[:-1]]
    else:
        try:
            start, end = int(fields["start"]), int(fields["end"])
        except (KeyError, TypeError, ValueError) as e:
            raise DriftError(f"slices of unit {unit!r} need integer `start` and `end` years ({e})") from e
        if start < 1 or end > 9999:  # the last edge is January 1st of `end`: a date has years 1 to 9999
            raise DriftError(f"slices of unit {unit!r} run from year 1 to 9999: got start {start}, end {end}")
        if unit == "year":
            edges = [dt.datetime(y, 1, 1) for y in range(start, end + 1)]
            labels = [str(y) for y in range(start, end)]
        elif unit == "decade":
            if start % 10 or end % 10:
                raise DriftError(
                    f"decade slices need start and end on a decade (got {start}, {end}): e.g. 1850, 2030"
                )
            edges = [dt.datetime(y, 1, 1) for y in range(start, end + 1, 10)]
            labels = [f"{y}s" for y in range(start, end, 10)]
        else:
            months = MONTHS[unit]
            edges = [dt.datetime(y, m, 1) for y in range(start, end) for m in months] + [
                dt.datetime(end, 1, 1)
            ]
            name = {"half-year": "{y}-H{i}", "quarter": "{y}-Q{i}", "month": "{y}-{m:02d}"}[unit]
            labels = [name.format(y=y, i=i, m=m) for y in range(start, end) for i, m in enumerate(months, 1)]
    if len(edges) < 2:
        raise DriftError(f"the slice spec {fields} yields no slices: `end` must come after `start`")
    if len(labels) != len(edges) - 1:
        raise DriftError(f"custom slices: {len(labels)} labels for {len(edges) - 1} slices")
    return edges, [str(label) for label in labels]


def _as_datetime(value) -> dt.datetime:
    """An edge as a naive UTC datetime: one with an offset (or `Z`) converted to UTC."""
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return dt.datetime(value.year, value.month, value.day)
    if isinstance(value, int):
        return dt.datetime(value, 1, 1)
    if not isinstance(value, dt.datetime):
        value = dt.datetime.fromisoformat(str(value))
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value


def assign_slices(times: np.ndarray, edges: list[dt.datetime]) -> np.ndarray:
    """Slice index of each time (datetime64 array); -1 outside the span."""
    edge_values = np.array(edges, dtype="datetime64[us]")
    t = times.astype("datetime64[us]")
    index = np.searchsorted(edge_values, t, side="right") - 1
    index[(t < edge_values[0]) | (t >= edge_values[-1])] = -1
    return index.astype(np.int32)


def partial_slices(
    edges: list[dt.datetime], labels: list[str], start: dt.datetime, end: dt.datetime, whole: float = 0.9
) -> list[dict]:
    """The first and the last slice of data spanning [start, end) where the data covers less than `whole` of
    the slice's time (a yearly slice holding only December): [{"which": "first" | "last" | "only", "label",
    "from", "to" (the covered span, `to` exclusive), "days" (covered), "of_days" (the slice's)}], in time
    order; empty when both are (nearly) whole. Time outside the edges belongs to no slice and is left out. A
    note for people: no slicing result depends on it."""
    lo, hi = max(start, edges[0]), min(end, edges[-1])
    if hi <= lo:
        return []
    first = bisect.bisect_right(edges, lo) - 1  # edges[first] <= lo < edges[first + 1]
    last = bisect.bisect_left(edges, hi) - 1  # edges[last] < hi <= edges[last + 1]
    ends = [("only", first)] if first == last else [("first", first), ("last", last)]
    out = []
    for which, k in ends:
        covered_from, covered_to = max(lo, edges[k]), min(hi, edges[k + 1])
        days = (covered_to - covered_from).total_seconds() / 86400
        of_days = (edges[k + 1] - edges[k]).total_seconds() / 86400
        if days < whole * of_days:
            out.append(
                {
                    "which": which,
                    "label": labels[k],
                    "from": covered_from,
                    "to": covered_to,
                    "days": days,
                    "of_days": of_days,
                }
            )
    return out


def _row_order(ids, seed: int) -> np.ndarray:
    """A permutation of rows that depends only on each row's id and the seed: stable under appends."""
    keys = [hashlib.blake2b(f"{seed}:{i}".encode(), digest_size=8).digest() for i in ids]
    return np.argsort(np.array([int.from_bytes(k, "big") for k in keys], dtype=np.uint64), kind="stable")


def stratum_keys(labels: list) -> list[str]:
    """The stratum of each label: the class, the rating, or the multi-label pattern."""
    return [
        repr(tuple(label)) if isinstance(label, (list, tuple, np.ndarray)) else repr(label)
        for label in labels
    ]


def stratified_split(ids: list[str], strata: list[str], test_fraction: float, seed: int) -> np.ndarray:
    """'train' / 'test' per row, drawn within each stratum; each stratum of n rows gets n * f test rows,
    rounded half up."""
    split = np.full(len(ids), "train", dtype=object)
    keys = np.asarray(strata, dtype=object)
    order = _row_order(ids, seed)
    for stratum in sorted(set(keys.tolist())):
        rows = order[keys[order] == stratum]  # this stratum's rows, in the seeded order
        n_test = int(len(rows) * test_fraction + 0.5)  # half up: 4.5 → 5, not banker's 4
        split[rows[:n_test]] = "test"
    return split


def per_slice_split(
    index: np.ndarray, labels: list, by_label: bool, test_fraction: float, seed: int
) -> np.ndarray:
    """'train' / 'test' per row, the authors' draw (split.draw: per-slice): one generator seeded with `seed`
    draws a seed per slice, in time order, for scikit-learn's train_test_split of that slice's rows (in input
    order), stratified by label where scikit-learn can stratify it; its test share is rounded up. A slice of
    fewer than 3 rows draws no seed and goes to train whole."""
    return per_slice_draw(index, labels, by_label, test_fraction, seed)[0]


def per_slice_draw(
    index: np.ndarray, labels: list, by_label: bool, test_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """per_slice_split's draw: ('train' / 'test' per row, the training rows in the draw's order). That order
    is slice after slice in time order, each slice's training rows as train_test_split returns them (a slice
    of fewer than 3 rows: in input order); rows are indexes into the input."""
    from sklearn.model_selection import train_test_split

    split = np.full(len(index), "train", dtype=object)
    scalar = all(not isinstance(v, (list, tuple, np.ndarray)) for v in labels)
    y_all = np.asarray(labels) if scalar else np.asarray(stratum_keys(labels))
    rng = np.random.RandomState(seed)
    order = []
    for s in np.unique(index):
        rows = np.flatnonzero(index == s)  # input order
        if len(rows) < 3:
            order.append(rows)
            continue
        slice_seed = rng.randint(0, 2**32 - 1)
        y = y_all[rows]
        stratify = y if by_label and _can_stratify(y, test_fraction) else None
        train, test = train_test_split(
            rows, test_size=test_fraction, stratify=stratify, random_state=slice_seed
        )
        split[test] = "test"
        order.append(train)
    return split, np.concatenate(order) if order else np.zeros(0, np.int64)


def id_hash_order(ids, seed: int) -> np.ndarray:
    """The order split.draw id-hash walks the rows in (each stratum's rows in it): a permutation of the rows
    hashed from each row's id and the seed."""
    return _row_order(ids, seed)


def _can_stratify(y: np.ndarray, test_fraction: float) -> bool:
    """Whether scikit-learn can stratify a split of this test share: two classes or more, each of two rows or
    more, and at least one row per class on each side."""
    _, counts = np.unique(y, return_counts=True)
    if len(counts) < 2 or counts.min() < 2:
        return False
    n_test = int(np.ceil(test_fraction * len(y)))
    return n_test >= len(counts) and len(y) - n_test >= len(counts)


def stratified_sample(ids: list[str], strata: list[str], n: int, seed: int) -> np.ndarray:
    """Indices of a sample of n rows, allocated to strata in proportion to their size (largest remainders),
    each stratum's rows chosen in the seeded order. Returned sorted, so row order follows the input."""
    if n >= len(ids):
        return np.arange(len(ids))
    keys = np.asarray(strata, dtype=object)
    names, counts = np.unique(keys, return_counts=True)
    quota = counts * n / len(ids)
    take = np.floor(quota).astype(int)
    for i in np.argsort(-(quota - take), kind="stable")[: n - take.sum()]:
        take[i] += 1
    order = _row_order(ids, seed)
    chosen = [order[keys[order] == name][:k] for name, k in zip(names, take)]
    return np.sort(np.concatenate(chosen)) if chosen else np.arange(0)


def cover_uniform_sample(strata: list[str], n: int, seed: int) -> np.ndarray:
    """Indices of a sample of n rows (sample.draw cover-uniform, the authors' Amazon sample): the first row of
    each stratum in row order, then a uniform sample without replacement of the other rows for the rest of n,
    drawn by polars' DataFrame.sample with `seed` over those rows in row order; fewer rows than strata: the
    uniform sample of all rows. Returned sorted."""
    import polars as pl  # lazy: only this draw uses polars here

    if n >= len(strata):
        return np.arange(len(strata))
    codes = np.unique(np.asarray(strata, dtype=object), return_inverse=True)[1].reshape(-1)
    _, first = np.unique(codes, return_index=True)
    if n < len(first):
        return np.sort(pl.DataFrame({"row": np.arange(len(strata))}).sample(n=n, seed=seed)["row"].to_numpy())
    first = np.sort(first)
    rest = np.setdiff1d(np.arange(len(strata)), first)
    extra = pl.DataFrame({"row": rest}).sample(n=n - len(first), seed=seed)["row"].to_numpy()
    return np.sort(np.concatenate([first, extra]))


def split_strata(index: np.ndarray, label_values: list, strata: list[str], stratify: list[str]) -> list[str]:
    """The split's stratum of each row (`split.stratify`): slice and label (`strata`, as the sample's), the
    slice alone, or the label alone."""
    if set(stratify) == {"slice", "label"}:
        return strata
    if stratify == ["slice"]:
        return [str(s) for s in index.tolist()]
    return stratum_keys(label_values)


def build_slices(records, cfg: DatasetParams, split_cfg: SplitParams):
    """Records (pyarrow Table) → (slice table, manifest): slice index and label per row, the per-slice cap or
    stratified sample, the stratified train/test split, and the slices too small to score (`min_samples`).
    `cfg`: the dataset's section of params.yaml, `split_cfg`: `split`."""
    edges, labels = slice_edges(cfg.slices)
    times = records.column("time").to_numpy(zero_copy_only=False)
    index = assign_slices(times, edges)
    keep = np.flatnonzero(index >= 0)
    records, index = records.take(keep), index[keep]
    ids = records.column("id").to_pylist()
    label_values = records.column("label").to_pylist()
    seed = split_cfg.seed

    # optional sampling, stratified by slice and label, reproducible from the seed (Amazon: n = 300,000)
    strata = [f"{s}|{k}" for s, k in zip(index.tolist(), stratum_keys(label_values))]
    sample = cfg.sample
    if sample is not None and sample.n:
        sample_seed = seed if sample.seed is None else sample.seed
        chosen = (
            cover_uniform_sample(strata, sample.n, sample_seed)
            if sample.draw == "cover-uniform"
            else stratified_sample(ids, strata, sample.n, sample_seed)
        )
    elif cfg.cap_per_slice:
        cap = cfg.cap_per_slice
        capped = []
        for s in np.unique(index):
            rows = np.flatnonzero(index == s)
            picked = stratified_sample([ids[i] for i in rows], [strata[i] for i in rows], cap, seed)
            capped.append(rows[picked])
        chosen = np.sort(np.concatenate(capped)) if capped else np.arange(0)
    else:
        chosen = np.arange(len(ids))
    records, index = records.take(chosen), index[chosen]
    ids = [ids[i] for i in chosen]
    strata = [strata[i] for i in chosen]

    chosen_labels = [label_values[i] for i in chosen]
    if split_cfg.draw == "per-slice":
        split = per_slice_split(
            index, chosen_labels, "label" in split_cfg.stratify, split_cfg.test_fraction, seed
        )
    else:
        split = stratified_split(
            ids, split_strata(index, chosen_labels, strata, split_cfg.stratify), split_cfg.test_fraction, seed
        )

    # slices with no row at all are dropped (Yearbook's missing years: K = 104 of 109); slices with some rows
    # but fewer than min_samples stay, marked unusable: the white bands of the paper's figures
    counts = np.bincount(index, minlength=len(labels))
    present = np.flatnonzero(counts > 0)
    renumber = np.full(len(labels), -1, dtype=np.int32)
    renumber[present] = np.arange(len(present), dtype=np.int32)
    label_of = [labels[old] for old in index]
    index = renumber[index]
    min_samples = cfg.min_samples
    n_test = np.bincount(index[split == "test"], minlength=len(present))
    slices = [
        {
            "index": k,
            "label": labels[old],
            "start": str(edges[old].date()),
            "end": str(edges[old + 1].date()),
            "rows": int(counts[old]),
            "test": int(n_test[k]),
            "train": int(counts[old] - n_test[k]),
            # a row of the matrix needs training rows, a column test rows: a one-portrait year (all in train)
            # keeps its row (f_k can be trained) and leaves its column empty
            "trainable": bool(counts[old] >= min_samples and counts[old] - n_test[k] > 0),
            "usable": bool(counts[old] >= min_samples and n_test[k] > 0),
        }
        for k, old in enumerate(present)
    ]

    table = records.append_column("slice", pa.array(index, pa.int32()))
    table = table.append_column("slice_label", pa.array(label_of, pa.string()))
    table = table.append_column("split", pa.array(split.tolist(), pa.string()))
    table = table.sort_by([("slice", "ascending"), ("time", "ascending"), ("id", "ascending")])
    if not any(s["usable"] for s in slices):
        raise DriftError(
            f"no slice has {min_samples} or more rows (min_samples): lower it or widen the slices"
        )
    return table, slices

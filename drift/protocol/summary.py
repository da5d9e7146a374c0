"""Summaries of drift matrices (paper Section 4.5, Appendix C.7, the tables of Sections C-E).

M is a float array [K, K]: row i the model trained on slices <= i, column j the evaluation slice, nan (None in
JSON) an empty cell. Over the filled cells only, None when none is: ID(M) = mean_i M_ii (eq. 6), Future(M) =
mean_{j>i} M_ij (eq. 7), Decay(M) = ID - Future, or Future - ID when lower is better, so a positive decay is
always a loss (eq. 8). Seeds are averaged cell by cell first (`mean_over_seeds`). Rankings (Tables 5, 13, 21)
order by Decay, smallest first (`by="future"` or `"id"`: that score, the better first). Reference models
(family "Reference", baseline-*) come after the ranked models without a rank and stay out of the cohort mean,
the deviations and the family averages; every other model carries its margin over them (`reference_margins`).
A model's training curves (its mean loss per epoch) say whether its loss was still falling at the end
(`still_falling`)."""

import numpy as np

from drift.core.errors import DriftError, close_matches

STATS = ("id", "future", "decay")
ORDERS = (
    "decay",
    "future",
    "id",
)  # what a ranking may be ordered by; decay is the paper's (Tables 5, 13, 21)
DEFAULT_ORDER = "decay"
REFERENCE_FAMILY = "Reference"
REFERENCE_PREFIX = "baseline-"
REFERENCES = {
    "prior": "baseline-prior",
    "linear": "baseline-linear",
    "tfidf": "baseline-tfidf",
}  # margin_<key> is the margin over <model>


# -----------------------------------------------------------------------------
# helpers


def as_matrix(M) -> np.ndarray:
    """A drift matrix as a 2-D float array, None cells as nan."""
    M = np.asarray(M, dtype=np.float64)
    if M.ndim != 2:
        raise DriftError(f"a drift matrix must be 2-D [K, K], got shape {M.shape}")
    return M


def _stack(mats) -> np.ndarray:
    """A list of same-shape matrices -> [S, K, K]."""
    mats = [as_matrix(M) for M in mats]
    if not mats:
        raise DriftError("no drift matrices given")
    shapes = {M.shape for M in mats}
    if len(shapes) > 1:
        raise DriftError(f"drift matrices differ in shape: {sorted(shapes)}")
    return np.stack(mats)


def _mean(values) -> float | None:
    """Mean of the filled (finite, not None) values, None if there are none."""
    v = np.asarray([np.nan if x is None else x for x in np.ravel(values)], dtype=np.float64)
    v = v[np.isfinite(v)]
    return float(v.mean()) if len(v) else None


def _decay(id_, future, higher_is_better: bool) -> float | None:
    """Decay oriented so that positive means worse on the future (eq. 8)."""
    if id_ is None or future is None:
        return None
    return id_ - future if higher_is_better else future - id_


def _regions(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The filled diagonal cells and the filled future cells (j > i) of M."""
    diag = np.diagonal(M)
    future = M[np.triu_indices(M.shape[0], k=1, m=M.shape[1])]
    return diag[np.isfinite(diag)], future[np.isfinite(future)]


def check_order(by: str) -> str:
    """`by` if it is one of ORDERS, else a one-line DriftError listing the valid ones."""
    if by not in ORDERS:
        raise DriftError(f"unknown order {by!r} for --by: {close_matches(str(by), ORDERS)}")
    return by


def _sort_key(key: str, higher_is_better: bool):
    """Best first: the smallest decay (a positive decay is always a loss, eq. 8), else the better score."""
    if key == "decay" or not higher_is_better:
        return lambda r: r[key]
    return lambda r: -r[key]


def _ranked(rows: list[dict], higher_is_better: bool, key: str = DEFAULT_ORDER) -> list[dict]:
    """Rows sorted best first by rows[key] (decay: smallest first; id, future: direction-aware), ties in the
    given order; rank 1, 2, ... Rows without a value go last with rank None. Reference rows (r["reference"]
    true) are not ranked: they follow every other row, in the same order, with rank None."""
    check_order(key)
    refs = [r for r in rows if r.get("reference")]
    rows = [r for r in rows if not r.get("reference")]
    scored = sorted((r for r in rows if r[key] is not None), key=_sort_key(key, higher_is_better))
    missing = [r for r in rows if r[key] is None]
    for rank, r in enumerate(scored, start=1):
        r["rank"] = rank
    for r in missing:
        r["rank"] = None
    refs = sorted((r for r in refs if r[key] is not None), key=_sort_key(key, higher_is_better)) + [
        r for r in refs if r[key] is None
    ]
    for r in refs:
        r["rank"] = None
    return scored + missing + refs


# -----------------------------------------------------------------------------
# reference models (baseline-prior, baseline-linear, baseline-tfidf on text): not ranked, the yardstick of the others


def is_reference(model: str, stats: dict | None = None) -> bool:
    """A reference model: its metrics say so ("reference": true), its family is "Reference", or its name
    starts with baseline-."""
    stats = stats or {}
    return (
        bool(stats.get("reference"))
        or stats.get("family") == REFERENCE_FAMILY
        or model.startswith(REFERENCE_PREFIX)
    )


def id_margin(model_id, reference_id, higher_is_better: bool) -> float | None:
    """How much better than the reference a model is in distribution: positive = better, whatever the metric's
    direction (model - reference when higher is better, reference - model when lower is better)."""
    if model_id is None or reference_id is None:
        return None
    return float(model_id - reference_id if higher_is_better else reference_id - model_id)


def reference_margins(stats: dict, higher_is_better: bool) -> dict[str, dict]:
    """For every non-reference model of stats (model -> {id, ...}): margin_prior, margin_linear and
    margin_tfidf, its ID margin over baseline-prior, baseline-linear and baseline-tfidf (None when that
    reference is absent or an ID is None), and beats_prior (margin_prior > 0; None when the margin is None).
    """
    ref_ids = {key: (stats[name].get("id") if name in stats else None) for key, name in REFERENCES.items()}
    out = {}
    for model, s in stats.items():
        if is_reference(model, s):
            continue
        row = {f"margin_{key}": id_margin(s.get("id"), ref_ids[key], higher_is_better) for key in REFERENCES}
        row["beats_prior"] = None if row["margin_prior"] is None else bool(row["margin_prior"] > 0)
        out[model] = row
    return out


def below_prior(stats: dict, higher_is_better: bool) -> list[str]:
    """The non-reference models that do not beat baseline-prior in distribution (beats_prior false), in the
    order of stats; empty when there is no baseline-prior."""
    return [m for m, r in reference_margins(stats, higher_is_better).items() if r["beats_prior"] is False]


def _below_reference(
    reference: str,
    says: str,
    dataset: str,
    model: str,
    model_id: float,
    ref_id: float,
    metric: str,
    higher: bool,
) -> str:
    direction = "higher is better" if higher else "lower is better"
    return (
        f"warning: {model} {says} {REFERENCES[reference]} in distribution on {dataset} "
        f"(ID {model_id:.3f} vs {reference} {ref_id:.3f}, {metric}, {direction})"
    )


def below_prior_message(
    dataset: str, model: str, model_id: float, prior_id: float, metric: str, higher_is_better: bool
) -> str:
    """The one line that says a model does not beat the prior predictor in distribution."""
    return _below_reference(
        "prior", "does not beat", dataset, model, model_id, prior_id, metric, higher_is_better
    )


# what the mark on a model below baseline-linear means (`drift summary`'s footnote, the HTML report's note)
BELOW_LINEAR_NOTE = f"ID below {REFERENCES['linear']}: a small Decay partly means little was learned"


def below_linear_message(
    dataset: str, model: str, model_id: float, linear_id: float, metric: str, higher_is_better: bool
) -> str:
    """The one line that says a model learned less in distribution than the closed-form reference on its
    features."""
    return _below_reference(
        "linear", "is below", dataset, model, model_id, linear_id, metric, higher_is_better
    )


# -----------------------------------------------------------------------------
# training curves: the mean training loss of each epoch, one curve per cutoff and seed of a model

# the last epoch's drop, as a share of the first epoch's loss, above which a loss is still clearly falling
# (docs/decisions.md, "Training shown to be enough")
STILL_FALLING = 0.01


def last_epoch_drop(curves: list[list[float]]) -> float | None:
    """The last epoch's drop of the loss as a share of the first epoch's, (L[-2] - L[-1]) / L[0], averaged
    over `curves` (each the mean loss of every epoch of one training); None when no curve has two epochs (and
    a positive first loss)."""
    drops = [(c[-2] - c[-1]) / c[0] for c in curves if len(c) >= 2 and c[0] > 0]
    return float(np.mean(drops)) if drops else None


def still_falling(curves: list[list[float]]) -> bool:
    """Whether the curves do not show the loss had stopped falling: their last epoch's drop (last_epoch_drop)
    is above STILL_FALLING, or they have one epoch each, which cannot show it. False without curves (a
    reference)."""
    curves = [c for c in curves if c]
    if not curves:
        return False
    drop = last_epoch_drop(curves)
    return drop is None or drop > STILL_FALLING


def still_falling_message(dataset: str, model: str, curves: list[list[float]]) -> str:
    """The one line that says a model's training loss was still falling at its last epoch (still_falling)."""
    curves = [c for c in curves if c]
    epochs = max(len(c) for c in curves)
    drop = last_epoch_drop(curves)
    if drop is None:
        return (
            f"warning: {model} trained {epochs} epoch on {dataset}: one epoch cannot show its loss had stopped "
            f"falling (raise train.epochs)"
        )
    return (
        f"warning: {model}'s training loss on {dataset} was still falling at its last epoch ({epochs}): down "
        f"{drop:.1%} of the first epoch's loss in that epoch (mean of {len(curves)} trainings), not converged; "
        f"more epochs (train.epochs) may learn more"
    )


# -----------------------------------------------------------------------------
# one model: seeds, ID / Future / Decay (Section 4.5)


def mean_over_seeds(mats) -> np.ndarray:
    """Cell by cell mean over the seeds that filled each cell; a cell no seed filled stays nan.
    Seeds may have filled different cells (an unfinished run leaves its cells empty)."""
    A = _stack(mats)
    filled = np.isfinite(A)
    n = filled.sum(axis=0)
    total = np.where(filled, A, 0.0).sum(axis=0)
    out = np.full(A.shape[1:], np.nan)
    np.divide(total, n, out=out, where=n > 0)
    return out


def id_future_decay(M, higher_is_better: bool) -> dict:
    """ID, Future and Decay of one (seed-averaged) matrix, each over its filled cells (Section 4.5, eq. 6-8).
    Returns {"id", "future", "decay"} as python floats, None where no cell of the region is filled."""
    diag, future = _regions(as_matrix(M))
    id_, fut = _mean(diag), _mean(future)
    return {"id": id_, "future": fut, "decay": _decay(id_, fut, higher_is_better)}


def seed_spread(mats, higher_is_better: bool, n_boot: int = 1000, seed: int = 0) -> dict:
    """How much ID / Future / Decay vary with the seed (the paper averages seeds, Section 4.3; Section 6.1
    notes seed variance may affect fine-grained rankings).

    For each statistic s in (id, future, decay) returns a dict:
      mean     mean over seeds of s computed on each seed's own matrix
      std      standard deviation of those per-seed values (ddof=1); None with fewer than two seeds
      n_seeds  number of seeds whose matrix gives a value of s
      ci_low, ci_high   95% percentile bootstrap interval, two-level:
               1. draw S seeds with replacement from the S given and average them cell by cell;
               2. in that averaged matrix draw, with replacement, as many cells as are filled from the filled
                  diagonal cells (-> ID) and, independently, from the filled future cells (-> Future);
                  Decay is the oriented difference of the two.
               The 2.5 and 97.5 percentiles over n_boot draws; None if no draw gives a value.
    Deterministic given `seed` (numpy default_rng).
    """
    A = _stack(mats)
    per_seed = [id_future_decay(M, higher_is_better) for M in A]

    rng = np.random.default_rng(seed)
    boot: dict[str, list[float]] = {s: [] for s in STATS}
    regions: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}  # by the seeds drawn, in their order (the sum's)
    for _ in range(n_boot):
        drawn = rng.integers(0, len(A), size=len(A))
        if (key := tuple(drawn.tolist())) not in regions:
            regions[key] = _regions(mean_over_seeds(A[drawn]))
        diag, future = regions[key]
        id_ = float(rng.choice(diag, size=len(diag)).mean()) if len(diag) else None
        fut = float(rng.choice(future, size=len(future)).mean()) if len(future) else None
        for s, v in zip(STATS, (id_, fut, _decay(id_, fut, higher_is_better))):
            if v is not None:
                boot[s].append(v)

    out = {}
    for s in STATS:
        vals = [p[s] for p in per_seed if p[s] is not None]
        out[s] = {
            "mean": float(np.mean(vals)) if vals else None,
            "std": float(np.std(vals, ddof=1)) if len(vals) > 1 else None,
            "n_seeds": len(vals),
            "ci_low": float(np.percentile(boot[s], 2.5)) if boot[s] else None,
            "ci_high": float(np.percentile(boot[s], 97.5)) if boot[s] else None,
        }
    return out


# -----------------------------------------------------------------------------
# many models: tables (Tables 5-10 and their Amazon / arXiv counterparts)


def cutoff_indices(K: int, n_cutoffs: int = 4) -> list[int]:
    """n cutoffs spread evenly over slices 0 .. K-2 (the last slice has no future), rounded half up.
    K=104, n=4 -> [0, 34, 68, 102] (Yearbook: 1905, 1944, 1978, 2012 in Tables 6-9)."""
    if K < 2 or n_cutoffs < 1:
        return []
    idx = np.floor(np.linspace(0, K - 2, n_cutoffs) + 0.5).astype(int)
    return sorted(set(idx.tolist()))


def cutoff_table(
    matrices: dict,
    labels: list[str],
    higher_is_better: bool,
    n_cutoffs: int = 4,
    by: str = DEFAULT_ORDER,
    references=(),
) -> list[dict]:
    """Per-cutoff rows (Section 4.5, Tables 6-9): at each of n cutoffs i spread evenly over the timeline
    (excluding the last slice), every model's diagonal cell M_ii ("id"), the mean of the later cells of that
    row, mean_{j>i} M_ij ("future"), and their oriented difference ("decay"), ranked within the cutoff by
    `by` (decay: smallest first; future, id: the better first).

    matrices: model -> seed-averaged [K, K] matrix; labels: the K slice labels; references: the reference
    models among them, listed after the ranked ones with rank None. Returns rows {cutoff, cutoff_label, rank,
    model, id, future, decay, reference}, cutoff by cutoff, best first.
    """
    mats = {m: as_matrix(M) for m, M in matrices.items()}
    K = len(labels)
    for m, M in mats.items():
        if M.shape != (K, K):
            raise DriftError(
                f"drift matrix of {m} has shape {M.shape}, expected ({K}, {K}) for {K} slice labels"
            )
    rows = []
    for c in cutoff_indices(K, n_cutoffs):
        group = []
        for model, M in mats.items():
            id_, fut = _mean(M[c, c]), _mean(M[c, c + 1 :])
            group.append(
                {
                    "cutoff": c,
                    "cutoff_label": labels[c],
                    "rank": None,
                    "model": model,
                    "id": id_,
                    "future": fut,
                    "decay": _decay(id_, fut, higher_is_better),
                    "reference": model in references,
                }
            )
        rows += _ranked(group, higher_is_better, by)
    return rows


def family_table(
    rows: list[dict], higher_is_better: bool, families: dict | None = None, by: str = DEFAULT_ORDER
) -> list[dict]:
    """Family averages (Section 4.5, Table 10): the mean id, future and decay of the models of each family,
    each over the models that have a value, ranked by `by` (decay: smallest first). Rows that carry a "cutoff"
    (from `cutoff_table`) are averaged and ranked within their cutoff. Reference rows (r["reference"] true)
    are not part of any family average.

    rows: dicts with model, family, id, future, decay (and optionally cutoff, cutoff_label); `families`
    (model -> family) may stand in for a missing "family" key.
    Returns rows {[cutoff, cutoff_label,] rank, family, n_models, id, future, decay}.
    """
    groups: dict = {}
    for r in rows:
        if r.get("reference"):
            continue
        family = r["family"] if "family" in r else (families or {}).get(r["model"])
        if family is None:
            raise DriftError(
                f"no family for model {r.get('model')!r}: give rows a 'family' or pass families="
            )
        groups.setdefault(r.get("cutoff"), {}).setdefault(family, []).append(r)

    out = []
    for cutoff, fams in groups.items():
        group = []
        for family, rs in fams.items():
            entry = {} if cutoff is None else {"cutoff": cutoff, "cutoff_label": rs[0].get("cutoff_label")}
            entry.update({"rank": None, "family": family, "n_models": len(rs)})
            for s in STATS:
                entry[s] = _mean([r[s] for r in rs])
            group.append(entry)
        out += _ranked(group, higher_is_better, by)
    return out


def ranking(stats: dict, higher_is_better: bool, by: str = DEFAULT_ORDER) -> list[dict]:
    """Models ranked best first (Tables 5, 13, 21): by Decay, smallest first, by default; by="future" or "id"
    rank by that score, direction-aware. stats: model -> {id, future, decay[, family, reference]}; reference
    models (`is_reference`) follow the ranked ones with rank None.
    Returns rows {rank, model, id, future, decay, reference}."""
    rows = [
        {
            "rank": None,
            "model": m,
            "id": s.get("id"),
            "future": s.get("future"),
            "decay": s.get("decay"),
            "reference": is_reference(m, s),
        }
        for m, s in stats.items()
    ]
    return _ranked(rows, higher_is_better, by)


def cohort_mean(matrices: dict) -> np.ndarray:
    """Cohort-mean matrix (eq. 9): the mean over models, defined at the cells every model fills (nan
    elsewhere)."""
    A = _stack(list(matrices.values()))
    every = np.isfinite(A).all(axis=0)
    return np.where(every, np.where(np.isfinite(A), A, 0.0).mean(axis=0), np.nan)


def deviations(matrices: dict) -> dict:
    """Each model's deviation from the cohort mean, Delta^(m) = M^(m) - M_bar (Section 4.5); nan outside the
    cells every model fills."""
    cohort = cohort_mean(matrices)
    return {m: as_matrix(M) - cohort for m, M in matrices.items()}


# -----------------------------------------------------------------------------
# forgetting curves (Appendix C.7, Figure 4)


def forgetting_curve(M) -> tuple[np.ndarray, np.ndarray]:
    """F(g) = mean_i M_{i, i+g}: performance against the gap g = j - i >= 0, averaged over the training
    cutoffs whose cell is filled (C.7). F(0) is the ID score. Gaps with no filled cell are left out.
    Returns (gaps: int array, values: float array)."""
    M = as_matrix(M)
    gaps, values = [], []
    for g in range(M.shape[1]):
        v = _mean(np.diagonal(M, offset=g))
        if v is not None:
            gaps.append(g)
            values.append(v)
    return np.array(gaps, dtype=int), np.array(values, dtype=np.float64)


def forgetting_curves(mats_per_seed) -> tuple[np.ndarray, np.ndarray]:
    """One model's forgetting curve averaged over training cutoffs and seeds (Figure 4): the seeds are
    averaged cell by cell first (`mean_over_seeds`), as for ID / Future, so F(0) equals the ID of the averaged
    matrix."""
    return forgetting_curve(mean_over_seeds(mats_per_seed))


def family_curves(curves: dict, families: dict) -> dict:
    """Forgetting curves averaged within each family (Figure 11b): at each gap, the mean over the family's
    models that have a value there. curves: model -> (gaps, values); families: model -> family.
    Returns family -> (gaps, values), families in order of first appearance."""
    by_gap: dict = {}
    for model, (gaps, values) in curves.items():
        family = by_gap.setdefault(families[model], {})
        for g, v in zip(gaps, values):
            family.setdefault(int(g), []).append(float(v))
    return {
        f: (np.array(sorted(gs), dtype=int), np.array([np.mean(gs[g]) for g in sorted(gs)]))
        for f, gs in by_gap.items()
    }

"""Retraining policies replayed from the drift matrix, without training anything.

Under cumulative retraining the model deployed in period j after retraining at cutoff t < j is exactly f_t,
and its score there is M[t][j], so every policy that decides at each period's start whether to retrain is
replayed from the matrix: never (f_t0 forever), every n (retrain after n periods served; n = 1 is always),
always (f_{j-1} in period j), shift > τ (the label-free S[t][j] of drift/analysis/shift.py), drop > τ (the
estimate E[t][j] of drift/evaluate/estimate.py worse than E[t][t], else M[t][t], by more than τ). A retraining
deploys the latest trained cutoff before j; every policy is scored over periods t0+1 .. K-1, empty cells
skipped. Cost: the training rows of slices <= t times the epochs (optionally seconds per row), the first model
not counted; without a slice manifest each slice counts as one row ("slice-epochs")."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from drift.core.errors import DriftError, close_matches
from drift.core.params import PolicyParams
from drift.core.paths import dataset_paths
from drift.core.stage import write_json
from drift.report.results import (
    from_long_format,
    load_matrix,
    report_datasets,
    report_models,
)
from drift.store.slices import SliceManifest

QUARTILES = (
    25,
    50,
    75,
)  # default thresholds: the quartiles of the signal over the cells a policy can consult


def _better(a: float, b: float, higher: bool) -> bool:
    return a > b if higher else a < b


def trained_cutoffs(matrix: np.ndarray) -> list[int]:
    """Rows with a model: any filled cell (an untrainable slice's row is empty)."""
    return [i for i, row in enumerate(np.asarray(matrix, float)) if np.isfinite(row).any()]


def retrain_costs(k: int, epochs: int, train_rows: list[int] | None = None) -> np.ndarray:
    """Cost of retraining at each cutoff t: training rows of slices <= t times epochs (each slice one row when
    the rows are unknown)."""
    rows = np.ones(k) if train_rows is None else np.asarray(train_rows, float)
    if len(rows) != k:
        raise DriftError(
            f"the slice manifest lists {len(rows)} slices but the matrix has {k}: "
            f"re-run `dvc repro` so both come from the same slicing"
        )
    return np.cumsum(rows) * epochs


def replay(matrix: np.ndarray, retrain, costs: np.ndarray, higher: bool) -> dict:
    """Deploy f_t0, then in each period j = t0+1 .. K-1 ask `retrain(j, t, age)` (t: the deployed cutoff, age:
    periods it has served) and, if so, deploy the latest trained cutoff before j. Scores are M[t][j]."""
    M = np.asarray(matrix, float)
    trained = trained_cutoffs(M)
    if not trained:
        raise DriftError("the drift matrix has no filled row: no model to deploy")
    deployed, age = trained[0], 0
    periods, schedule, scores, retrained_at = [], [], [], []
    for j in range(trained[0] + 1, len(M)):
        if retrain(j, deployed, age):
            latest = max(t for t in trained if t < j)
            if latest != deployed:
                deployed, age = latest, 0
                retrained_at.append(latest)
        age += 1
        periods.append(j)
        schedule.append(deployed)
        scores.append(float(M[deployed, j]))
    finite = [s for s in scores if np.isfinite(s)]
    worst = (min(finite) if higher else max(finite)) if finite else None
    return {
        "periods": periods,
        "deployed": schedule,
        "scores": [s if np.isfinite(s) else None for s in scores],
        "scored": len(finite),
        "mean": float(np.mean(finite)) if finite else None,
        "worst": worst,
        "retrainings": len(retrained_at),
        "retrained_at": retrained_at,
        "cost": float(sum(costs[t] for t in retrained_at)),
    }


def estimated_drop(estimate: np.ndarray, matrix: np.ndarray, t: int, j: int, higher: bool) -> float:
    """How much worse than in distribution f_t is estimated to do on period j (positive = worse; nan if E has
    no estimate there)."""
    reference = estimate[t, t] if np.isfinite(estimate[t, t]) else matrix[t, t]
    return float(reference - estimate[t, j] if higher else estimate[t, j] - reference)


def _quartiles(values: list[float]) -> list[float]:
    finite = [v for v in values if np.isfinite(v)]
    return sorted({round(float(np.percentile(finite, q)), 6) for q in QUARTILES}) if finite else []


def _check_square(name: str, array, k: int) -> np.ndarray:
    array = np.asarray(array, float)
    if array.shape != (k, k):
        raise DriftError(
            f"the {name} matrix is {array.shape[0]}x{array.shape[1] if array.ndim > 1 else 0}, "
            f"the drift matrix {k}x{k}: compute both over the same slices"
        )
    return array


def replay_policies(
    matrix: np.ndarray,
    higher: bool,
    costs: np.ndarray,
    every=(2, 3, 4),
    shift=None,
    estimate=None,
    shift_thresholds=None,
    drop_thresholds=None,
) -> dict:
    """Every policy of the module docstring on one matrix: {"policies": [one replay each, with "policy" (its
    kind), "param" and "name"], "skipped": [why a kind did not run], "thresholds": {kind: the τ used}}.
    shift / estimate: K x K arrays (nan = empty) or None, which skips their policies."""
    M = np.asarray(matrix, float)
    k = len(M)
    trained = trained_cutoffs(M)
    out, skipped, thresholds = [], [], {}

    def add(kind, param, rule):
        name = kind if param is None else f"{kind} {param:g}" if kind != "every" else f"every {param}"
        out.append({"policy": kind, "param": param, "name": name, **replay(M, rule, costs, higher)})

    add("never", None, lambda j, t, age: False)
    for n in sorted(set(every)):
        add("every", int(n), lambda j, t, age, n=n: age >= n)
    add("always", None, lambda j, t, age: True)
    # the cells a signal policy can consult: a trained cutoff t and a later period j
    consulted = [(t, j) for t in trained for j in range(t + 1, k)]
    if shift is None:
        skipped.append("shift: no shift matrix (drift/analysis/shift.py) given")
    else:
        S = _check_square("shift", shift, k)
        taus = list(shift_thresholds) if shift_thresholds else _quartiles([S[t, j] for t, j in consulted])
        thresholds["shift"] = taus
        if not taus:
            skipped.append("shift: the shift matrix has no value at a cell a policy could consult")
        for tau in taus:
            add(
                "shift", float(tau), lambda j, t, age, tau=tau: bool(S[t, j] > tau)
            )  # nan: no signal, no retraining
    if estimate is None:
        skipped.append("drop: no estimated matrix (drift/evaluate/estimate.py) given")
    else:
        E = _check_square("estimated", estimate, k)
        taus = (
            list(drop_thresholds)
            if drop_thresholds
            else _quartiles([estimated_drop(E, M, t, j, higher) for t, j in consulted])
        )
        thresholds["drop"] = taus
        if not taus:
            skipped.append("drop: the estimated matrix has no value at a cell a policy could consult")
        for tau in taus:
            add("drop", float(tau), lambda j, t, age, tau=tau: bool(estimated_drop(E, M, t, j, higher) > tau))
    mark_pareto(out, higher)
    return {"policies": out, "skipped": skipped, "thresholds": thresholds}


def mark_pareto(policies: list[dict], higher: bool) -> None:
    """`pareto`: no other policy has a mean score at least as good for no more cost, better in one of the two
    (equal points are both on the front); `best`: the best mean score, ties to the cheaper, then fewer
    retrainings, then the first listed."""
    scored = [p for p in policies if p["mean"] is not None]
    for p in policies:
        p["pareto"] = p["mean"] is not None and not any(
            q["cost"] <= p["cost"]
            and not _better(p["mean"], q["mean"], higher)
            and (q["cost"] < p["cost"] or _better(q["mean"], p["mean"], higher))
            for q in scored
        )
        p["best"] = False
    if scored:
        sign = -1 if higher else 1
        min(scored, key=lambda p: (sign * p["mean"], p["cost"], p["retrainings"]))["best"] = True


# ---------------------------------------------------------------- one dataset's committed results


def load_signal(path: Path, labels: list[str]) -> np.ndarray:
    """A K x K signal (shift or estimate) from a long-format JSON {train, eval, value} over the same labels."""
    path = Path(path)
    if not path.exists():
        raise DriftError(f"no {path}: give a long-format JSON of rows {{train, eval, value}}")
    rows = json.loads(path.read_text())
    found, values = from_long_format(rows)
    if set(found) - set(labels):
        raise DriftError(
            f"{path} has slices {sorted(set(found) - set(labels))[:3]} that the matrix has not: "
            f"compute it over the same slices"
        )
    index = [found.index(label) if label in found else None for label in labels]
    out = np.full((len(labels), len(labels)), np.nan)
    for a, ia in enumerate(index):
        for b, ib in enumerate(index):
            if ia is not None and ib is not None:
                out[a, b] = values[ia, ib]
    return out


def report_signals(name: str, root: Path) -> tuple[np.ndarray | None, dict]:
    """The label-free signals the report stage wrote: the shift matrix (or None) and {model: estimate}."""
    p = dataset_paths(name, root)
    labels = report_labels(root, name)
    shift = p["shift"] / "matrix.json"
    return (
        load_signal(shift, labels) if shift.exists() and labels else None,
        {f.parent.name: load_signal(f, labels) for f in sorted(p["plots"].glob("*/estimate.json"))}
        if labels
        else {},
    )


def report_labels(root: Path, name: str) -> list[str]:
    """The slice labels of a dataset's committed matrices (empty when it has none)."""
    first = next(iter(sorted(dataset_paths(name, root)["plots"].glob("*/matrix.json"))), None)
    return list(dict.fromkeys(r["train"] for r in json.loads(first.read_text()))) if first else []


def dataset_policies(
    name: str,
    policy: PolicyParams,
    epochs: int,
    root: Path = Path("."),
    models: list[str] | None = None,
    shift=None,
    estimates: dict | None = None,
    seconds_per_row: float | None = None,
) -> dict:
    """Every policy on every model (or `models`) of dataset `name`'s committed report (plots/<ds>/<model>/
    matrix.json, metrics/<ds>/): {"dataset", "metric", "higher_is_better", "cost_unit", "notes", "models":
    {model: replay_policies(...)}}. policy: params.yaml's report.policy; epochs: train.epochs (the cost of a
    retraining); shift: one K x K array for the dataset; estimates: model -> K x K array (when None, the
    report's own: plots/<ds>/shift/matrix.json and plots/<ds>/<model>/estimate.json, if any); seconds_per_row:
    overrides report.policy.seconds_per_row."""
    root = Path(root)
    found_shift, found_estimates = report_signals(name, root)
    shift = found_shift if shift is None else shift
    estimates = found_estimates if estimates is None else estimates
    if seconds_per_row is None:
        seconds_per_row = policy.seconds_per_row
    if seconds_per_row is not None and not seconds_per_row > 0:
        raise DriftError(f"seconds per row must be positive, got {seconds_per_row}")
    datasets = report_datasets(root)
    if not datasets:
        raise DriftError(
            f"no report in {root / 'plots'}: run `dvc repro` (or check out a commit that has one)"
        )
    if name not in datasets:
        raise DriftError(f"unknown dataset {name!r}: {close_matches(name, datasets)}")
    # the models are those with a metrics file: not the cohort mean, nor a signal's folder (plots/<ds>/shift)
    metrics_dir = dataset_paths(name, root)["metrics"]
    available = [m for m in report_models(root, name) if (metrics_dir / f"{m}.json").exists()]
    for model in models or []:
        if model not in available:
            raise DriftError(f"unknown model {model!r} for {name}: {close_matches(model, available)}")
    manifest_path = dataset_paths(name, root)["slice_manifest"]
    manifest = SliceManifest.from_file(manifest_path, name) if manifest_path.exists() else None
    train_rows = [s.train for s in manifest.slices] if manifest else None
    notes = []
    if manifest:
        unit = "rows x epochs"
        notes.append(
            f"cost: training rows of the slices through the cutoff (from {manifest_path.relative_to(root)}) "
            f"x epochs ({epochs}; 1 for a closed-form reference), the shared first model not counted"
        )
    else:
        unit = "slices x epochs"
        notes.append(
            f"cost: no slice manifest at {manifest_path.relative_to(root)} (run `dvc repro slice@{name}` "
            f"or `dvc pull`): each slice counted as one row, x epochs ({epochs}; 1 for a reference)"
        )
    if seconds_per_row and manifest:
        unit = "seconds"
        notes.append(f"cost in seconds: x {seconds_per_row:g} s per row (a given figure, not measured here)")
    elif seconds_per_row:
        notes.append("seconds per row ignored: the rows per slice are unknown without the slice manifest")
        seconds_per_row = None
    results: dict[str, dict] = {}
    direction: tuple[str, bool] | None = None
    for model in models or available:
        m = load_matrix(root, name, model)
        direction = (m["metric"], m["higher_is_better"])
        epochs_here = 1 if m.get("reference") else epochs
        costs = retrain_costs(len(m["labels"]), epochs_here, train_rows) * (seconds_per_row or 1.0)
        results[model] = replay_policies(
            m["matrix"],
            m["higher_is_better"],
            costs,
            policy.every,
            shift=shift,
            estimate=(estimates or {}).get(model),
            shift_thresholds=policy.shift_thresholds,
            drop_thresholds=policy.drop_thresholds,
        )
        results[model]["labels"] = m["labels"]
        results[model]["reference"] = bool(m.get("reference"))
    if direction is None:
        raise DriftError(f"no model of {name} has a metrics file in {metrics_dir}: run `dvc repro`")
    return {
        "dataset": name,
        "metric": direction[0],
        "higher_is_better": direction[1],
        "cost_unit": unit,
        "notes": notes,
        "models": results,
    }


def policy_rows(result: dict) -> list[dict]:
    """Long format for a DVC scatter plot: one row per model and policy."""
    return [
        {
            "model": model,
            "policy": p["name"],
            "cost": round(p["cost"], 6),
            "mean": None if p["mean"] is None else round(p["mean"], 6),
            "worst": None if p["worst"] is None else round(p["worst"], 6),
            "retrainings": p["retrainings"],
            "pareto": p["pareto"],
            "best": p["best"],
            "cost_unit": result["cost_unit"],
        }
        for model, r in result["models"].items()
        for p in r["policies"]
    ]


def write_policy_report(
    name: str,
    policy: PolicyParams,
    epochs: int,
    root: Path = Path("."),
    shift=None,
    estimates: dict | None = None,
) -> dict:
    """The report stage's policy comparison: plots/<ds>/policies.png (score against cost, per model) and
    plots/policies/<ds>.json (policy_rows, for a DVC plot). policy, epochs, shift / estimates as for
    dataset_policies; when None,
    the shift (plots/<ds>/shift/matrix.json) and estimates (plots/<ds>/<model>/estimate.json) found in the
    report are used, if any."""
    # lazy: matplotlib, only when the Pareto plot is drawn (not for `drift policy`)
    from drift.report.plots import pareto_plot

    root = Path(root)
    p = dataset_paths(name, root)
    result = dataset_policies(name, policy, epochs, root, shift=shift, estimates=estimates)
    write_json(p["policies"], policy_rows(result))
    pareto_plot(result, p["plots"] / "policies.png")
    return result

"""The pure readers of results: what the report stage committed (metrics/, plots/), at this checkout or at
another revision or DVC experiment, as plain dicts and arrays. No rendering here: the CLI (drift/cli/) draws
them with Rich, scripts and tests read them directly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from drift.core.errors import DriftError, close_matches
from drift.core.params import read_yaml
from drift.core.paths import METRICS, PLOTS, dataset_paths
from drift.protocol.summary import (
    STATS,
    id_future_decay,
    is_reference,
    ranking,
    reference_margins,
)
from drift.report.metrics_file import ModelMetrics

STAGE_FOLDERS = ("embed", "evaluate", "ingest", "train")  # metrics/<stage>/: no dataset's results


def load_results(
    metrics_dir: Path, dataset: str | None = None, declared: list[str] | None = None
) -> dict[str, dict[str, dict]]:
    """{dataset: {model: metrics}} from metrics/<dataset>/<model>.json (what `dvc metrics show` reads), for
    the datasets `declared` (the workspace's params.yaml `datasets`: a folder another experiment left is no
    result of this one); None: every dataset of the table with a folder."""
    from drift.core.dataset_registry import DATASETS

    # a dataset's folder: a built-in dataset's, or any but the stages' own (a configured table's)
    folders = sorted(p for p in metrics_dir.glob("*") if p.is_dir() and p.name not in STAGE_FOLDERS)
    known = set(DATASETS) | {p.name for p in folders}
    if dataset is not None and dataset not in known:
        raise DriftError(f"unknown dataset {dataset!r}: {close_matches(dataset, known)}")
    if dataset is not None and declared is not None and dataset not in declared:
        raise DriftError(
            f"{dataset} is not a dataset of this workspace's params.yaml (datasets: "
            f"{', '.join(declared) or 'none'}): add it there and run `dvc repro`"
        )
    wanted = known if declared is None else set(declared)
    results = {}
    for folder in (p for p in folders if p.name in wanted):
        if dataset and folder.name != dataset:
            continue
        models = {f.stem: read_metrics(f, folder.name) for f in sorted(folder.glob("*.json"))}
        if models:
            results[folder.name] = models
    if not results:
        where = f"{metrics_dir}/{dataset or '<dataset>'}/"
        raise DriftError(f"no results in {where}: run `dvc repro` first")
    return results


def read_metrics(path: Path, dataset: str) -> dict:
    """metrics/<dataset>/<model>.json validated (ModelMetrics; a file of another version or a damaged one is
    one DriftError line naming it and `dvc repro -f report@<dataset>`), as the plain dict the file holds."""
    return ModelMetrics.from_file(path, dataset).as_json()


def summary_rows(models: dict[str, dict], by: str) -> list[dict]:
    """One dataset's metrics (model -> metrics) as summary rows in rank order: each model's metrics with
    model, rank (None for a reference), reference, ranked_by and, for the models that are not references,
    margin_prior, margin_linear, margin_tfidf and beats_prior (recomputed from the IDs, so older metrics files
    get them too)."""
    higher = next(iter(models.values()))["higher_is_better"]
    margins = reference_margins(models, higher)
    return [
        {
            **models[r["model"]],
            "model": r["model"],
            "rank": r["rank"],
            "reference": is_reference(r["model"], models[r["model"]]),
            "ranked_by": by,
            **margins.get(r["model"], {}),
        }
        for r in ranking(models, higher, by)
    ]


def label_free(root: Path, dataset: str) -> dict[str, dict]:
    """{model: how well the label-free signals predicted its decay}: Spearman rho over the future cells
    between the true drop M[i][i] - M[i][j] and the shift, the novel share and the estimate's own drop
    (tables/<ds>-shift.json), and the estimate's mean absolute error over those cells
    (metrics/<ds>/<model>.json). Empty when the report has no shift summary (an older report)."""
    p = dataset_paths(dataset, root)
    if not p["shift_summary"].exists():
        return {}
    correlation = json.loads(p["shift_summary"].read_text()).get("correlation", {})
    out = {}
    for model, signals in correlation.items():
        metrics = p["metrics"] / f"{model}.json"
        estimate = ModelMetrics.from_file(metrics, dataset).estimate if metrics.exists() else None
        rho_estimate = next((v["rho"] for k, v in signals.items() if k.startswith("estimate_")), None)
        out[model] = {
            "rho_shift": (signals.get("shift") or {}).get("rho"),
            "rho_novelty": (signals.get("novelty") or {}).get("rho"),
            "rho_estimate": rho_estimate,
            "estimate_method": estimate.method if estimate else None,
            "estimate_mae": estimate.mae_future if estimate else None,
        }
    return out


def report_datasets(root: Path) -> list[str]:
    """Datasets with a report: plots/<ds>/<model>/matrix.json exists (plots/deviations, plots/forgetting
    aside)."""
    return sorted({p.parent.parent.name for p in (Path(root) / PLOTS).glob("*/*/matrix.json")})


def report_models(root: Path, dataset: str) -> list[str]:
    """The models (and the cohort mean) with a matrix in plots/<ds>/; the shift matrix beside them is no
    model."""
    shift = dataset_paths(dataset, root)["shift"]
    return sorted(
        p.parent.name
        for p in dataset_paths(dataset, root)["plots"].glob("*/matrix.json")
        if p.parent != shift
    )


def from_long_format(rows: list[dict]) -> tuple[list[str], np.ndarray]:
    """The slice labels (in their order) and the [K, K] matrix of long-format rows {train, eval, value}."""
    labels = list(dict.fromkeys(r["train"] for r in rows))
    index = {label: i for i, label in enumerate(labels)}
    matrix = np.full((len(labels), len(labels)), np.nan)
    for r in rows:
        if r["value"] is not None:
            matrix[index[r["train"]], index[r["eval"]]] = r["value"]
    return labels, matrix


def _is_reference(root: Path, dataset: str, model: str) -> bool:
    """A reference model (baseline-*), by its metrics file when there is one."""
    from drift.report.outputs import (
        COHORT,  # lazy: matplotlib, kept out of the cli's reads
    )

    if model == COHORT:
        return False
    path = dataset_paths(dataset, root)["metrics"] / f"{model}.json"
    return is_reference(model, read_metrics(path, dataset) if path.exists() else None)


def load_matrix(root: Path, dataset: str, model: str, deviation: bool = False) -> dict:
    """One model's seed-averaged matrix (or its deviation from the cohort mean) and its metrics, from the
    committed plots/ and metrics/ files."""
    from drift.report.outputs import (
        COHORT,  # lazy: matplotlib, kept out of the cli's reads
    )

    datasets = report_datasets(root)
    if not datasets:
        raise DriftError(
            f"no report in {root / 'plots'}: run `dvc repro` (or check out a commit that has one)"
        )
    if dataset not in datasets:
        raise DriftError(f"unknown dataset {dataset!r}: {close_matches(dataset, datasets)}")
    models = report_models(root, dataset)
    if model not in models:
        raise DriftError(f"unknown model {model!r} for {dataset}: {close_matches(model, models)}")
    p = dataset_paths(dataset, root)
    metrics_path = p["metrics"] / f"{model}.json"
    if deviation and model == COHORT:
        others = ", ".join(m for m in models if m != COHORT and not _is_reference(root, dataset, m))
        raise DriftError(f"{COHORT} is what the deviations are taken from: give a model ({others})")
    if deviation and _is_reference(root, dataset, model):
        raise DriftError(
            f"{model} is a reference model, not part of the cohort: it has no deviation from the "
            f"cohort mean; drop --deviation to see its matrix"
        )
    path = p["deviations"] / f"{model}.json" if deviation else p["plots"] / model / "matrix.json"
    if not path.exists():
        raise DriftError(
            f"no {path}: the report of {dataset} predates deviations; run `dvc repro report@{dataset}`"
        )
    labels, matrix = from_long_format(json.loads(path.read_text()))

    if metrics_path.exists():
        metrics = read_metrics(metrics_path, dataset)
    else:  # the cohort mean has no metrics file: take the direction from any model of the dataset
        any_metrics = sorted(p["metrics"].glob("*.json"))
        sample = (
            read_metrics(any_metrics[0], dataset)
            if any_metrics
            else {"metric": "score", "higher_is_better": True}
        )
        metrics = {
            "metric": sample["metric"],
            "higher_is_better": sample["higher_is_better"],
            "k": len(labels),
        }
    if deviation or not metrics_path.exists():
        metrics = {**metrics, **id_future_decay(matrix, metrics["higher_is_better"])}
        metrics = {k: v for k, v in metrics.items() if not k.endswith(("_std", "_ci95"))}
    return {
        "dataset": dataset,
        "model": model,
        "deviation": deviation,
        "labels": labels,
        "matrix": matrix,
        **metrics,
    }


def _open_repo(root: Path):
    # lazy: dvc, only to read another revision
    from dvc.exceptions import NotDvcRepoError
    from dvc.repo import Repo

    try:
        return Repo(str(root))
    except NotDvcRepoError as e:
        raise DriftError(f"{root.resolve()} is not a DVC repository: run from the project's root") from e


def metrics_at(repo, rev: str) -> dict[str, dict[str, dict]]:
    """{dataset: {model: metrics}} of the drift metrics (metrics/<ds>/<model>.json) at a git revision, a DVC
    experiment or "workspace", read through DVC's own API (what `dvc metrics show` reads)."""
    from dvc.exceptions import DvcException  # lazy: dvc, only to read another revision

    try:
        shown = repo.metrics.show(revs=[rev], hide_workspace=False, on_error="return")
    except DvcException as e:
        raise DriftError(
            f"unknown revision {rev!r} ({e}): give a commit, branch, tag, HEAD~n, "
            f"a DVC experiment name (`dvc exp show`) or workspace"
        ) from e
    key = rev if rev == "workspace" else next((k for k in shown if k != "workspace"), None)
    result = shown.get(key) or {}
    if "error" in result:
        raise DriftError(f"cannot read the metrics at {rev!r}: {result['error']}")
    found: dict[str, dict[str, dict]] = {}
    for path, entry in (result.get("data") or {}).items():
        parts = Path(path).parts
        data = entry.get("data")
        if (
            len(parts) == 3
            and parts[0] == METRICS
            and isinstance(data, dict)
            and {"id", "future"} <= set(data)
        ):
            found.setdefault(parts[1], {})[Path(parts[2]).stem] = data
    return found


def params_at(repo, rev: str) -> dict:
    """Flat {"dotted.key": value} of params.yaml at a git revision, a DVC experiment or "workspace", read the
    one way every command reads it (drift.core.params.read_yaml: a key named twice is a one-line error); empty
    when the revision has no params.yaml."""
    from dvc.scm import RevError, SCMError, resolve_rev  # lazy: DVC, only for compare

    try:
        if rev == "workspace":
            text = (Path(repo.root_dir) / "params.yaml").read_text()
        else:
            with repo.scm.get_fs(resolve_rev(repo.scm, rev)).open("params.yaml") as f:
                text = f.read()
    except (OSError, RevError, SCMError):
        return {}
    flat = {}

    def walk(prefix, value):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            flat[prefix] = value

    walk("", read_yaml("params.yaml" if rev == "workspace" else f"params.yaml at {rev}", text) or {})
    return flat


def report_locks_at(repo, rev: str) -> dict[str, Any]:
    """{dataset: its report stage's dvc.lock entry} at a revision ("workspace": the file on disk); empty when
    the revision has no dvc.lock."""
    from dvc.scm import RevError, SCMError, resolve_rev  # lazy: DVC, only for compare

    try:
        if rev == "workspace":
            text = (Path(repo.root_dir) / "dvc.lock").read_text()
        else:
            with repo.scm.get_fs(resolve_rev(repo.scm, rev)).open("dvc.lock") as f:
                text = f.read()
    except (OSError, RevError, SCMError):  # no lock at that revision: nothing to tell apart
        return {}
    stages = (yaml.safe_load(text) or {}).get("stages") or {}
    return {name.split("@", 1)[1]: entry for name, entry in stages.items() if name.startswith("report@")}


def not_rerun(rows: dict[str, list[dict]], locks_a: dict, locks_b: dict) -> dict[str, list[dict]]:
    """`rows` (diff_metrics) with status "not re-run" for the unchanged models of a dataset whose report stage
    has the same dvc.lock entry at both revisions: nothing that decides its results changed, so nothing ran.
    """
    for dataset, models in rows.items():
        if dataset in locks_a and locks_a.get(dataset) == locks_b.get(dataset):
            for row in models:
                if row["status"] == "unchanged":
                    row["status"] = "not re-run"
    return rows


def _improved(stat: str, change: float | None, higher_is_better: bool) -> bool | None:
    """Whether a change is for the better: a higher ID / Future when higher is better, a lower Decay always."""
    if change is None or change == 0:
        return None
    if stat == "decay":
        return change < 0
    return change > 0 if higher_is_better else change < 0


def diff_metrics(a: dict[str, dict[str, dict]], b: dict[str, dict[str, dict]]) -> dict[str, list[dict]]:
    """Per dataset, one row per model in either revision: status (changed, unchanged, added, removed), and for
    ID, Future and Decay the value at a, at b, the change b - a and whether it is an improvement. Reference
    models (baseline-*) are rows like any other, marked "reference": true and listed after the others."""
    out = {}
    for dataset in sorted(set(a) | set(b)):
        rows = []
        ma, mb = a.get(dataset, {}), b.get(dataset, {})
        for model in sorted(set(ma) | set(mb)):
            xa, xb = ma.get(model), mb.get(model)
            ref = xb or xa
            assert ref is not None  # the model is in a or b, and a model's metrics are never empty
            higher = ref.get("higher_is_better", True)
            row = {
                "model": model,
                "metric": ref.get("metric"),
                "higher_is_better": higher,
                "status": "added" if xa is None else "removed" if xb is None else None,
                "reference": is_reference(model, ref),
            }
            for s in STATS:
                va, vb = (xa or {}).get(s), (xb or {}).get(s)
                change = None if va is None or vb is None else vb - va
                row[s] = {"a": va, "b": vb, "change": change, "improved": _improved(s, change, higher)}
            if row["status"] is None:
                same = all(row[s]["a"] == row[s]["b"] for s in STATS)
                row["status"] = "unchanged" if same else "changed"
            rows.append(row)
        out[dataset] = sorted(rows, key=lambda r: r["reference"])  # stable: by name within each group
    return out


def diff_params(a: dict, b: dict) -> dict:
    return {k: {"a": a.get(k), "b": b.get(k)} for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}

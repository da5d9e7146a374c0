"""Every path the pipeline reads or writes, in one table: the code formats it with a dataset's name, and
drift/run/pipeline.py writes dvc.yaml from the same table with DVC's `${key}`, so the two cannot disagree.

Paths are relative to the repository root (where dvc.yaml is); `dataset_paths(name, root)` joins a root.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from drift.core.errors import DriftError, check_name

# name -> template; {name} is the dataset (a foreach key in dvc.yaml)
PATHS = {
    # check: the dataset's reader and its code digest (drift/run/checks.py write_checked), the same bytes
    # while neither changes; its ingest depends on it, so params.yaml names no reader and a reader edit
    # re-runs only it
    "checked": "data/checked/{name}.json",
    # check: the bytes of the local weights its embed runs (write_checked), which its embed depends on
    "checked_embed": "data/checked/{name}.embed.json",
    # check: the declarations of its roster's heads of the user's own (write_checked), which its train and
    # evaluate depend on
    "checked_train": "data/checked/{name}.train.json",
    # ingest: canonical records and the rows it refused, with reasons
    "records": "data/records/{name}.parquet",
    "quarantine": "data/records/{name}.quarantine.parquet",
    "ingest_metrics": "metrics/ingest/{name}.json",
    # slice: the slice table (Lance) and its manifest (labels, slices, splits, which are usable)
    "slices": "data/slices/{name}.lance",
    "slice_manifest": "data/slices/{name}.json",
    # embed: which store tables hold this dataset's embeddings (the store itself lives outside the repo)
    "embeddings": "data/embeddings/{name}.json",
    # the model inputs as memory-mappable files in slice-table row order, built from the store
    # (drift/store/features.py)
    "features": "data/features/{name}",
    # train: one checkpoint per model, seed and cutoff (how many were trained or reused: run_records)
    "models": "data/models/{name}",
    # evaluate: per-seed drift matrices, one JSON per model (cells computed or reused: run_records)
    "eval": "data/eval/{name}",
    # report: small, committed results
    "metrics": "metrics/{name}",
    "plots": "plots/{name}",
    "deviations": "plots/deviations/{name}",
    "forgetting": "plots/forgetting/{name}.json",
    "tables": "tables/{name}.json",
    "tables_md": "tables/{name}.md",
    # retraining policies replayed from the matrices (drift/analysis/policy.py)
    "policies": "plots/policies/{name}.json",
    # each training's mean loss per epoch, from the checkpoints (drift/report/training.py)
    "losses": "plots/losses/{name}.json",
    # the whole report as one self-contained page (drift/report/html.py)
    "report_html": "reports/{name}.html",
    # report, drift without labels (drift/analysis/shift.py write_shift): plots in long format, then what is
    # not a plot (the summary with the decay correlations, the most novel rows) beside the tables
    "shift": "plots/{name}/shift",
    "shift_summary": "tables/{name}-shift.json",
}
CHECKED = "data/checked"  # the check stage's output: one file per dataset of the run ("checked" above)
# what a run did, not what it computed (rows embedded or found in the store, trainings and cells done or
# reused, seconds): it depends on the caches' state, so it is kept out of git and of dvc.lock (.drift/ is
# ignored); .drift/runs/{embed,train,evaluate}/ under the main repository (run_records)
RUNS = ".drift/runs"
METRICS = "metrics"  # every model's ID / Future / Decay lives in metrics/<dataset>/<model>.json
PLOTS = "plots"


def dataset_paths(name: str, root: str | Path = ".") -> dict[str, Path]:
    """Every path of dataset `name` under `root`: `name` must be an identifier (drift.core.errors.check_name),
    and each path, normalised, must stay inside `root` (a one-line DriftError otherwise)."""
    check_name(name, "dataset name", dots=False)
    root = Path(root)
    paths = {key: root / template.format(name=name) for key, template in PATHS.items()}
    for path in paths.values():
        relative = os.path.normpath(os.path.relpath(path, root))
        if relative == ".." or relative.startswith(".." + os.sep) or os.path.isabs(relative):
            raise DriftError(f"dataset {name!r} would write {path}, outside the workspace {root}: rename it")
    return paths


# paths one dataset writes inside another of its own: its plots folder holds its shift plots
NESTED = {("plots", "shift")}


def path_collision(names) -> str | None:
    """The first clash between the paths of datasets `names` (PATHS formatted with each): two datasets, or two
    outputs of one, writing the same path or one inside the other (a dataset `ingest` would write its metrics
    folder at metrics/ingest/, where every ingest writes its counts; `a-shift` its table where `a` writes its
    shift summary). None when there is none."""
    owners: dict[str, tuple[str, str]] = {}
    for name in names:
        for key, template in PATHS.items():
            path = template.format(name=name)
            if path in owners:
                return f"{_owner(*owners[path])} and {_owner(name, key)} both write {path}"
            owners[path] = (name, key)
    for path, (name, key) in owners.items():
        parts = path.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder in owners and not (owners[folder][0] == name and (owners[folder][1], key) in NESTED):
                return f"{_owner(*owners[folder])} writes {folder}, where {_owner(name, key)} writes {path}"
    return None


def _owner(name: str, key: str) -> str:
    return f"dataset {name!r} ({key})"


def dvc_path(key: str) -> str:
    """The path as dvc.yaml writes it inside a `foreach` over datasets."""
    return PATHS[key].format(name="${key}")


def main_repository(cwd: str | Path | None = None) -> Path:
    """The repository a run belongs to, also from a `dvc exp run --temp` / `--queue` copy: DVC sets $DVC_ROOT
    to the parent repository's root for experiments (and to the repository for `dvc repro`); without it, a
    working directory inside <repo>/.dvc/tmp/exps/ (where DVC makes those copies) names <repo>; else the
    working directory. What a relative path that must outlive a temporary workspace resolves against."""
    if os.environ.get("DVC_ROOT"):
        return Path(os.environ["DVC_ROOT"]).resolve()
    cwd = Path(cwd or os.getcwd()).resolve()
    for directory in (cwd, *cwd.parents):
        if (
            directory.name == "exps"
            and directory.parent.name == "tmp"
            and directory.parent.parent.name == ".dvc"
        ):
            return directory.parent.parent.parent
    return cwd


def run_records(stage: str, file: str) -> list[Path]:
    """Where a stage records what this run did: <main repository>/.drift/runs/<stage>/<file> (the latest run)
    and, in a `dvc exp run` (DVC sets $DVC_EXP_NAME, also for --temp and --queue copies), the same under
    .drift/runs/exps/<experiment>/, so a temporary workspace's record outlives it."""
    root = main_repository() / RUNS
    paths = [root / stage / file]
    if experiment := os.environ.get("DVC_EXP_NAME"):
        paths.append(root / "exps" / re.sub(r"[^A-Za-z0-9._-]", "_", experiment).lstrip(".") / stage / file)
    return paths

"""params.yaml: loading, the paths every stage agrees on, and validation before any compute."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from drift.errors import DriftError

DATA = Path("data")


def load_params(path: str | Path = "params.yaml") -> dict:
    path = Path(path)
    if not path.exists():
        raise DriftError(f"no {path} here: run from the repository root (where dvc.yaml is)")
    return yaml.safe_load(path.read_text()) or {}


def dataset_cfg(params: dict, name: str) -> dict:
    from drift.datasets import DATASETS

    if name not in DATASETS:
        from drift.errors import close_matches
        raise DriftError(f"unknown dataset {name!r}: {close_matches(name, DATASETS)}")
    if name not in params:
        raise DriftError(f"params.yaml has no section `{name}:` for dataset {name}: add one (see README)")
    return params[name] or {}


def paths(name: str) -> dict[str, Path]:
    return {
        "records": DATA / "records" / f"{name}.parquet",
        "quarantine": DATA / "records" / f"{name}.quarantine.parquet",
        "slices": DATA / "slices" / f"{name}.lance",
        "slice_manifest": DATA / "slices" / f"{name}.json",
        "embeddings": DATA / "embeddings" / f"{name}.json",
        "models": DATA / "models" / name,
        "eval": DATA / "eval" / name,
        "metrics": Path("metrics") / name,
        "plots": Path("plots") / name,
    }


def cache_dir(params: dict) -> Path:
    from drift.store import default_cache_dir

    configured = (params.get("embed") or {}).get("cache_dir")
    return Path(configured).expanduser() if configured else default_cache_dir()


def validate(params: dict, name: str) -> None:
    """Everything about one dataset's run that can be checked without computing: names, slices, roster."""
    from drift.datasets import get_dataset
    from drift.slicing import slice_edges
    from drift.train import check_roster

    cfg = dataset_cfg(params, name)
    dataset = get_dataset(name)
    slice_edges(cfg.get("slices", {}))
    models = ((params.get("train") or {}).get("models") or {}).get(name)
    if not models:
        raise DriftError(f"train.models.{name} lists no models: add some (`drift models` lists them)")
    embed = params.get("embed") or {}
    if dataset.MODALITY == "text":
        from drift.encoders import get_encoder_spec
        get_encoder_spec(embed.get("text_encoder", "minilm-l6"))
    check_roster(models, dataset.MODALITY, embed.get("text_encoder", "minilm-l6"))
    seeds = (params.get("train") or {}).get("seeds", [0])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds):
        raise DriftError(f"train.seeds must be a non-empty list of integers, got {seeds!r}")


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def run_stage(main) -> None:
    """Run a stage's main(argv); a DriftError prints one line on stderr and exits 2."""
    try:
        main(sys.argv[1:])
    except DriftError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)

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
    cfg = dict(params[name] or {})
    # a real corpus's raw input defaults to the path its DVC dependency names in `datasets`
    datasets = params.get("datasets")
    if "source" not in cfg and isinstance(datasets, dict) and datasets.get(name):
        cfg["source"] = datasets[name]
    return cfg


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

    if not isinstance(params.get("datasets"), dict):
        raise DriftError("params.yaml `datasets` must map each dataset to its raw input, e.g. `sotu: drift/datasets/sotu.py`")
    cfg = dataset_cfg(params, name)
    dataset = get_dataset(name)
    slice_edges(cfg.get("slices", {}))
    models = ((params.get("train") or {}).get("models") or {}).get(name)
    if not models:
        raise DriftError(f"train.models.{name} lists no models: add some (`drift models` lists them)")
    embed = params.get("embed") or {}
    from drift.encoders import get_encoder_spec
    for encoder in [embed.get("text_encoder", "minilm-l6"), *(embed.get("encoders") or [])]:
        get_encoder_spec(encoder)  # unknown names stop here, listing the valid ones
    check_roster(models, dataset.MODALITY, embed.get("text_encoder", "minilm-l6"), embed.get("encoders") or [])
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


PRESETS = Path("params")


def apply_preset(name: str, params_path: Path = Path("params.yaml"), presets: Path = PRESETS) -> list[str]:
    """Merge params/<name>.yaml into params.yaml, keeping its comments; returns the keys changed.

    Mappings merge key by key; lists and values replace; `datasets` is replaced whole, so a preset chooses
    which datasets the pipeline runs."""
    from ruamel.yaml import YAML

    available = sorted(p.stem for p in presets.glob("*.yaml"))
    if name not in available:
        from drift.errors import close_matches
        raise DriftError(f"unknown preset {name!r}: {close_matches(name, available)}")
    yaml_rt = YAML()
    yaml_rt.width = 120
    params = yaml_rt.load(params_path.read_text())
    preset = yaml_rt.load((presets / f"{name}.yaml").read_text())
    changed: list[str] = []

    def merge(into, update, prefix):
        for key, value in update.items():
            path = f"{prefix}{key}"
            if isinstance(value, dict) and isinstance(into.get(key), dict) and path != "datasets":
                merge(into[key], value, path + ".")
            elif into.get(key) != value:
                into[key] = value
                changed.append(path)

    merge(params, preset, "")
    with open(params_path, "w") as f:
        yaml_rt.dump(params, f)
    return changed

"""params.yaml: loading, the paths every stage agrees on, and validation before any compute."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from drift.errors import DriftError, close_matches
from drift.params import DatasetParams, Params, load, plain

DATA = Path("data")


def load_params(path: str | Path = "params.yaml") -> Params:
    """params.yaml, typed and checked (drift.params): the one way every stage and CLI command reads it. An
    unknown key or a wrong type is a one-line DriftError here, before any compute."""
    path = Path(path)
    if not path.exists():
        raise DriftError(f"no {path} here: run from the repository root (where dvc.yaml is)")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise DriftError(f"{path} is not valid YAML: {' '.join(str(e).split())}") from None
    return load(data or {})


def as_params(params) -> Params:
    """Params as they are, or a params.yaml document (a mapping) checked into Params."""
    return params if isinstance(params, Params) else load(params)


def dataset_cfg(params, name: str) -> DatasetParams:
    """Dataset `name`'s section of params.yaml (its `source` defaults to `datasets.<name>`)."""
    from drift.datasets import get_dataset

    get_dataset(name)  # an unknown name lists the valid ones
    return as_params(params).dataset(name)


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


def cache_dir(params) -> Path:
    from drift.store import default_cache_dir

    configured = as_params(params).embed.cache_dir
    return Path(configured).expanduser() if configured else default_cache_dir()


def roster(params, name: str) -> list[str]:
    """The models a dataset's run trains and reports: `train.models.<name>`, then the references
    (`train.baselines`, both by default) that give every matrix a floor."""
    train = as_params(params).train
    models = list(train.models.get(name) or [])  # a dataset without models: validate says so
    return models + [b for b in train.baselines if b not in models]


def validate(params, name: str) -> None:
    """Everything about one dataset's run that can be checked without computing, beyond the schema
    (drift.params): names of models, encoders and families, slices, the saliency cells, the roster."""
    from drift.datasets import get_dataset
    from drift.encoders import get_encoder_spec
    from drift.models import MODELS
    from drift.slicing import slice_edges
    from drift.train import check_roster

    params = as_params(params)
    cfg = dataset_cfg(params, name)
    dataset = get_dataset(name)
    _, labels = slice_edges(cfg.slices)
    grid = params.report.saliency.get(name)  # an image dataset without a grid draws a default one
    for cell in (grid.cells or []) if grid else []:
        bad = [x for x in cell if x not in labels]
        if len(cell) != 2 or bad:
            raise DriftError(f"report.saliency.{name}.cells: {cell!r} is not a [trained through, evaluated on] pair "
                             f"of slice labels of {name} (valid: {', '.join(labels)})")
    if not params.train.models.get(name):
        raise DriftError(f"train.models.{name} lists no models: add some (`drift models` lists them)")
    embed = params.embed
    for encoder in [embed.text_encoder, *embed.encoders]:
        get_encoder_spec(encoder)  # unknown names stop here, listing the valid ones
    check_roster(roster(params, name), dataset.MODALITY, embed.text_encoder, embed.encoders)
    if isinstance(params.train.lr, dict):
        families = {"default"} | {info.family.lower() for info in MODELS.values()}
        for family in params.train.lr:
            if family not in families:
                raise DriftError(f"unknown parameter train.lr.{family}: "
                                 f"{close_matches(family, families, prefix='train.lr.')}")


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
    try:
        load(plain(params))  # the merged params must hold up before they are written
    except DriftError as e:
        raise DriftError(f"params.yaml with preset {name} applied: {e}") from None
    with open(params_path, "w") as f:
        yaml_rt.dump(params, f)
    return changed

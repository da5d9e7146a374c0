"""Presets: params/<name>.yaml merged into params.yaml (`drift preset NAME`), comments kept."""
from __future__ import annotations

from pathlib import Path

from drift.core.errors import DriftError, check_name, close_matches
from drift.core.params import load, plain

PRESETS = Path("params")


def apply_preset(name: str, params_path: Path = Path("params.yaml"), presets: Path = PRESETS,
                 check=load) -> list[str]:
    """Merge params/<name>.yaml into params.yaml, keeping its comments; returns the keys changed. `check`
    validates the merged document before it is written (the CLI passes drift.data.datasets.load, which
    types the dataset sections too).

    Mappings merge key by key; lists and values replace; `datasets` is replaced whole, so a preset chooses
    which datasets the pipeline runs."""
    from ruamel.yaml import YAML  # lazy: ruamel.yaml, only when a preset is applied

    check_name(name, "preset")
    available = list_presets(presets)
    if name not in available:
        raise DriftError(f"unknown preset {name!r}: {close_matches(name, available)}")
    yaml_rt = YAML()
    yaml_rt.width = 120
    params = yaml_rt.load(params_path.read_text())
    preset = yaml_rt.load((presets / f"{name}.yaml").read_text())
    changed = merge_preset(params, preset)
    try:
        check(plain(params))  # the merged params must hold up before they are written
    except DriftError as e:
        raise DriftError(f"params.yaml with preset {name} applied: {e}") from None
    with open(params_path, "w") as f:
        yaml_rt.dump(params, f)
    return changed


def list_presets(presets: Path = PRESETS) -> list[str]:
    return sorted(p.stem for p in Path(presets).glob("*.yaml"))


def merge_preset(into: dict, preset: dict, prefix: str = "") -> list[str]:
    """Merge a preset into params (a mapping, changed in place) as `drift preset` does: mappings key by key,
    lists and values replace, `datasets` is replaced whole. Returns the keys changed."""
    changed = []
    for key, value in preset.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and isinstance(into.get(key), dict) and path != "datasets":
            changed += merge_preset(into[key], value, path + ".")
        elif into.get(key) != value:
            into[key] = value
            changed.append(path)
    return changed

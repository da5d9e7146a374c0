"""Presets: params/<name>.yaml merged into params.yaml (`drift preset NAME`), comments kept."""
from __future__ import annotations

from pathlib import Path

from drift.errors import DriftError, close_matches
from drift.params import load, plain

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

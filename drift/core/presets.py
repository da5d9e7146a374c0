"""Presets: params/<name>.yaml merged into params.yaml (`drift preset NAME`), comments kept."""
from __future__ import annotations

from pathlib import Path

from drift.core.dataset_registry import DATASETS
from drift.core.errors import DriftError, check_name, close_matches
from drift.core.params import load, plain

PRESETS = Path("params")


def apply_preset(name: str, params_path: Path = Path("params.yaml"), presets: Path = PRESETS,
                 check=load, only: bool = False) -> list[str]:
    """Merge params/<name>.yaml into params.yaml, keeping its comments; returns what changed: the keys, and for
    `datasets` what was replaced and what was kept, e.g. "datasets (sotu, synth-portraits -> amazon; kept vite)".
    `check` validates the merged document before it is written (the CLI passes drift.data.datasets.load, which
    types the dataset sections too).

    Mappings merge key by key; lists and values replace; the preset's `datasets` replace the built-in ones
    (sotu, amazon, ...), while the user's own datasets (`drift init` tables) stay with their sections; with
    `only`, `datasets` is replaced whole and the sections of the user's datasets it drops go too."""
    from ruamel.yaml import YAML  # lazy: ruamel.yaml, only when a preset is applied

    check_name(name, "preset")
    available = list_presets(presets)
    if name not in available:
        raise DriftError(f"unknown preset {name!r}: {close_matches(name, available)}")
    yaml_rt = YAML()
    yaml_rt.width = 120
    params = yaml_rt.load(params_path.read_text())
    preset = yaml_rt.load((presets / f"{name}.yaml").read_text())
    before = dict(params.get("datasets") or {})
    own = [d for d in before if d not in DATASETS]                  # the user's tables, not a built-in dataset
    changed = merge_preset(params, preset)
    if "datasets" in (preset or {}):
        after = params["datasets"]
        kept = [d for d in own if d not in after] if not only else []
        for d in kept:
            after[d] = before[d]
        dropped = [d for d in own if d not in after]
        for d in dropped:                                           # --only: their sections would be unknown
            params.pop(d, None)
            (params.get("train") or {}).get("models", {}).pop(d, None)
        replaced = [d for d in before if d not in own and d not in after]
        note = f"datasets ({', '.join(replaced) or 'none'} -> {', '.join(d for d in after if d not in kept)}"
        note += (f"; kept {', '.join(kept)}" if kept else "") + (f"; dropped {', '.join(dropped)} and their "
                                                                 f"sections" if dropped else "") + ")"
        changed = [c for c in changed if c != "datasets"]
        if dict(after) != before:
            changed.insert(0, note)
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

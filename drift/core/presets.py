"""Presets: params/<name>.yaml merged into params.yaml (`drift preset NAME`), comments kept."""

from __future__ import annotations

from pathlib import Path

from drift.core.dataset_registry import DATASETS
from drift.core.errors import DriftError, check_name, close_matches
from drift.core.params import load_params, plain, read_yaml

PRESETS = Path("params")


def apply_preset(
    name: str,
    params_path: Path = Path("params.yaml"),
    presets: Path = PRESETS,
    check=load_params,
    only: bool = False,
) -> list[str]:
    """Merge params/<name>.yaml into params.yaml, keeping its comments; returns what changed: the keys, and
    for `datasets` what was replaced and what was kept, e.g. "datasets (sotu, synth-portraits -> amazon; kept
    vite)". `check` validates the merged document before it is written (the CLI's also types the dataset
    sections: drift.data.datasets.check_datasets).

    Mappings merge key by key; lists and values replace; the preset's `datasets` replace the built-in ones
    (sotu, amazon, ...), while the user's own datasets (`drift init` tables) stay with their sections; with
    `only`, `datasets` is replaced whole and the sections of the user's datasets it drops go too."""
    from ruamel.yaml import YAML  # lazy: ruamel.yaml, only when a preset is applied

    check_name(name, "preset")
    available = list_presets(presets)
    if name not in available:
        raise DriftError(f"unknown preset {name!r}: {close_matches(name, available)}")
    read_yaml(params_path)  # a key named twice or an alias: refused before ruamel expands anything
    read_yaml(presets / f"{name}.yaml")
    yaml_rt = YAML()
    yaml_rt.width = 120
    params = yaml_rt.load(params_path.read_text())
    preset = yaml_rt.load((presets / f"{name}.yaml").read_text())
    before = dict(params.get("datasets") or {})
    own = [d for d in before if d not in DATASETS]  # the user's tables, not a built-in dataset
    changed = merge_preset(params, preset)
    if "datasets" in (preset or {}):
        after = params["datasets"]
        kept = [d for d in own if d not in after] if not only else []
        for d in kept:
            after[d] = before[d]
        dropped = [d for d in own if d not in after]
        for d in dropped:  # --only: their sections would be unknown
            params.pop(d, None)
            (params.get("train") or {}).get("models", {}).pop(d, None)
        replaced = [d for d in before if d not in own and d not in after]
        note = f"datasets ({', '.join(replaced) or 'none'} -> {', '.join(d for d in after if d not in kept)}"
        note += (
            (f"; kept {', '.join(kept)}" if kept else "")
            + (f"; dropped {', '.join(dropped)} and their sections" if dropped else "")
            + ")"
        )
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


def merged_document(
    preset: str | None,
    params_path: Path = Path("params.yaml"),
    presets: Path = PRESETS,
    overrides: dict | None = None,
) -> dict:
    """params.yaml's document with preset `preset` (None: none) and then `overrides` merged in memory, as
    `drift preset` and `dvc exp run -S` would merge them; nothing is written. drift.core.params.load_params
    types it."""
    params_path = Path(params_path)
    if not params_path.exists():
        raise DriftError(f"no {params_path} here: run from the repository root (where dvc.yaml is)")
    data = read_yaml(params_path) or {}
    if preset is not None:
        available = list_presets(presets)
        if preset not in available:
            raise DriftError(f"unknown preset {preset!r}: {close_matches(preset, available)}")
        merge_preset(data, read_yaml(Path(presets) / f"{preset}.yaml") or {})
    merge_preset(data, overrides or {})
    return data


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

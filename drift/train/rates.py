"""Throughput a rehearsal measured (drift/run/rehearse.py), per machine, device and torch version: one JSON
file in the drift cache dir. `drift plan` projects from it; `train.engine: auto` does not read it (its table
is fixed here, so results never depend on a machine-local file); kept apart from the rehearsal so the train
stage depends on this file alone."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

from drift.store.location import local_cache_dir

RATES_FILE = "rehearsal-rates.json"  # beside plan-benchmarks.json


def machine_id() -> str:
    """This machine as the rate caches know it: host, CPU model and count."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()} / {cpu} / {os.cpu_count()} cpus"


def rates_path() -> Path:
    return local_cache_dir() / RATES_FILE


def rates_key(device: str) -> str:
    import torch  # lazy: only its version string

    return f"{machine_id()} | {device} | torch {torch.__version__}"


def _entries(path: Path) -> dict:
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except json.JSONDecodeError:  # a torn write: as if nothing was measured
        return {}


def read_rates(device: str = "cpu") -> dict:
    """{dataset: what the last rehearsal of it measured} on this machine and device, or {}."""
    return _entries(rates_path()).get(rates_key(device), {})


def write_rates(device: str, dataset: str, rates: dict) -> Path:
    path = rates_path()
    entries = _entries(path)
    entries.setdefault(rates_key(device), {})[dataset] = rates
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


# `train.engine: auto`: the engine per device kind and model family, fixed here from the rehearsals'
# measurements (batched / solo on the 2-core reference CPU: probes 1.07-1.78x, every head 0.43-1.00x;
# docs/decisions.md), so the same params and device kind train with the same engine, and so the same
# checkpoint keys, on every machine. On a GPU every family the batched engine stacks is batched (the engine's
# purpose: one kernel for many models).
AUTO_BATCHED = {
    "cpu": frozenset({"Frozen"}),
    "cuda": frozenset({"MLP", "CNN", "ResNet", "ViT", "FFN", "TextCNN", "Transformer", "Frozen"}),
}


def engine_choice(family: str, device: str = "cpu") -> tuple[str, str]:
    """(engine, why) for `train.engine: auto`: a function of the model's family and the device kind only
    (AUTO_BATCHED), never of a machine-local file; a rehearsal's measured rates are shown beside it, not used.
    """
    engine = "batched" if family in AUTO_BATCHED.get(device, frozenset()) else "solo"
    return engine, f"train.engine auto on {device}: {family} {engine}"


def measured_engines(dataset: str, family: str, device: str = "cpu") -> dict | None:
    """{solo, batched} rows/s a rehearsal measured for this dataset and family on this machine, or None."""
    measured = read_rates(device).get(dataset, {}).get("engines", {}).get(family)
    return measured if measured and measured.get("solo") and measured.get("batched") else None

"""Throughput a rehearsal measured (drift/run/rehearse.py), per machine, device and torch version: one JSON file
in the drift cache dir. `drift plan` projects from it and `train.engine: auto` picks the faster engine per model
family from it; kept apart from the rehearsal so the train stage depends on this file alone."""
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


def engine_choice(dataset: str, family: str, device: str = "cpu") -> tuple[str, str]:
    """(engine, why) for `train.engine: auto`: the faster of solo and batched as a rehearsal measured them for
    this dataset and model family on this machine and device; solo where none did."""
    measured = read_rates(device).get(dataset, {}).get("engines", {}).get(family)
    if not measured or not measured.get("solo") or not measured.get("batched"):
        return "solo", "no rehearsal measured it here"
    engine = "batched" if measured["batched"] > measured["solo"] else "solo"
    return engine, f"rehearsal: solo {measured['solo']:.0f} vs batched {measured['batched']:.0f} rows/s"

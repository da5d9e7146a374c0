"""What every stage script shares: one-line errors instead of tracebacks, JSON outputs, and the check that a
stage's inputs exist before it starts."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from drift.core.errors import DriftError
from drift.core.paths import dataset_paths


def run_stage(main) -> None:
    """Run a stage's main(argv); a DriftError prints one line on stderr and exits 2."""
    try:
        main(sys.argv[1:])
    except DriftError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


def write_json(path: Path, data) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


# which stage writes each input a later stage reads (drift/core/paths.py names)
WRITTEN_BY = {"records": "ingest", "slices": "slice", "slice_manifest": "slice", "embeddings": "embed",
              "models": "train", "eval": "evaluate"}


def require(name: str, *keys: str, root: str | Path = ".") -> dict[str, Path]:
    """Dataset `name`'s paths, after checking that inputs `keys` exist: a stage run before them (after a failed
    upstream stage, say) stops with one line naming what is missing and the stage to run."""
    paths = dataset_paths(name, root)
    for key in keys:
        if not paths[key].exists():
            stage = WRITTEN_BY[key]
            raise DriftError(f"{paths[key]} is missing: run `dvc repro {stage}@{name}` first (or `dvc repro`)")
    return paths

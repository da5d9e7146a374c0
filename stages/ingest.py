"""Stage ingest@<dataset>: source -> canonical records + quarantine + metrics/ingest/<dataset>.json (counts
per file, and a warning line for each file whose rows vanished)."""

from drift.core.interrupt import exit_on_interrupt, stage_name

exit_on_interrupt(stage_name())  # first: a Ctrl-C while the imports below load is one line too

from drift.core.environment import configured_cpu_path, use_cpu_path

use_cpu_path(configured_cpu_path())  # compute.cpu_path, before numpy and torch load (they read it once)

import sys

from drift.core.params import load_params
from drift.core.paths import dataset_paths
from drift.core.stage import run_stage
from drift.data.datasets import check_datasets, dataset_cfg
from drift.data.ingest import ingest
from drift.data.ingest_counts import IngestCounts
from drift.data.validate import validate_data


def main(argv: list[str]) -> None:
    name = argv[0]
    params = load_params()
    check_datasets(params)
    cfg = dataset_cfg(params, name)
    validate_data(params, name, cfg)  # bad names or slices stop here, before any compute (models: at train)
    p = dataset_paths(name)
    counts = IngestCounts.parse(
        ingest(name, cfg, p["records"], p["quarantine"]), f"ingest@{name}'s counts", name
    )
    counts.to_file(p["ingest_metrics"])
    for line in counts.warnings:  # files whose rows vanished: damaged, empty, every row dropped by one rule
        print(f"warning: {line}", file=sys.stderr)


if __name__ == "__main__":
    run_stage(main)

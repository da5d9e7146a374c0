"""Stage slice@<dataset>: records -> the time-sliced Lance table with a fixed stratified train/test split; the
dataset's slicing keys and label names come with the records (ingest writes them), not from its reader."""

from drift.core.interrupt import exit_on_interrupt, stage_name

exit_on_interrupt(stage_name())  # first: a Ctrl-C while the imports below load is one line too

from drift.core.environment import configured_cpu_path, use_cpu_path

use_cpu_path(configured_cpu_path())  # compute.cpu_path, before numpy and torch load (they read it once)

import sys

from drift.core.params import load_params
from drift.core.stage import require, run_stage
from drift.data.records import read_records
from drift.store.slices import slice_dataset, slice_warnings, write_slice_table


def main(argv: list[str]) -> None:
    name = argv[0]
    params = load_params()
    p = require(name, "records")
    table, manifest = slice_dataset(read_records(p["records"]), name, params.split)
    write_slice_table(table, p["slices"], manifest)
    for line in slice_warnings(manifest):
        print(f"warning: {line}", file=sys.stderr)


if __name__ == "__main__":
    run_stage(main)

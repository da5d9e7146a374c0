"""Stage ingest@<dataset>: source → canonical records + quarantine + metrics/ingest/<dataset>.json."""
from pathlib import Path

from drift.config import dataset_cfg, load_params, paths, run_stage, validate, write_json
from drift.ingest import ingest


def main(argv):
    name = argv[0]
    params = load_params()
    validate(params, name)  # bad names or slices stop here, before any compute
    p = paths(name)
    counts = ingest(name, dataset_cfg(params, name), p["records"], p["quarantine"])
    write_json(Path("metrics/ingest") / f"{name}.json", counts)


if __name__ == "__main__":
    run_stage(main)

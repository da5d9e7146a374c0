"""Stage slice@<dataset>: records → the time-sliced Lance table with a fixed stratified train/test split."""
from drift.config import dataset_cfg, load_params, paths, run_stage
from drift.datasets import get_dataset
from drift.ingest import read_records
from drift.slicing import build_slices
from drift.store import write_slice_table


def main(argv):
    name = argv[0]
    params = load_params()
    cfg, dataset, p = dataset_cfg(params, name), get_dataset(name), paths(name)
    table, slices = build_slices(read_records(p["records"]), cfg, params.split)
    manifest = {"dataset": name, "task": dataset.TASK, "modality": dataset.MODALITY,
                "label_names": dataset.label_names(cfg), "min_samples": cfg.min_samples,
                "slices": slices}
    p["slices"].parent.mkdir(parents=True, exist_ok=True)
    write_slice_table(table, p["slices"], manifest)


if __name__ == "__main__":
    run_stage(main)

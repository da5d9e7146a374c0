"""Stage check: the whole params.yaml validated (schema and bounds, every dataset's section and slices, every
model of each roster against the registry and the dataset's modality, the encoders, train.lr's families)
before any other stage, on every `dvc repro` and `dvc exp run`: dvc.yaml marks it always_changed, so a typo
fails even on an up-to-date workspace. About 2 s: the models come from drift/core/model_registry.py, so no
torch, transformers, timm or lancedb is imported. Writes data/checked/<dataset>.json (its reader and the
reader's code digest), the same bytes while the reader is unchanged: its ingest depends on it, which orders it
after the check and re-runs it only when its reader changed."""

from drift.core.interrupt import exit_on_interrupt, stage_name

exit_on_interrupt(stage_name())  # first: a Ctrl-C while the imports below load is one line too

from drift.core.environment import configured_cpu_path, use_cpu_path

use_cpu_path(configured_cpu_path())  # compute.cpu_path, before numpy and torch load (they read it once)

from drift.core.params import load_params
from drift.core.stage import run_stage
from drift.run.checks import check_run, write_checked


def main(argv: list[str]) -> None:
    params = load_params()
    check_run(params)  # `drift check` runs the same, without DVC
    write_checked(params)


if __name__ == "__main__":
    run_stage(main)

"""Stage check: the whole params.yaml validated (schema and bounds, every dataset's section and slices, every
model of each roster against the registry and the dataset's modality, the encoders, train.lr's families) before
any other stage, on every `dvc repro` and `dvc exp run`: dvc.yaml marks it always_changed, so a typo fails even on
an up-to-date workspace. About 2 s: the models come from drift/core/model_registry.py, so no torch,
transformers, timm or lancedb is imported. Writes data/params.checked, the same bytes every time: every ingest
depends on it, which orders them after it and never invalidates them."""

from pathlib import Path

from drift.core.params import load_params
from drift.core.paths import PARAMS_CHECKED
from drift.core.stage import run_stage
from drift.run.checks import check_run


def main(argv):
    check_run(load_params())  # `drift check` runs the same, without DVC
    path = Path(PARAMS_CHECKED)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("params.yaml checked by stages/check.py\n")


if __name__ == "__main__":
    run_stage(main)

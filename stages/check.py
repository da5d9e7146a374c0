"""Stage check: the whole params.yaml validated (schema and bounds, every dataset's section and slices, every
model of each roster against the registry and the dataset's modality, the encoders, train.lr's families) before
any other stage, on every `dvc repro` and `dvc exp run`: dvc.yaml marks it always_changed, so a typo fails even on
an up-to-date workspace. A few seconds (the model registry imports torch). Writes data/params.checked, the same
bytes every time: every ingest depends on it, which orders them after it and never invalidates them."""
from pathlib import Path

from drift.core.params import load_params
from drift.core.paths import PARAMS_CHECKED
from drift.core.stage import run_stage
from drift.data.datasets import check_datasets, dataset_cfg
from drift.data.validate import validate_data
from drift.run.checks import validate


def main(argv):
    params = load_params()
    check_datasets(params)  # every dataset section params.yaml writes
    for name in params.datasets:
        validate_data(params, name, dataset_cfg(params, name))
        validate(params, name)  # the roster: what train would refuse, refused before ingest
    path = Path(PARAMS_CHECKED)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("params.yaml checked by stages/check.py\n")


if __name__ == "__main__":
    run_stage(main)

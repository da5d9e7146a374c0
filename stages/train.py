"""Stage train@<dataset>: for every model of the roster and seed, one checkpoint per cutoff k trained on
slices <= k (drift/train/loop.py), or copied from the checkpoint cache when nothing that decides it has
changed (drift/store/cells.py); .drift/runs/train/<dataset>.json counts both, and times each training task
(`timings`: model, checkpoints, row passes, seconds; `drift rehearse` reads them). A model whose training loss
was still falling at its last epoch (drift.train.loop.still_falling_lines) is named on stderr, one line each.
"""

from drift.core.interrupt import exit_on_interrupt, stage_name

exit_on_interrupt(stage_name())  # first: a Ctrl-C while the imports below load is one line too

from drift.core.environment import configured_cpu_path, use_cpu_path

use_cpu_path(configured_cpu_path())  # compute.cpu_path, before numpy and torch load (they read it once)

import sys

from drift.core.params import load_params, roster
from drift.core.stage import run_stage, write_run
from drift.models import get_model_info
from drift.models.slice_data import SliceData, input_settings
from drift.run.checks import validate
from drift.store.cells import ResultCache, corrupt_line
from drift.store.location import cache_dir
from drift.train.engine import train_many
from drift.train.loop import cutoff_rows, still_falling_lines, train_roster
from drift.train.rates import engine_choice
from drift.train.train_run import TrainRun


def main(argv: list[str]) -> None:
    name = argv[0]
    params = load_params(dataset=name)  # train and embed as this dataset's section overrides them
    validate(params, name)
    data = SliceData(name, input_settings(params))
    models = roster(params.train, name, params.info(name).modality)
    engines = None
    if params.train.engine == "auto":  # per family and device kind (drift/train/rates.py AUTO_BATCHED)
        device = "cuda" if params.compute.gpus_per_task else "cpu"
        engines = {m: engine_choice(get_model_info(m).family, device)[0] for m in models}
        print(
            f"train.engine auto on {device}: {', '.join(f'{m} {e}' for m, e in engines.items())}",
            file=sys.stderr,
        )
    # batched: every seed and cutoff of a model stacked
    batched = train_many if params.train.engine in ("batched", "auto") else None
    timings: list[dict] = []

    def trained(model: str, checkpoints: list[tuple[int, int]], seconds: float) -> None:
        rows = sum(len(cutoff_rows(data, k)) for _, k in checkpoints) * params.train.epochs
        timings.append(
            {
                "model": model,
                "checkpoints": len(checkpoints),
                "row_passes": int(rows),
                "seconds": round(seconds, 4),
            }
        )

    counts, corrupt = train_roster(
        data,
        models,
        params.train,
        data.paths["models"],
        ResultCache(cache_dir(params.embed)),
        params.compute,
        batched,
        engines,
        on_trained=trained,
    )
    # the damaged cache files' names: printed, not recorded
    if line := corrupt_line(f"train@{name}", corrupt, "checkpoint(s)"):
        print(line, file=sys.stderr)
    engine = engines or {m: "batched" if batched else "solo" for m in models}
    record = {"dataset": name, **counts, "engines": engine, "timings": timings}
    write_run("train", f"{name}.json", TrainRun.parse(record, f"train@{name}'s counts", name))
    for line in still_falling_lines(name, models, data.paths["models"]):  # not converged: one line a model
        print(line, file=sys.stderr)


if __name__ == "__main__":
    run_stage(main)

"""Stage evaluate@<dataset>: every checkpoint on every slice -> one drift matrix per model and seed
(drift/evaluate/fill_matrices.py `evaluate_roster`), each cell scored under params.yaml `evaluate:`; cells
already scored come from the cell cache (drift/store/cells.py), and .drift/runs/evaluate/<dataset>.json counts
the cells computed and reused, and times each (model, seed) task (`timings`: model, seed, checkpoints, rows
predicted, cells, seconds; `drift rehearse` reads them)."""

from drift.core.interrupt import exit_on_interrupt, stage_name

exit_on_interrupt(stage_name())  # first: a Ctrl-C while the imports below load is one line too

from drift.core.environment import configured_cpu_path, use_cpu_path

use_cpu_path(configured_cpu_path())  # compute.cpu_path, before numpy and torch load (they read it once)

import sys

from drift.core.params import load_params, roster
from drift.core.stage import require, run_stage, write_run
from drift.evaluate.eval_result import EvaluateRun
from drift.evaluate.fill_matrices import evaluate_roster
from drift.models.slice_data import SliceData, input_settings
from drift.store.cells import ResultCache, corrupt_line
from drift.store.location import cache_dir


def main(argv: list[str]) -> None:
    name = argv[0]
    params = load_params(dataset=name)  # train and embed as this dataset's section overrides them
    # slice and embed first, then train: the first missing input is named
    data = SliceData(name, input_settings(params))
    p = require(name, "models")
    timings: list[dict] = []

    def evaluated(model: str, seed: int, cutoffs: list[int], seconds: float) -> None:
        timings.append(
            {
                "model": model,
                "seed": seed,
                "checkpoints": len(cutoffs),
                "rows": len(data.labels) * len(cutoffs),
                "cells": len(cutoffs) * int(sum(data.usable)),
                "seconds": round(seconds, 4),
            }
        )

    results, counts, corrupt = evaluate_roster(
        data,
        roster(params.train, name, params.info(name).modality),
        p["models"],
        params.train.threads,
        ResultCache(cache_dir(params.embed)),
        params.compute,
        on_evaluated=evaluated,
        rules=params.evaluate,
    )
    for model, result in results.items():
        result.to_file(p["eval"] / f"{model}.json")
    # the damaged cache files' names: printed, not recorded
    if line := corrupt_line(f"evaluate@{name}", corrupt, "cell(s)"):
        print(line, file=sys.stderr)
    record = {"dataset": name, **counts, "timings": timings}
    write_run("evaluate", f"{name}.json", EvaluateRun.parse(record, f"evaluate@{name}'s counts", name))


if __name__ == "__main__":
    run_stage(main)

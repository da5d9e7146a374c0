"""What another text encoder costs: each encoder's rows/s through the embed stage's encoder
(TextEncoder.encode, the pinned CPU path), on the same State of the Union paragraphs, against the first one
measured in the same run.

Encoders are built-in names or declarations (`name=folder`: a sentence-transformers folder, declared as
params.yaml's `encoders:` declares it). Rounds alternate between the encoders, so a busy machine slows them
alike.

    python bench/bench_encoders.py minilm-l6 mpnet-v2=/models/all-mpnet-base-v2   # 256 paragraphs, 64 tokens
    python bench/bench_encoders.py --quick                                        # MiniLM alone, 16 paragraphs
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drift.core.environment import pin_cpu_code_path  # noqa: E402

pin_cpu_code_path()  # the stages' CPU path (compute.cpu_path portable) for whatever this run computes

from bench.bench_cache import sotu_paragraphs  # noqa: E402
from drift.core.encoder_registry import declare_encoders  # noqa: E402
from drift.encoders.text import TextEncoder  # noqa: E402


def parse_encoders(items: list[str]) -> list[str]:
    """Encoder names, declaring each `name=folder` as a sentence-transformers encoder read from that folder."""
    declared = {}
    for item in items:
        name, _, folder = item.partition("=")
        if folder:
            declared[name] = {"library": "sentence-transformers", "id": str(Path(folder).resolve())}
    declare_encoders(declared)
    return [item.partition("=")[0] for item in items]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "encoders",
        nargs="*",
        default=["minilm-l6"],
        help="built-in names or name=folder declarations; the first is the baseline (default: minilm-l6)",
    )
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="16 paragraphs, one round")
    args = ap.parse_args(argv)
    rows, rounds = (16, 1) if args.quick else (args.rows, args.rounds)
    names = parse_encoders(args.encoders)
    texts = sotu_paragraphs(rows)
    encoders = {name: TextEncoder(name, max_length=args.max_length) for name in names}
    seconds = {name: 0.0 for name in names}
    for _ in range(rounds):
        for name, encoder in encoders.items():
            start = time.perf_counter()
            encoder.encode(texts)
            seconds[name] += time.perf_counter() - start
    base = names[0]
    print(f"{rows} paragraphs x {rounds} rounds, max length {args.max_length}, the embed stage's encoder")
    for name in names:
        rate = rows * rounds / seconds[name]
        width = encoders[name].spec.dim
        print(
            f"{name:>16}: {width}-d, {rate:7.1f} rows/s, {seconds[name] / seconds[base]:5.2f}x {base}'s time"
        )


if __name__ == "__main__":
    main()

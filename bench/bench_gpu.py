"""The campaign on a GPU, in one prepared run: the device's matmul rate, the embed path's tokens per second against
it (RoBERTa-base at 128 tokens), the batched engine against one model at a time for the S-size heads, and
rehearsals of paper-amazon and paper-yearbook (drift rehearse, full encoder width) with the projected hours of
each campaign on this device beside Table 1's A100 hours. Aims: embed >= 40% of the bf16 matmul rate, batched
>= 10x the rows/s of one model at a time, a campaign in at most 1/20 of the paper's 660.5 A100 GPU-hours.

    python bench/bench_gpu.py                   # on the GPU (cuda when there is one), under 10 minutes
    python bench/bench_gpu.py --quick           # the same code path, tiny sizes, paper-amazon only, on the CPU
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drift.core.environment import pin_cpu_code_path  # noqa: E402

pin_cpu_code_path()  # the stages' CPU path (compute.cpu_path portable) for whatever this run computes

from drift.core.dataset_registry import dataset_info
from drift.core.environment import deterministic
from drift.data.datasets import get_dataset
from drift.encoders.text import TextEncoder
from drift.protocol.tasks import get_task
from drift.run.plan import BenchInput, _synthetic_inputs, _synthetic_targets, plan
from drift.run.rehearse import rehearse, write_standin
from drift.train.engine import Job, train_many
from drift.train.loop import train_one

PAPER_GPU_HOURS = 660.5  # Table 1: train + evaluate, A100 GPU-hours, every corpus


def matmul_rate(device: str, size: int, seconds: float) -> tuple[float, str]:
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    a @ b
    sync(device)
    n, start = 0, time.perf_counter()
    while n < 3 or time.perf_counter() - start < seconds:
        a @ b
        n += 1
    sync(device)
    return 2 * size**3 * n / (time.perf_counter() - start), str(dtype).removeprefix("torch.")


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def utilisation(device: str) -> str:
    if not device.startswith("cuda"):
        return "n/a (cpu)"
    try:
        return f"{torch.cuda.utilization()}%"
    except Exception:  # noqa: BLE001 - pynvml missing: say so, measure the rest
        return "n/a (no pynvml)"


def embed_rate(device: str, layers: int | None, batch: int, rows: int, tmp: Path) -> tuple[float, float]:
    """Tokens/s of the embed path (TextEncoder.encode, bf16 autocast on a GPU) for a RoBERTa-base stand-in at
    128 tokens, and the FLOPs per token of its layers (2 x parameters outside the embeddings + attention)."""
    shape = write_standin("roberta", tmp / "roberta", layers)
    encoder = TextEncoder(
        "roberta",
        max_length=128,
        batch_size=batch,
        dtype="bfloat16" if device != "cpu" else "float32",
        device=device,
        weights=str(tmp / "roberta"),
    )
    words = [
        "the",
        "review",
        "said",
        "the",
        "product",
        "arrived",
        "late",
        "but",
        "works",
        "well",
        "enough",
        "for",
        "the",
        "price",
    ]
    texts = [" ".join(words[i % len(words) :] + words) * 4 for i in range(rows)]
    encoder.encode(texts[:batch])  # warm-up
    sync(device)
    start = time.perf_counter()
    _, flat, _ = encoder.encode(texts)
    sync(device)
    seconds = time.perf_counter() - start
    body = sum(p.numel() for n, p in encoder.model.named_parameters() if not n.startswith("embeddings."))
    d, n_layers = shape["width"], shape["layers"]
    flops_per_token = 2 * body + 4 * n_layers * 128 * d  # weights, and QK^T + AV at 128 tokens
    return len(flat) / seconds, flops_per_token


def engine_rates(model: str, device: str, jobs: int, rows: int) -> tuple[float, float]:
    """Rows/s of train_one (one model at a time) vs train_many on `device`, one epoch over `jobs` cutoffs."""
    from drift.core.params import TrainParams
    from drift.models import get_model_info

    kind = get_model_info(model).input
    task = get_task("binary")
    n_outputs = task.n_outputs(2)
    spec = BenchInput(
        kind,
        (3, 32, 32) if kind == "pixels" else (768,),
        128 if kind == "tokens" else 0,
        n_outputs,
        "binary",
        "image" if kind == "pixels" else "text",
        64,
        128,
    )
    inputs = _synthetic_inputs(spec, rows)
    targets = _synthetic_targets(task, rows, n_outputs)
    cfg = TrainParams(epochs=1, batch_size=64)
    rng = np.random.default_rng(0)
    work = [Job(np.sort(rng.choice(rows, rows * (k + 1) // jobs, replace=False)), k) for k in range(jobs)]
    total = sum(len(j.rows) for j in work)
    deterministic(1)
    start = time.perf_counter()
    for job in work:
        train_one(model, inputs, job.rows, targets, task, n_outputs, cfg, job.seed, spec.modality, None)
    solo = total / (time.perf_counter() - start)
    start = time.perf_counter()
    train_many(model, inputs, work, targets, task, n_outputs, cfg, spec.modality, None, device=device)
    sync(device)
    return solo, total / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, the same code path")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    device, quick = args.device, args.quick
    tmp = Path(tempfile.mkdtemp(prefix="drift-bench-gpu-"))

    flops, dtype = matmul_rate(device, 512 if quick else 8192, 0.3 if quick else 3.0)
    print(f"1. matmul {device} {dtype}: {flops / 1e12:.3f} TFLOP/s")

    tokens_s, per_token = embed_rate(
        device, 1 if quick else None, 8 if quick else 256, 16 if quick else 4096, tmp
    )
    achieved = tokens_s * per_token
    print(
        f"2. embed roberta stand-in at 128 tokens: {tokens_s:,.0f} tokens/s = {achieved / 1e12:.3f} TFLOP/s, "
        f"{100 * achieved / flops:.1f}% of the matmul rate (aim 40%)"
    )

    for model in ("ffn-s", "mlp-s") if quick else ("ffn-s", "textcnn-s", "tx-s", "mlp-s", "cnn-s"):
        solo, batched = engine_rates(model, device, 2 if quick else 16, 128 if quick else 4096)
        print(
            f"3. {model}: solo {solo:,.0f} rows/s, batched on {device} {batched:,.0f} rows/s: "
            f"{batched / solo:.2f}x (aim 10x), utilisation {utilisation(device)}"
        )

    total_hours = 0.0
    campaigns = (
        (
            "paper-amazon",
            "amazon",
            ["train.models.amazon=[ffn-s, probe-roberta]", "embed.encoders=[roberta]"],
        ),
        (
            "paper-yearbook",
            "yearbook",
            [
                "train.models.yearbook=[mlp-s, probe-resnet50-in]",
                "embed.encoders=[resnet50-in]",
                "report.saliency.yearbook.models=[mlp-s]",
            ],
        ),
    )
    # quick: the first campaign only; each preset's tiny rehearsal is tests/pipeline/test_rehearse_wheel.py's
    for preset, name, quick_set in campaigns[:1] if quick else campaigns:
        overrides = [f"embed.device={device}"] + (quick_set if quick else [])
        out = rehearse(preset, overrides, profile="tiny" if quick else "default")
        failed = [s for s in out["stages"] if s["status"] == "failed"]
        print(
            f"4. rehearse {preset} on {device}: {'passed' if out['ok'] else 'failed'} in {out['seconds']:.1f} s"
            + (f" ({failed[0]['stage']}: {failed[0]['error']})" if failed else "")
        )
        projected = plan(
            preset,
            ROOT / "params.yaml",
            ROOT / "params",
            manifest_dir=tmp / "none",
            cache_path=tmp / "plan-benchmarks.json",
            seconds=0.2 if quick else 1.0,
            rates_device=device,
        )
        hours = projected["projected_hours"]["here"]
        paper = get_dataset(name).PAPER_COST
        paper_hours = paper["train_gpu_h"] + paper["eval_gpu_h"]
        total_hours += hours
        print(
            f"5. {preset} ({dataset_info(name).modality}) projected {hours:,.2f} h on {device} vs Table 1 "
            f"{paper_hours:,.1f} A100 h: {paper_hours / max(hours, 1e-9):,.1f}x less"
        )
    print(
        f"6. {'the campaign' if quick else 'both campaigns'} {total_hours:,.2f} h on {device}; the paper's three "
        f"{PAPER_GPU_HOURS} A100 h "
        f"(aim at most {PAPER_GPU_HOURS / 20:.1f} h)"
    )
    print(json.dumps({"device": device, "matmul_flops": flops, "embed_tokens_per_s": tokens_s}))


if __name__ == "__main__":
    main()

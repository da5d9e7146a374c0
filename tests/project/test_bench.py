"""Every script in bench/ runs in its quick mode (`--quick`: tiny sizes, the same code path) and prints the
ratio lines it promises, so a benchmark broken by a change elsewhere fails here, not months later by hand."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
NUM = r"-?\d[\d,]*(\.\d+)?"  # a printed figure: never nan or inf

# per script, the lines its output must hold (regular expressions, one line each): the ratios against its
# baseline
PROMISED = {
    "bench_backends.py": [
        rf"^1\. matmul float32 512x512 on \d+ threads: {NUM} GFLOP/s \(native path, the CPU's own\); this process's "
        rf"\w+ path {NUM} GFLOP/s$",
        rf"^2\. 8 paragraphs x 1 rounds, max length 32, batch 32, {NUM} tokens; {NUM} MFLOP per token",
        *(
            rf"^   {name} +{NUM} tokens/s +{NUM}x the baseline +{NUM}% of the matmul rate +min cosine to torch {NUM}, "
            rf"max \|diff\| \d\.\de[+-]\d\d$"
            for name in (
                r"bare SentenceTransformer\.encode",
                r"torch \(embed stage\)",
                "onnx",
                "onnx-int8",
                "openvino",
                "openvino-int8",
            )
        ),
        rf"^3\. fastest float32 backend (onnx|openvino): {NUM}x the embed stage, equal vectors: (yes|no) \(goal 3x: "
        rf"(met|not met)\); {NUM}% of the matmul rate \(goal 40%: (met|not met)\)$",
        rf"^4\. the ceiling: a float32 backend doing the embed stage's FLOPs at 100% of the matmul rate would be "
        rf"{NUM}x the stage; (onnx|openvino) is {NUM}x, {NUM}% of that$",
    ],
    "bench_cache.py": [
        rf"^1\. embed stage {NUM} s vs bare SentenceTransformer\.encode {NUM} s: overhead [+-]{NUM}%",
        rf"^2\. warm re-run {NUM} s vs cold {NUM} s: {NUM}x faster",
        rf"^3\. ffn-s epoch from the cache {NUM} s .* vs encoder on every batch {NUM} s: {NUM}x faster",
        rf"^4\. load 150 rows .*: cache {NUM} s vs \.npy mmap {NUM} s: {NUM}x the memory map's time",
        rf"^5\. append 8 rows to tables of 50 and 200 rows: .*\(ratio {NUM}\); store side alone .*\(ratio {NUM};",
        rf"^   key lookup of 150 keys: .* per call \({NUM}x\)",
    ],
    "bench_cpu_path.py": [
        *(
            rf"^{stage} +portable {NUM} s \(CPU {NUM} s\) +native {NUM} s \(CPU {NUM} s\) +native/portable {NUM}x wall, "
            rf"{NUM}x CPU; same bits: (yes|no)$"
            for stage in ("embed", "train")
        ),
    ],
    "bench_encoders.py": [
        r"^16 paragraphs x 1 rounds, max length 64, the embed stage's encoder$",
        rf"^ +minilm-l6: 384-d, +{NUM} rows/s, +{NUM}x minilm-l6's time$",
    ],
    "bench_engine.py": [
        r"^model +solo rows/s +batched rows/s +ratio +predict ckpt/s +predict_many +ratio +max \|diff\|",
        *(
            rf"^{model} +{NUM} +{NUM} +{NUM}x +{NUM} +{NUM} +{NUM}x +\d\.\de[+-]\d\d$"
            for model in ("ffn-s", "mlp-s")
        ),
    ],
    "bench_gpu.py": [
        rf"^1\. matmul \S+ \w+: {NUM} TFLOP/s$",
        rf"^2\. embed roberta stand-in at 128 tokens: {NUM} tokens/s = {NUM} TFLOP/s, {NUM}% of the matmul rate",
        *(
            rf"^3\. {model}: solo {NUM} rows/s, batched on \S+ {NUM} rows/s: {NUM}x"
            for model in ("ffn-s", "mlp-s")
        ),
        # quick mode rehearses paper-amazon only (every preset's tiny rehearsal:
        # tests/pipeline/test_rehearse_wheel.py)
        rf"^4\. rehearse paper-amazon on \S+: passed in {NUM} s$",
        rf"^5\. paper-amazon \(text\) projected {NUM} h on \S+ vs Table 1 {NUM} A100 h: {NUM}x less$",
        rf"^6\. the campaign {NUM} h on \S+; the paper's three 660\.5 A100 h",
    ],
    "bench_ingest.py": [
        *(
            rf"^{ds} +1x +{NUM} +{NUM}( \| +{NUM} +{NUM}){{4}} \| +{NUM} +{NUM} +{NUM}$"
            for ds in ("amazon", "arxiv")
        ),
        r"^fast = fast-2 \(both cores\)\. Records are byte-identical",
        *(
            rf"^{ds}: {kind} peak RSS grows {NUM}x"
            for ds in ("amazon", "arxiv")
            for kind in ("line", "fast-2", "pandas")
        ),
    ],
    "bench_novelty.py": [
        r'^\{"backend": "numpy", "reference_rows": 1000, "queries": 200, ',
        (
            rf'^\{{"backend": "lancedb", "reference_rows": 1000, .*"recall_at_1": {NUM}, .*"time_vs_numpy": {NUM}, '
            rf'"search_vs_numpy": {NUM}\}}$'
        ),
    ],
    "bench_ray.py": [
        rf'^    "ray_overhead_first": {NUM},$',
        rf'^    "ray_overhead_best": {NUM},$',
        rf'^    "speedup": {NUM},$',
        r'^    "identical_outputs": true',
    ],
    "bench_store_s3.py": [
        rf"^1\. append {NUM} rows in {NUM} commits: local disk {NUM} rows/s, S3 {NUM} rows/s: S3 at {NUM}x local$",
        rf"^2\. read {NUM} rows \(pooled \+ tokens, a fresh store\): local disk {NUM} rows/s, S3 {NUM} rows/s: "
        rf"S3 at {NUM}x local$",
    ],
    "bench_knobs.py": [
        rf"^\| base \(embedded default\) \| 480 \| mlp-s \| {NUM} \| {NUM} \| {NUM} \|",
        rf"^\| synth-portraits\.pixels: float32 \| 480 \| mlp-s \| {NUM} \| {NUM} \| {NUM} \| [-+]{NUM} \| "
        rf"[-+]{NUM} \| [-+]{NUM} \|$",
    ],
    "bench_tfidf.py": [
        rf'^\{{"case": "paper", "rows": 300, "task": "regression", "count_rows_per_s": {NUM}, "fit_s": {NUM}, '
        rf'"predict_rows_per_s": {NUM}',
        rf"^paper: baseline-tfidf fit {NUM} s vs baseline-linear fit {NUM} s on the same 300 rows: {NUM}x "
        rf"\(CPU {NUM} s vs {NUM} s: {NUM}x\)$",
    ],
    "bench_table.py": [
        *(
            rf"^  {reader} +{NUM} s  peak RSS +{NUM} MB \(anonymous +{NUM} MB\)  kept "
            for reader in ("line", "fast", "table")
        ),
    ],
    "bench_remote.py": [
        *(
            rf"^{n}\. {what} {NUM} MB: dvc {NUM} s \({NUM} MB/s\) vs {base} {NUM} s \({NUM} MB/s\): {NUM}x the copy's "
            rf"throughput; {NUM}x beyond DVC's fixed {NUM} s$"
            for n, what, base in (
                (1, "push to a directory remote", "cp -r"),
                (2, "pull from a directory remote", "cp -r"),
                (3, r"push to S3 \(local server\)", "boto3 upload_file"),
                (4, r"pull from S3 \(local server\)", "boto3 download_file"),
            )
        ),
    ],
    "bench_scale.py": [
        *(
            rf"^\| 100 \(1x\) \| {NUM} GB \| {reader} \| {NUM} MB \| {NUM} \| {NUM} MB \| {NUM} \|$"
            for reader in ("features", "mmap")
        ),
        rf"^peak RSS growth 1x rows: train-features {NUM}x, train-mmap {NUM}x, evaluate-features {NUM}x",
        (
            rf"^  1x \(.*\): model inputs \(x, mask\) features {NUM} s vs mmap {NUM} s = {NUM}x its speed .*"
            rf"raw spans {NUM}x; Lance store per batch {NUM}x"
        ),
    ],
}


def test_every_bench_script_has_a_quick_test():
    scripts = {p.name for p in BENCH.glob("*.py")}
    assert scripts == set(PROMISED), (
        f"bench scripts without a quick test here: {sorted(scripts - set(PROMISED))}; "
        f"listed but gone: {sorted(set(PROMISED) - scripts)}"
    )


@pytest.mark.pipeline
@pytest.mark.parametrize("script", sorted(PROMISED))
def test_quick_mode_prints_its_ratios(script, tmp_path):
    # a private drift cache: the rehearsals' rates and the stores go there, never to the user's
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "DRIFT_CACHE_DIR": str(tmp_path / "drift-cache"),
    }
    result = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"{script} --quick failed ({result.returncode}):\n{result.stderr[-4000:]}"
    for pattern in PROMISED[script]:
        assert re.search(pattern, result.stdout, re.MULTILINE), (
            f"{script} --quick printed no line matching {pattern!r}:\n{result.stdout[-4000:]}"
        )

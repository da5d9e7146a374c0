"""Remote benchmark: `dvc push` / `dvc pull` of feature-file-shaped data to a directory remote and to a local
S3 server (moto's, on 127.0.0.1), against copying the same bytes (`cp -r` for the directory, boto3's own
upload_file / download_file for S3); and, unless --quick: machine B's `dvc pull && dvc repro` against machine
A's `dvc repro` from an empty store (the tiny sotu project the tests use), the encoder's seconds saved, B's
results equal to A's and a training epoch on B's pulled features against one on A's computed ones; then B's
`dvc pull` of a paper-shaped store's feature files (bench_scale's generator: Amazon's token lengths,
--paper-rows rows) against A's encoder time for those rows at the rate measured on A.

    python bench/bench_remote.py            # 256 MB in 16 files; then the A -> B runs
    python bench/bench_remote.py --quick    # 16 MB, transfers only: seconds
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drift.core.environment import pin_cpu_code_path  # noqa: E402

pin_cpu_code_path()  # the stages' CPU path (compute.cpu_path portable) for whatever this run computes
BIN = Path(sys.executable).parent


def sh(cmd: list[str], cwd: Path, env: dict) -> float:
    """Run a command, return its wall seconds (raises with its output when it fails)."""
    started = time.perf_counter()
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{result.stdout}\n{result.stderr}")
    return time.perf_counter() - started


def make_data(repo: Path, megabytes: int, files: int) -> int:
    """`files` .npy files of random float16 (incompressible, like token states) under repo/data/features."""
    out = repo / "data/features/bench/enc"
    out.mkdir(parents=True)
    rng = np.random.default_rng(0)
    per = megabytes * (1 << 20) // files // 2
    for i in range(files):
        np.save(out / f"part{i:02d}.npy", rng.standard_normal(per).astype(np.float16))
    return sum(p.stat().st_size for p in out.iterdir())


def transfers(tmp: Path, megabytes: int, files: int, env: dict, server) -> list[str]:
    repo = tmp / "a"
    repo.mkdir()
    sh(["git", "init", "-q"], repo, env)
    sh(["dvc", "init", "-q"], repo, env)
    size = make_data(repo, megabytes, files)
    sh(["dvc", "add", "-q", "data/features"], repo, env)
    objects = repo / ".dvc/cache"
    mb = size / (1 << 20)
    lines = []

    def row(n: int, what: str, dvc_s: float, base: str, base_s: float, fixed: float) -> str:
        """The ratio of throughputs, whole and beyond DVC's fixed cost (the same command with nothing to move:
        its start, config, remote listing), which dominates small transfers."""
        moving = max(dvc_s - fixed, 1e-3)
        return (
            f"{n}. {what} {mb:.0f} MB: dvc {dvc_s:.2f} s ({mb / dvc_s:.0f} MB/s) vs {base} {base_s:.2f} s "
            f"({mb / base_s:.0f} MB/s): {base_s / dvc_s:.2f}x the copy's throughput; "
            f"{base_s / moving:.2f}x beyond DVC's fixed {fixed:.2f} s"
        )

    # directory remote
    sh(["dvc", "remote", "add", "dir", str(tmp / "dir-remote")], repo, env)
    push = sh(["dvc", "push", "-q", "-r", "dir"], repo, env)
    fixed = sh(["dvc", "push", "-q", "-r", "dir"], repo, env)  # nothing left to push
    cp = sh(["cp", "-r", str(objects), str(tmp / "cp-copy")], tmp, env)
    lines.append(row(1, "push to a directory remote", push, "cp -r", cp, fixed))
    shutil.rmtree(objects)
    shutil.rmtree(repo / "data/features")
    pull = sh(["dvc", "pull", "-q", "-r", "dir"], repo, env)
    fixed = sh(["dvc", "pull", "-q", "-r", "dir"], repo, env)  # nothing left to pull
    back = sh(["cp", "-r", str(tmp / "cp-copy"), str(tmp / "cp-back")], tmp, env)
    lines.append(row(2, "pull from a directory remote", pull, "cp -r", back, fixed))

    # S3 remote on the local server
    server.bucket("bench")
    sh(["dvc", "remote", "add", "s3", "s3://bench/dvc"], repo, env)
    sh(["dvc", "remote", "modify", "s3", "endpointurl", server.endpoint], repo, env)
    push = sh(["dvc", "push", "-q", "-r", "s3"], repo, env)
    fixed = sh(["dvc", "push", "-q", "-r", "s3"], repo, env)
    client = server.client()
    parts = sorted((repo / "data/features/bench/enc").iterdir())
    started = time.perf_counter()
    for p in parts:
        client.upload_file(str(p), "bench", f"copy/{p.name}")
    upload = time.perf_counter() - started
    lines.append(row(3, "push to S3 (local server)", push, "boto3 upload_file", upload, fixed))
    shutil.rmtree(objects)
    shutil.rmtree(repo / "data/features")
    pull = sh(["dvc", "pull", "-q", "-r", "s3"], repo, env)
    fixed = sh(["dvc", "pull", "-q", "-r", "s3"], repo, env)
    started = time.perf_counter()
    for p in parts:
        client.download_file("bench", f"copy/{p.name}", str(tmp / f"down-{p.name}"))
    download = time.perf_counter() - started
    lines.append(row(4, "pull from S3 (local server)", pull, "boto3 download_file", download, fixed))
    return lines


def a_to_b(tmp: Path, env: dict, server) -> list[str]:
    """A's `dvc repro` from an empty store vs B's `dvc pull && dvc repro` in a fresh clone; B's results
    against A's, and a training epoch on each machine's features."""
    from tests.helpers import make_project, only, tiny_params

    params = only(tiny_params(), "sotu")
    params["train"]["models"] = {"sotu": ["ffn-s", "probe-minilm"]}
    a = make_project(tmp / "repo-a", params, Path(".drift/cache"))
    sh(["dvc", "remote", "add", "-d", "s3", "s3://team/dvc"], a, env)
    sh(["dvc", "remote", "modify", "s3", "endpointurl", server.endpoint], a, env)
    server.bucket("team")
    repro_a = sh(["dvc", "repro"], a, env)
    embed_a = json.loads((a / ".drift/runs/embed/sotu-minilm-l6.json").read_text())
    encoder_s = embed_a["seconds"]
    sh(["git", "add", "-A"], a, env)
    sh(["git", "commit", "-qm", "a"], a, env)
    sh(["dvc", "push", "-q"], a, env)
    b = tmp / "repo-b"
    sh(["git", "clone", "-q", str(a), str(b)], tmp, env)
    b_s = sh(["dvc", "pull", "-q"], b, env) + sh(["dvc", "repro"], b, env)
    embed = ".drift/runs/embed/sotu-minilm-l6.json"  # rewritten by the embed stage whenever it runs
    ran = (b / embed).read_bytes() != (a / embed).read_bytes()
    on_b = "RUN AGAIN on B" if ran else "not run on B (its metrics file is A's)"
    differ = [p for p in ("data/models", "data/eval") if tree_bytes(a / p) != tree_bytes(b / p)]
    results = "DIFFER in " + ", ".join(differ) if differ else "equal to A's byte for byte"
    return [
        (
            f"5. B's dvc pull && dvc repro {b_s:.1f} s vs A's dvc repro from an empty store {repro_a:.1f} s: "
            f"{repro_a / b_s:.1f}x faster; the embed stage's {encoder_s:.1f} s {on_b}; "
            f"checkpoints and eval JSON {results}"
        ),
        epoch_line(a, b),
    ]


def tree_bytes(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def epoch_line(a: Path, b: Path, repeats: int = 15) -> str:
    """One training epoch of ffn-s on every training row, reading A's locally computed feature files and B's
    pulled ones, alternated `repeats` times (best of each); the trained state dicts compared byte for byte."""
    import hashlib
    import io

    import torch

    from drift.core.params import load_params
    from drift.models.slice_data import SliceData, input_settings
    from drift.train.loop import deterministic, loss_weight_rows, train_one

    seconds: dict[str, list[float]] = {"A": [], "B": []}
    digests: dict = {}
    for _ in range(repeats):
        for name, repo in (("A", a), ("B", b)):
            cwd = os.getcwd()
            os.chdir(repo)  # a relative embed.cache_dir is the repository's
            try:
                params = load_params(repo / "params.yaml")
                cfg = params.train.model_copy(update={"epochs": 1})
                deterministic(cfg.threads)
                data = SliceData("sotu", input_settings(params), repo)
                inputs, targets = data.inputs("ffn-s"), data.task.target_tensor(data.labels)
                rows = np.flatnonzero(data.splits == "train")
                started = time.perf_counter()
                model = train_one(
                    "ffn-s",
                    inputs,
                    rows,
                    targets,
                    data.task,
                    data.n_outputs,
                    cfg,
                    0,
                    data.modality,
                    None,
                    loss_weight_rows(data, cfg),
                )
                seconds[name].append(time.perf_counter() - started)
            finally:
                os.chdir(cwd)
            buffer = io.BytesIO()
            torch.save(model.state_dict(), buffer)
            digests[name] = hashlib.sha256(buffer.getvalue()).hexdigest()
    a_s, b_s = min(seconds["A"]), min(seconds["B"])
    return (
        f"6. a training epoch (ffn-s, {len(rows)} rows) on B's pulled features {b_s:.3f} s vs on A's computed "
        f"ones {a_s:.3f} s: {a_s / b_s:.2f}x; the trained weights "
        f"{'equal byte for byte' if digests['A'] == digests['B'] else 'DIFFER'}"
    )


def encoder_rate(texts: list[str], max_length: int) -> float:
    """MiniLM's rows/s (this machine, model loaded, embed's batch size) on `texts` cut at max_length: a lower
    bound on a paper encoder's time, whose 768-d states cost more."""
    from drift.core.params import EmbedParams
    from drift.encoders.embed import text_encoder

    encoder = text_encoder(EmbedParams(max_length=max_length))
    encoder.encode(texts[:8])  # warm up
    started = time.perf_counter()
    encoder.encode(texts)
    return len(texts) / (time.perf_counter() - started)


def paper_shaped(tmp: Path, env: dict, server, rows: int) -> list[str]:
    """A paper-shaped store (bench_scale's generator: random 768-d token states with the Amazon fixture's
    token lengths, 8 slices) turned into feature files on A, `dvc add`ed and pushed to S3; B's `dvc pull` of
    them against encoding the same rows at MiniLM's rate on the fixture's reviews (a lower bound for A's
    encoder)."""
    import glob

    from bench_scale import amazon_token_counts, build_store

    from drift.store.embeddings import open_store
    from drift.store.features import build_embeddings, keys_sha256
    from drift.store.slices import read_slice_table

    a = tmp / "paper-a"
    a.mkdir()
    sh(["git", "init", "-q"], a, env)
    sh(["dvc", "init", "-q"], a, env)
    manifest = build_store(tmp / "paper-store", rows, amazon_token_counts(), 8)
    keys = read_slice_table(tmp / "paper-store/d.lance", columns=["key"]).column("key").combine_chunks()
    out = a / "data/features/paper/minilm-l6"
    build_embeddings(open_store(manifest, tmp / "paper-store/cache"), keys, out, keys_sha256(keys))
    size = sum(p.stat().st_size for p in out.iterdir()) / (1 << 20)
    sh(["dvc", "add", "-q", "data/features"], a, env)
    sh(["dvc", "remote", "add", "-d", "s3", "s3://paper/dvc"], a, env)
    sh(["dvc", "remote", "modify", "s3", "endpointurl", server.endpoint], a, env)
    server.bucket("paper")
    sh(["git", "add", "-A"], a, env)
    sh(["git", "commit", "-qm", "a"], a, env)
    sh(["dvc", "push", "-q"], a, env)
    b = tmp / "paper-b"
    sh(["git", "clone", "-q", str(a), str(b)], tmp, env)
    pull = sh(["dvc", "pull", "-q"], b, env)
    equal = tree_bytes(a / "data/features") == tree_bytes(b / "data/features")
    texts = [
        json.loads(line)["text"]
        for f in sorted(glob.glob(str(ROOT / "tests/fixtures/amazon2023/*.jsonl")))
        for line in Path(f).read_text().splitlines()
    ][:64]
    rate = encoder_rate(texts, 256)  # MiniLM's most positions
    encode = rows / rate
    return [
        (
            f"7. paper-shaped store, {rows} rows ({size:.0f} MB of feature files): B's dvc pull {pull:.1f} s vs "
            f"encoding them {encode:.0f} s at MiniLM's {rate:.1f} rows/s here: {encode / pull:.0f}x; "
            f"pulled files {'equal to' if equal else 'DIFFER from'} A's"
        ),
        paper_epoch(out, b / "data/features/paper/minilm-l6", tmp / "paper-store/d.lance"),
    ]


def paper_epoch(computed: Path, pulled: Path, table: Path, repeats: int = 3) -> str:
    """One ffn-s epoch on the paper-shaped store's training rows, reading A's feature files (computed there)
    and B's pulled ones, alternated `repeats` times (best of each); the trained state dicts compared."""
    import hashlib
    import io

    import torch
    from bench_scale import MAX_TOKENS

    from drift.core.params import TrainParams
    from drift.models.inputs import open_inputs
    from drift.protocol.tasks import get_task
    from drift.store.slices import read_slice_table
    from drift.train.loop import deterministic, train_one

    deterministic(1)
    columns = read_slice_table(table, columns=["split", "label"])
    task = get_task("binary")
    targets = task.target_tensor(columns.column("label").to_pylist())
    rows = np.flatnonzero(columns.column("split").to_numpy(zero_copy_only=False) == "train")
    cfg = TrainParams(epochs=1, batch_size=64, lr=1e-3)
    seconds: dict[str, list[float]] = {"A": [], "B": []}
    digests: dict = {}
    for _ in range(repeats):
        for name, folder in (("A", computed), ("B", pulled)):
            inputs = open_inputs("tokens", folder, max_tokens=MAX_TOKENS)
            started = time.perf_counter()
            model = train_one("ffn-s", inputs, rows, targets, task, task.n_outputs(2), cfg, seed=0)
            seconds[name].append(time.perf_counter() - started)
            buffer = io.BytesIO()
            torch.save(model.state_dict(), buffer)
            digests[name] = hashlib.sha256(buffer.getvalue()).hexdigest()
    a_s, b_s = min(seconds["A"]), min(seconds["B"])
    weights = "equal byte for byte" if digests["A"] == digests["B"] else "DIFFER"
    return (
        f"8. a training epoch (ffn-s, paper-shaped, {len(rows)} rows) on B's pulled features {b_s:.2f} s vs on "
        f"A's computed ones {a_s:.2f} s: {a_s / b_s:.2f}x; the trained weights {weights}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--megabytes", type=int)
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument(
        "--paper-rows", type=int, default=4000, help="rows of the paper-shaped store (4000: ~0.4 GB)"
    )
    parser.add_argument(
        "--repro",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also time the A -> B run (default: on, off with --quick)",
    )
    args = parser.parse_args()
    megabytes = args.megabytes or (16 if args.quick else 256)
    repro = (not args.quick) if args.repro is None else args.repro

    from tests.s3_server import start_s3_server

    server = start_s3_server()
    env = {
        **os.environ,
        **server.env,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "HF_HUB_OFFLINE": "1",
    }
    os.environ.update(server.env)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for line in transfers(Path(tmp), megabytes, args.files, env, server):
                print(line, flush=True)
            if repro:
                for line in a_to_b(Path(tmp), env, server):
                    print(line, flush=True)
                for line in paper_shaped(Path(tmp), env, server, args.paper_rows):
                    print(line, flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()

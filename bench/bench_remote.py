"""Remote benchmark: `dvc push` / `dvc pull` of feature-file-shaped data to a directory remote and to a local S3
server (moto's, on 127.0.0.1), against copying the same bytes (`cp -r` for the directory, boto3's own
upload_file / download_file for S3); and, unless --quick, machine B's `dvc pull && dvc repro` against machine A's
`dvc repro` from an empty store (the tiny sotu project the tests use), the encoder's seconds saved.

    python bench/bench_remote.py            # 256 MB in 16 files; then the A -> B run
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
sys.path.insert(0, str(ROOT / "tests"))
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
        return (f"{n}. {what} {mb:.0f} MB: dvc {dvc_s:.2f} s ({mb / dvc_s:.0f} MB/s) vs {base} {base_s:.2f} s "
                f"({mb / base_s:.0f} MB/s): {base_s / dvc_s:.2f}x the copy's throughput; "
                f"{base_s / moving:.2f}x beyond DVC's fixed {fixed:.2f} s")

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


def a_to_b(tmp: Path, env: dict, server) -> str:
    """A's `dvc repro` from an empty store vs B's `dvc pull && dvc repro` in a fresh clone."""
    from conftest import make_project, only, tiny_params

    params = only(tiny_params(), "sotu")
    params["train"]["models"] = {"sotu": ["ffn-s", "probe-minilm"]}
    a = make_project(tmp / "repo-a", params, Path(".drift/cache"))
    sh(["dvc", "remote", "add", "-d", "s3", "s3://team/dvc"], a, env)
    sh(["dvc", "remote", "modify", "s3", "endpointurl", server.endpoint], a, env)
    server.bucket("team")
    repro_a = sh(["dvc", "repro"], a, env)
    encoder_s = json.loads((a / "metrics/embed/sotu-minilm-l6.json").read_text())["seconds"]
    sh(["git", "add", "-A"], a, env)
    sh(["git", "commit", "-qm", "a"], a, env)
    sh(["dvc", "push", "-q"], a, env)
    b = tmp / "repo-b"
    sh(["git", "clone", "-q", str(a), str(b)], tmp, env)
    b_s = sh(["dvc", "pull", "-q"], b, env) + sh(["dvc", "repro"], b, env)
    return (f"5. B's dvc pull && dvc repro {b_s:.1f} s vs A's dvc repro from an empty store {repro_a:.1f} s: "
            f"{repro_a / b_s:.1f}x faster; the embed stage's {encoder_s:.1f} s not run on B")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--megabytes", type=int)
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--repro", action=argparse.BooleanOptionalAction, default=None,
                        help="also time the A -> B run (default: on, off with --quick)")
    args = parser.parse_args()
    megabytes = args.megabytes or (16 if args.quick else 256)
    repro = (not args.quick) if args.repro is None else args.repro

    from s3_server import start_s3_server

    server = start_s3_server()
    env = {**os.environ, **server.env, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "HF_HUB_OFFLINE": "1"}
    os.environ.update(server.env)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for line in transfers(Path(tmp), megabytes, args.files, env, server):
                print(line, flush=True)
            if repro:
                print(a_to_b(Path(tmp), env, server), flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()

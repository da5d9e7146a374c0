"""`drift rehearse` from an installed wheel: the worktree built as a wheel, installed (no deps) into a fresh
venv outside the checkout that sees the shared venv's packages but not its editable drift, then a tiny
rehearsal of each paper preset from a working directory outside the checkout: every stage passes through `dvc
repro`, on the samples and stage scripts the wheel carries (arXiv's without the frozen encoders and head sizes
Amazon's rehearsal ran)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from drift.core.encoder_registry import ENCODERS
from drift.core.model_registry import get_model_info
from drift.run.rehearse import PROFILES
from tests.helpers import ROOT

pytestmark = pytest.mark.compute  # its lane (tests/conftest.py): out of `make test-fast`

PRESETS = ("paper-yearbook", "paper-amazon", "paper-arxiv")


def arxiv_overrides() -> list[str]:
    """paper-arxiv without what paper-amazon's rehearsal (just before, from the same wheel) ran: its frozen
    encoders but the text encoder, and their probes; of the heads Amazon trained, the S size of each family
    (the M and L sizes change widths and options, not the task's loss and outputs). arXiv's rehearsal keeps
    its text encoder, its own probes, one head of each family and every reference."""
    preset = yaml.safe_load((ROOT / "params" / "paper-arxiv.yaml").read_text())
    amazon = yaml.safe_load((ROOT / "params" / "paper-amazon.yaml").read_text())
    encoders = amazon["embed"]["encoders"]
    keep = [
        e for e in preset["embed"]["encoders"] if e not in encoders or e == preset["embed"]["text_encoder"]
    ]
    models = [
        m
        for m in preset["train"]["models"]["arxiv"]
        if (
            m.removeprefix("probe-") in keep
            if m.startswith("probe-")
            else m not in amazon["train"]["models"]["amazon"] or get_model_info(m).size == "S"
        )
    ]
    return ["-S", f"embed.encoders=[{', '.join(keep)}]", "-S", f"train.models.arxiv=[{', '.join(models)}]"]


def _status():
    """The project's run outputs and params as git sees them (ignored files included)."""
    return subprocess.run(
        [
            "git",
            "status",
            "--porcelain",
            "--ignored",
            "--",
            "params.yaml",
            "dvc.lock",
            "data",
            "metrics",
            "plots",
            "tables",
            "reports",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout


def build_wheel(tmp_path: Path) -> Path:
    """The working tree (tracked and untracked files, not ignored ones) copied and built as a wheel: the
    checkout gets no build/ folder and the wheel no stale file."""
    source = tmp_path / "source"
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("drift-*.whl")
    return wheel


def fresh_venv(tmp_path: Path, wheel: Path) -> tuple[Path, dict]:
    """A venv of the base interpreter with the wheel installed; the shared venv's site-packages on its path by
    a .pth line (its packages, without processing its .pth files: the editable drift stays out). Returns (its
    bin folder, an environment naming nothing of the checkout)."""
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    (site,) = (venv / "lib").glob("python3*/site-packages")
    (site / "shared.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    path = [
        p
        for p in os.environ.get("PATH", "").split(os.pathsep)
        if p and Path(p) != Path(sys.executable).parent
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        PATH=os.pathsep.join([str(venv / "bin"), *path]), DRIFT_CACHE_DIR=str(tmp_path / "drift-cache")
    )
    python = venv / "bin" / "python"
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed", str(wheel)],
        check=True,
        capture_output=True,
        env=env,
    )
    return venv / "bin", env


def test_a_tiny_rehearsal_of_each_preset_from_an_installed_wheel(tmp_path):
    before = _status()
    wheel = build_wheel(tmp_path)
    bin_dir, env = fresh_venv(tmp_path, wheel)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run(
        [bin_dir / "python", "-c", "import drift; print(drift.__file__)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(tmp_path / "venv"), where  # the wheel's drift, not the checkout's
    for preset in PRESETS:
        overrides = arxiv_overrides() if preset == "paper-arxiv" else []
        done = subprocess.run(
            [bin_dir / "drift", "rehearse", preset, "--tiny", "--json", *overrides],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, (preset, done.stdout[-3000:], done.stderr[-3000:])
        out = json.loads(done.stdout)
        failed = [s for s in out["stages"] if s["status"] != "passed"]
        assert out["ok"] and not failed, failed
        assert [s["stage"] for s in out["stages"]][0] == "check" and len(out["stages"]) == 7
        ((name, d),) = out["datasets"].items()
        assert "--data" not in out["samples"][name]  # the sample the wheel carries
        # every model of the (shrunk) roster trained at every kept cutoff of the one seed left
        shrunk = " ".join(out["shrunk"])
        assert "train.seeds" in shrunk and "train.epochs 10 -> 1" in shrunk
        assert 1 <= len(d["cutoffs"]) <= PROFILES["tiny"].cutoffs
        assert d["trainings"] == len(d["models"]) * len(d["cutoffs"]) and len(d["models"]) >= 9
        assert d["cells"] > 0 and d["rows"] > 0
        for enc, standin in out["standins"].items():  # the preset's widths
            assert standin["width"] == ENCODERS[enc].dim
        assert all(e["rows_per_s"] > 0 for e in d["encoders"].values())
        assert all(f["train_rows_per_s"] > 0 and f["eval_rows_per_s"] > 0 for f in d["families"].values())
        assert d["engines"]
        stored = json.loads(Path(out["rates_file"]).read_text())
        assert Path(out["rates_file"]).is_relative_to(tmp_path / "drift-cache")
        assert any(entry.get(name, {}).get("preset") == preset for entry in stored.values())
        if name != "yearbook":  # text: token states at the preset's width, tokens per second measured
            assert out["standins"]["roberta"]["width"] == 768
            assert all(e["tokens_per_s"] > 0 for e in d["encoders"].values())
        assert out["workspace"] is None
    assert _status() == before  # the checkout untouched

"""Caches that verify what they serve, and keys that cover what decides a result, on a tiny real project
(sotu: ffn-s, probe-minilm and the references) run by the stages' own main() in this process.

Each fault is planted in the cache a clean run filled (a flipped byte or a truncated checkpoint, an emptied or
an edited cell, a truncated or a same-size corrupted feature file): the next run detects it, computes it
again, counts it (`recomputed: {corrupt: n}`, one line on stderr) and ends with the clean run's results. Then
a library version change reuses nothing, and an edited head module retrains that module's models only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from drift.cli.cache import cache_app
from drift.store.cells import CHECKPOINT_KEYS, ResultCache
from tests.helpers import make_project, only, repro_in_process, tiny_params

STAGES = ("ingest", "slice", "embed", "train", "evaluate")


def results(repo: Path) -> dict:
    """What a run leaves: every drift matrix, and every checkpoint's bytes."""
    evals = {p.name: json.loads(p.read_text()) for p in sorted((repo / "data/eval/sotu").glob("*.json"))}
    models = {
        str(p.relative_to(repo)): p.read_bytes() for p in sorted((repo / "data/models/sotu").rglob("*.pt"))
    }
    return {"eval": evals, "models": models}


def metrics(repo: Path, stage: str) -> dict:
    return json.loads((repo / f".drift/runs/{stage}/sotu.json").read_text())


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("integrity")
    params = only(tiny_params(), "sotu")
    params["train"]["baselines"] = ["baseline-prior", "baseline-linear"]  # the counts below: 4 models
    repo = make_project(tmp / "repo", params, tmp / "cache")
    repro_in_process(repo, "sotu", stages=STAGES)
    return {
        "repo": repo,
        "cache": tmp / "cache",
        "results": results(repo),
        "cutoffs": metrics(repo, "train")["trained"] // 4,
    }  # ffn-s, probe-minilm and the two references


def rerun(clean, capsys, stages=("train", "evaluate")) -> str:
    capsys.readouterr()
    repro_in_process(clean["repo"], "sotu", stages=stages)
    return capsys.readouterr().err


def cached_checkpoint(clean, model: str = "ffn-s") -> Path:
    keys = json.loads((clean["repo"] / "data/models/sotu" / CHECKPOINT_KEYS).read_text())
    key = next(k for path, k in keys.items() if path.startswith(f"{model}/"))
    return ResultCache(clean["cache"]).checkpoint_file(key)


def test_a_clean_rerun_reuses_everything(clean, capsys):
    err = rerun(clean, capsys)
    assert metrics(clean["repo"], "train")["reused"] == 4 * clean["cutoffs"]
    assert metrics(clean["repo"], "train")["recomputed"] == {"corrupt": 0}
    assert metrics(clean["repo"], "evaluate")["computed"] == 0
    assert metrics(clean["repo"], "evaluate")["recomputed"] == {"corrupt": 0}
    assert "checksum" not in err and results(clean["repo"]) == clean["results"]


@pytest.mark.parametrize("fault", ["flipped", "truncated"])
def test_a_damaged_checkpoint_is_retrained(clean, capsys, fault):
    path = cached_checkpoint(clean)
    data = bytearray(path.read_bytes())
    if fault == "flipped":  # four bytes inside the weights: the file still loads, with other weights
        for i in range(4):
            data[len(data) // 2 + i] ^= 0xFF
        path.write_bytes(bytes(data))
    else:
        path.write_bytes(bytes(data[: len(data) // 2]))
    err = rerun(clean, capsys)
    train = metrics(clean["repo"], "train")
    assert train["recomputed"] == {"corrupt": 1} and train["trained"] == 1
    assert train["reused"] == 4 * clean["cutoffs"] - 1
    assert (
        f"train@sotu: 1 cached checkpoint(s) failed their checksum or content check and were recomputed: {path}"
        in err
    )
    # the same bytes again: every cell still cached
    assert metrics(clean["repo"], "evaluate")["computed"] == 0
    assert results(clean["repo"]) == clean["results"]
    assert ResultCache(clean["cache"]).checkpoint(path.stem) is not None  # repaired in the cache


def score_cell(clean) -> Path:
    """A cached matrix cell (a number, not an estimate or a calibration)."""
    for path in sorted((clean["cache"] / "cells").glob("*/*/*.json")):
        if isinstance(json.loads(path.read_text())["score"], float):
            return path
    raise AssertionError("no scored cell in the cache")


@pytest.mark.parametrize("fault", ["emptied", "edited"])
def test_a_damaged_cell_is_scored_again(clean, capsys, fault):
    path = score_cell(clean)
    if fault == "emptied":
        path.write_text("")
    else:  # a fake score, still valid JSON
        record = json.loads(path.read_text())
        path.write_text(json.dumps({**record, "score": 0.123}))
    err = rerun(clean, capsys, stages=("evaluate",))
    evaluate = metrics(clean["repo"], "evaluate")
    assert evaluate["recomputed"] == {"corrupt": 1} and evaluate["computed"] == 1
    assert (
        f"evaluate@sotu: 1 cached cell(s) failed their checksum or content check and were recomputed: {path}"
        in err
    )
    assert results(clean["repo"]) == clean["results"]
    assert json.loads(path.read_text())["score"] != 0.123


@pytest.mark.parametrize("fault", ["truncated", "same size"])
def test_a_damaged_feature_file_is_rebuilt(clean, capsys, fault):
    tokens = clean["repo"] / "data/features/sotu/minilm-l6/tokens.npy"
    original = tokens.read_bytes()
    data = bytearray(original)
    if fault == "truncated":
        tokens.write_bytes(bytes(data[: len(data) // 2]))
    else:  # flipped bytes inside the token states, the size unchanged
        for i in range(0, 64, 2):
            data[len(data) // 2 + i] ^= 0x40
        tokens.write_bytes(bytes(data))
    err = rerun(clean, capsys)
    assert f"features: {tokens}" in err and "rebuilding" in err
    assert tokens.read_bytes() == original  # rebuilt from the store, byte for byte
    assert metrics(clean["repo"], "train")["reused"] == 4 * clean["cutoffs"]
    assert results(clean["repo"]) == clean["results"]


def test_drift_cache_verify_names_what_is_corrupt(clean, monkeypatch):
    from typer.testing import CliRunner

    monkeypatch.chdir(clean["repo"])
    ok = CliRunner().invoke(cache_app, ["verify", "--json"])
    assert ok.exit_code == 0, ok.output
    report = json.loads(ok.stdout)
    assert report["corrupt"] == [] and report["checked"]["checkpoints"] >= 4 * clean["cutoffs"]
    assert (
        report["checked"]["tables"] >= 1
        and report["checked"]["features"] == 1
        and report["checked"]["cells"] > 0
    )
    checkpoint, cell = cached_checkpoint(clean), score_cell(clean)
    saved = checkpoint.read_bytes(), cell.read_text()
    checkpoint.write_bytes(saved[0][:-10])
    cell.write_text("{}")
    try:
        bad = CliRunner().invoke(cache_app, ["verify"], env={"COLUMNS": "400"})
        assert bad.exit_code == 1
        assert (
            f"corrupt {checkpoint}" in bad.stdout
            and f"corrupt {cell}" in bad.stdout
            and "2 corrupt" in bad.stdout
        )
    finally:
        checkpoint.write_bytes(saved[0])
        cell.write_text(saved[1])


def test_drift_cache_gc_collects_what_no_list_refers_to(clean, monkeypatch):
    from typer.testing import CliRunner

    monkeypatch.chdir(clean["repo"])
    cache = ResultCache(clean["cache"])
    orphan = cache.checkpoint_file("f" * 64)
    source = clean["repo"] / "orphan.pt"
    source.write_bytes(b"not in any list")
    cache.put_checkpoint("f" * 64, source)
    digest = __import__("hashlib").sha256(b"not in any list").hexdigest()
    cache.put_cell(digest, "e" * 64, 0.5)
    old = 0  # older than any grace period
    for path in (orphan, cache.cell_file(digest, "e" * 64), cache.cell_file(digest, "e" * 64).parent):
        os.utime(path, (old, old))
    before = sorted((clean["cache"] / "checkpoints").rglob("*.ckpt"))
    dry = json.loads(
        CliRunner().invoke(cache_app, ["gc", "--dry-run", "--json", "--grace-minutes", "0"]).stdout
    )
    assert dry["checkpoints"]["checkpoints"] == [str(orphan)]
    assert dry["checkpoints"]["cells"] == [str(cache.cell_file(digest, "e" * 64).parent)]
    assert orphan.exists()
    done = json.loads(CliRunner().invoke(cache_app, ["gc", "--json", "--grace-minutes", "0"]).stdout)
    assert done["checkpoints"]["checkpoints"] == [str(orphan)] and not orphan.exists()
    assert not cache.cell_file(digest, "e" * 64).exists()
    assert sorted((clean["cache"] / "checkpoints").rglob("*.ckpt")) == [p for p in before if p != orphan]


def test_a_library_version_change_reuses_nothing(clean, capsys, monkeypatch):
    import drift.core.environment as environment

    real = environment.package_version
    monkeypatch.setattr(environment, "package_version", lambda d: "99.0" if d == "torch" else real(d))
    rerun(clean, capsys)
    assert metrics(clean["repo"], "train")["reused"] == 0
    assert metrics(clean["repo"], "evaluate")["reused"] == 0


def test_editing_one_head_module_retrains_only_its_models(clean):
    """In the project's copy of drift/ (the code its stage then runs): a code edit to
    drift/models/text_heads.py retrains ffn-s only; the probe and the references are reused."""
    repo = clean["repo"]
    module = repo / "drift/models/text_heads.py"
    # code: a comment changes no key
    module.write_text(module.read_text() + "\n_AN_EDIT_TO_THE_TEXT_HEADS = 1\n")
    env = {**os.environ, "PYTHONPATH": str(repo)}
    done = subprocess.run(
        [sys.executable, "stages/train.py", "sotu"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    train = metrics(repo, "train")
    assert (train["trained"], train["reused"]) == (clean["cutoffs"], 3 * clean["cutoffs"])


def store_data_file(clean) -> Path:
    """The largest data file of the text encoder's store table (its token states)."""
    tables = sorted(clean["cache"].glob("minilm-l6-*.lance"))
    return max((p for t in tables for p in (t / "data").glob("*.lance")), key=lambda p: p.stat().st_size)


def test_damaged_store_rows_are_named_and_computed_again(clean, capsys, monkeypatch):
    """256 bytes flipped inside the store's data file: `drift cache verify` names the table, the fragment and
    the key range; the embed stage refuses those rows, computes them again, and the model inputs come out byte
    for byte as the clean run's."""
    from typer.testing import CliRunner

    features = clean["repo"] / "data/features/sotu"
    original = {str(p.relative_to(features)): p.read_bytes() for p in sorted(features.rglob("*.npy"))}
    path = store_data_file(clean)
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 256] = bytes(b ^ 0xFF for b in data[middle : middle + 256])
    path.write_bytes(bytes(data))
    monkeypatch.chdir(clean["repo"])
    bad = CliRunner().invoke(cache_app, ["verify", "--json"])
    assert bad.exit_code == 1, bad.output
    damage = [c for c in json.loads(bad.stdout)["corrupt"] if c["path"] == str(path.parent.parent)]
    assert damage and all(c["first_key"] and c["last_key"] and c["rows"] >= 1 for c in damage), bad.stdout
    import shutil

    shutil.rmtree(features)  # a fresh workspace on this cache: the features are built from the store's rows
    err = rerun(clean, capsys, stages=("embed",))
    assert (
        "embed@sotu: " in err
        and "cached store row(s) failed their checksum or content check and were recomputed" in err
    )
    embed = json.loads((clean["repo"] / ".drift/runs/embed/sotu-minilm-l6.json").read_text())
    assert embed["corrupt"] >= 1 and embed["computed"] >= embed["corrupt"]
    assert {str(p.relative_to(features)): p.read_bytes() for p in sorted(features.rglob("*.npy"))} == original
    ok = CliRunner().invoke(cache_app, ["verify", "--json"])
    assert ok.exit_code == 0, ok.output

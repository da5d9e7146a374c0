"""Cache entries bound to their key, gc that deletes only drift's files, verify that refuses a folder holding
no drift cache. A cached checkpoint or cell copied over another entry (a valid file, the wrong one) is a miss,
counted as corrupt and computed again, and `drift cache verify` names the key it was written for; an entry of
an older format is a plain miss; `drift cache gc` leaves any file under checkpoints/ and cells/ whose header
is not drift's. Synthetic rows (tests/train/test_engine.py's TinyData): ffn-s trained in this process, no
encoder."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from drift.cli.cache import cache_app
from drift.evaluate.fill_matrices import EvalJob, evaluate_seed
from drift.models.checkpoints import list_checkpoints
from drift.store.cells import (
    CHECKPOINT_KEYS,
    ResultCache,
    cell_problem,
    code_version,
    corrupt_line,
)
from drift.store.integrity import sha256_bytes
from drift.train.loop import train_roster
from tests.train.test_engine import CFG, TinyData

FIX = "pass the folder embed.cache_dir names (or --cache-dir), or set DRIFT_CACHE_DIR"


def verify(cache: Path, *args: str):
    return CliRunner().invoke(
        cache_app, ["verify", "--cache-dir", str(cache), *args], env={"COLUMNS": "1000"}
    )


def train(tmp_path: Path) -> dict:
    """ffn-s, seed 0, four cutoffs into tmp_path/cache; the counts and what the workspace got."""
    data = TinyData(np.random.default_rng(5))
    cache = ResultCache(tmp_path / "cache")
    counts, corrupt = train_roster(
        data, ["ffn-s"], CFG.model_copy(update={"seeds": [0]}), tmp_path / "models", cache
    )
    keys = json.loads((tmp_path / "models" / CHECKPOINT_KEYS).read_text())
    files = {p: (tmp_path / "models" / p).read_bytes() for p in sorted(keys)}
    return {
        "data": data,
        "counts": counts,
        "corrupt": corrupt,
        "keys": [keys[p] for p in sorted(keys)],
        "files": files,
    }


@pytest.mark.compute
def test_a_checkpoint_copied_over_another_is_retrained_and_flagged(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # verify also checks ./data/features: none here
    first = train(tmp_path)
    assert (first["counts"]["trained"], first["counts"]["reused"]) == (4, 0)
    cache = ResultCache(tmp_path / "cache")
    zero, one = (cache.checkpoint_file(k) for k in first["keys"][:2])
    shutil.copyfile(zero, one)  # cutoff 0's valid checkpoint under cutoff 1's key

    flagged = verify(tmp_path / "cache")
    assert flagged.exit_code == 1, flagged.output
    assert flagged.stdout.splitlines() == [
        f"corrupt {one}: stored under another key ({zero.stem[:12]})",
        f"checked 0 table(s), 4 checkpoint(s), 0 cell(s) in {tmp_path / 'cache'} and 0 feature folder(s) in "
        "./data/features: 1 corrupt (the stages recompute them on their next run)",
    ]

    again = train(tmp_path)
    assert {k: again["counts"][k] for k in ("trained", "reused", "recomputed")} == {
        "trained": 1,
        "reused": 3,
        "recomputed": {"corrupt": 1},
    }
    assert again["corrupt"] == [str(one)]
    assert corrupt_line("train@tiny", again["corrupt"], "checkpoint(s)") == (
        f"train@tiny: 1 cached checkpoint(s) failed their checksum or content check and were recomputed: {one} "
        "(`drift cache verify` checks the whole cache)"
    )
    assert again["files"] == first["files"]  # cutoff 1 is cutoff 1's model again, byte for byte
    assert verify(tmp_path / "cache").exit_code == 0


@pytest.mark.compute
def test_a_cell_copied_over_another_is_a_miss_and_flagged(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trained = train(tmp_path)
    checkpoints = list_checkpoints(tmp_path / "models", "ffn-s")[0]

    def evaluate():
        return evaluate_seed(
            EvalJob(trained["data"], "ffn-s", 0, checkpoints, tmp_path / "cache", 1, code_version("evaluate"))
        )

    matrix, _, counts, _ = evaluate()
    assert counts["computed"] == 16 and counts["corrupt"] == []
    folder = next(
        p for p in sorted((tmp_path / "cache" / "cells").glob("*/*")) if len(list(p.glob("*.json"))) > 1
    )
    # two cells of the matrix (a number each; the cells' per-class scores beside them are lists)
    scored = [
        p for p in sorted(folder.glob("*.json")) if isinstance(json.loads(p.read_text())["score"], float)
    ]
    source, target = scored[:2]
    shutil.copyfile(source, target)  # a valid cell of the same checkpoint, under another cell's key
    assert ResultCache(tmp_path / "cache").cell(folder.name, target.stem) == (False, None)
    assert cell_problem(target) == f"stored under another key ({source.stem[:12]})"
    flagged = verify(tmp_path / "cache")
    assert flagged.exit_code == 1 and f"corrupt {target}: stored under another key ({source.stem[:12]})" in (
        flagged.stdout.splitlines()
    )

    again, _, counts, _ = evaluate()
    assert (counts["computed"], counts["reused"], counts["corrupt"]) == (1, 15, [str(target)])
    assert again == matrix
    assert verify(tmp_path / "cache").exit_code == 0


def test_an_entry_of_the_older_format_is_a_plain_miss(tmp_path, monkeypatch):
    """Format 1 (no key in the header): not corrupt, not served; verify names it, exits 0; gc counts it
    drift's."""
    monkeypatch.chdir(tmp_path)
    cache = ResultCache(tmp_path / "cache")
    body = b"a state dict"
    old = cache.checkpoint_file("ab" * 32)
    old.parent.mkdir(parents=True)
    old.write_bytes(f"drift-checkpoint 1 {sha256_bytes(body)} {len(body)}\n".encode() + body)
    cell = cache.cell_file("cd" * 32, "ef" * 32)
    cell.parent.mkdir(parents=True)
    sha = sha256_bytes(json.dumps(["ef" * 32, 0.5], sort_keys=True).encode())
    cell.write_text(json.dumps({"key": "ef" * 32, "score": 0.5, "sha256": sha}))
    assert cache.checkpoint("ab" * 32) is None and cache.cell("cd" * 32, "ef" * 32) == (False, None)
    assert cache.corrupt == []
    result = verify(tmp_path / "cache")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"stale {old}: older format (drift-checkpoint 1, this drift reads 2): a miss, computed again",
        f"stale {cell}: older format (drift-cell 1, this drift reads 2): a miss, computed again",
        f"checked 0 table(s), 1 checkpoint(s), 1 cell(s) in {tmp_path / 'cache'} and 0 feature folder(s) in "
        "./data/features: 0 corrupt, 2 of another cache format (misses, computed again when used)",
    ]


def gc_workspace(tmp_path: Path) -> Path:
    """A repository whose checkpoint list names one key, and an embedding manifest (gc refuses without one)."""
    repo = tmp_path / "repo"
    (repo / "data/embeddings").mkdir(parents=True)
    (repo / "data/embeddings/tiny.json").write_text(json.dumps({"encoders": {}}))
    (repo / "data/models/tiny").mkdir(parents=True)
    (repo / "data/models/tiny" / CHECKPOINT_KEYS).write_text(
        json.dumps({"ffn-s/seed0/cutoff000.pt": "11" * 32})
    )
    return repo


def test_gc_deletes_drifts_stale_entries_and_leaves_other_files(tmp_path, monkeypatch):
    monkeypatch.chdir(gc_workspace(tmp_path))
    root = tmp_path / "shared"  # embed.cache_dir pointed at a folder that holds other work too
    cache = ResultCache(root)
    kept_body, stale_body = tmp_path / "kept.pt", tmp_path / "stale.pt"
    kept_body.write_bytes(b"kept")
    stale_body.write_bytes(b"stale")
    cache.put_checkpoint("11" * 32, kept_body)
    cache.put_checkpoint("22" * 32, stale_body)
    kept_digest, stale_digest = (hashlib.sha256(b).hexdigest() for b in (b"kept", b"stale"))
    cache.put_cell(kept_digest, "33" * 32, 0.5)
    cache.put_cell(stale_digest, "44" * 32, 0.25)
    theirs = {
        root / "checkpoints/ab/foo.ckpt": b"someone else's checkpoint",
        root / "cells/x/y": b"someone else's file",
        root / "cells/zz/notes/notes.json": b'{"mine": true}',
        cache.cell_file(stale_digest, "44" * 32).with_name("README"): b"beside drift's cells",
    }
    for path, data in theirs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    result = CliRunner().invoke(
        cache_app, ["gc", "--grace-minutes", "0", "--cache-dir", str(root)], env={"COLUMNS": "1000"}
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1].startswith("1 checkpoint(s) and the cells of 1 deleted, freed ")
    assert lines[2] == (
        f"3 file(s) under checkpoints/ and cells/ are not drift's (no drift header), left alone: "
        f"{root / 'checkpoints/ab/foo.ckpt'} and 2 more"
    )
    assert all(path.read_bytes() == data for path, data in theirs.items())
    assert (
        not cache.checkpoint_file("22" * 32).exists()
        and not cache.cell_file(stale_digest, "44" * 32).exists()
    )
    assert cache.checkpoint_digest("11" * 32) == kept_digest and cache.cell(kept_digest, "33" * 32) == (
        True,
        0.5,
    )
    dry = json.loads(
        CliRunner()
        .invoke(cache_app, ["gc", "--json", "--grace-minutes", "0", "--dry-run", "--cache-dir", str(root)])
        .stdout
    )
    assert dry["checkpoints"]["checkpoints"] == [] and len(dry["checkpoints"]["foreign"]) == 3


@pytest.mark.parametrize(
    "where,reason",
    [
        ("missing", "it does not exist"),
        ("a-file", "it is a file"),
        ("other-work", "it holds no embedding table (*.lance), checkpoints/ or cells/"),
    ],
)
def test_verify_refuses_a_folder_holding_no_drift_cache(tmp_path, monkeypatch, where, reason):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("not a cache")
    (tmp_path / "other-work" / "notes").mkdir(parents=True)
    for args in ([], ["--json"]):
        result = verify(tmp_path / where, *args)
        assert result.exit_code == 2 and result.stdout == ""
        assert result.stderr.splitlines() == [
            f"error: drift cache verify: no drift cache at {tmp_path / where} ({reason}): {FIX}"
        ]


def test_verify_calls_an_empty_folder_an_empty_cache(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cache").mkdir()
    result = verify(tmp_path / "cache")
    assert result.exit_code == 0 and result.stdout.splitlines() == [
        f"checked 0 table(s), 0 checkpoint(s), 0 cell(s) in {tmp_path / 'cache'} (empty) and 0 feature folder(s) "
        "in ./data/features: 0 corrupt"
    ]

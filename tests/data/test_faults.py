"""Faults a real campaign meets, each planted: a full disk under the store, a checkpoint and the records (a
real tmpfs of 2 MiB when this runs as root, else the writes made to fail with ENOSPC), a stage's unexpected
exception, a temporary workspace's relative cache path, stray metrics folders. Each ends in one line, and
nothing half-written is left behind."""

from __future__ import annotations

import errno
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch.nn as nn

from drift.core.errors import DriftError
from drift.core.params import EmbedParams
from drift.core.paths import main_repository
from drift.data.datasets import dataset_params
from drift.data.ingest import ingest
from drift.models import checkpoints
from drift.store import embeddings
from drift.store.embeddings import EmbeddingStore
from drift.store.location import cache_dir
from tests.helpers import dvc_params, only, run, tiny_params

AMAZON = Path(__file__).parents[1] / "fixtures" / "amazon2023"
DISK_FULL = OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture
def small_disk(tmp_path):
    """(a folder on a 2 MiB tmpfs, True), or (a plain folder, False) where mounting is not allowed."""
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = (
        shutil.which("mount") is not None
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], capture_output=True
        ).returncode
        == 0
    )
    yield folder, mounted
    if mounted:
        subprocess.run(["umount", str(folder)], check=True)


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.mark.pipeline
def test_a_full_disk_under_the_store_is_one_line_and_commits_nothing(small_disk, monkeypatch):
    folder, real = small_disk
    store = EmbeddingStore(folder, "enc", "f" * 64, dim=384, with_tokens=False)
    store.append(["a", "b"], np.ones((2, 384), np.float32))
    before = files_under(folder)
    if not real:  # Lance's own error, as a full disk raises it

        def full(*_, **__):
            raise OSError(
                "LanceError(IO): No space left on device (os error 28), lance-file/src/writer.rs:190:9"
            )

        monkeypatch.setattr(embeddings.lance, "write_dataset", full)
    keys = [str(i) for i in range(3000)]  # 4.6 MB of vectors: more than the disk holds
    with pytest.raises(DriftError) as error:
        store.append(keys, np.random.default_rng(0).random((3000, 384), dtype=np.float32))
    message = str(error.value)
    assert message.startswith(f"disk full writing {store.path} (4.4 MiB needed, ") and "\n" not in message
    assert message.endswith(
        "free space on that disk, or set embed.cache_dir (or $DRIFT_CACHE_DIR) to a disk with room"
    )
    assert files_under(folder) == before  # Lance removed its half-written data file; nothing was committed
    monkeypatch.undo()
    fresh = EmbeddingStore(folder, "enc", "f" * 64, dim=384, with_tokens=False)
    assert sorted(fresh.refresh().to_pylist()) == ["a", "b"]


@pytest.mark.pipeline
def test_a_full_disk_under_a_checkpoint_leaves_no_partial_file(small_disk, monkeypatch):
    folder, real = small_disk
    path = folder / "ffn-s" / "seed0" / "cutoff000.pt"
    if not real:

        def full(state, f):
            Path(f).write_bytes(b"half a checkpoint")
            raise DISK_FULL

        monkeypatch.setattr(checkpoints.torch, "save", full)
    with pytest.raises(
        DriftError,
        match=r"^disk full writing .*cutoff000\.pt \(3\.8 MiB needed, .*free there\): "
        r"free space on that disk$",
    ):
        checkpoints.save_checkpoint(nn.Linear(1000, 1000), path)  # 4 MB of weights
    assert files_under(folder) == []


@pytest.mark.pipeline
def test_a_full_disk_under_the_records_leaves_no_partial_file(small_disk, monkeypatch, tmp_path):
    folder, real = small_disk
    source = tmp_path / "amazon"
    shutil.copytree(AMAZON, source)
    if real:  # fill the disk first: the 2,400 fixture reviews would fit in 2 MiB
        (folder / "filler").write_bytes(b"\0" * (2 * 1024 * 1024 - 64 * 1024))
    else:
        from drift.data import ingest as ingest_module

        class Full(ingest_module.pq.ParquetWriter):
            def write_batch(self, *args, **kwargs):
                raise DISK_FULL

        monkeypatch.setattr(ingest_module.pq, "ParquetWriter", Full)
    records = folder / "amazon.parquet"
    with pytest.raises(
        DriftError, match=rf"^disk full writing {records} \(.* free there\): free space on that disk$"
    ):
        ingest(
            "amazon", dataset_params("amazon", {"source": str(source)}), records, folder / "amazon.q.parquet"
        )
    assert [f for f in files_under(folder) if f != "filler"] == []


@pytest.mark.compute
@pytest.mark.pipeline
def test_an_unexpected_exception_is_one_line_with_its_traceback_in_a_log(project):
    """A records file that is not Parquet (a bad disk, a stray copy): the slice stage's pyarrow error is one
    line naming the stage, its input and the log; the traceback is in the log."""
    repo = project(only(tiny_params(), "sotu"))
    (repo / "data/records").mkdir(parents=True)
    (repo / "data/records/sotu.parquet").write_bytes(b"not parquet at all")
    result = run(["python", "stages/slice.py", "sotu"], repo, check=False)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    log = repo / ".drift/logs/slice@sotu.log"
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: stage slice@sotu (input: sotu) failed: ArrowInvalid: ")
    assert lines[0].endswith(f"(traceback in {log})")
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "stages/slice.py" in text


def test_a_relative_cache_dir_is_the_main_repositorys(tmp_path, monkeypatch):
    """`dvc exp run --temp` runs in <repo>/.dvc/tmp/exps/<tmp>/ and deletes it after: a relative
    embed.cache_dir resolves against the main repository, from $DVC_ROOT (DVC sets it to the parent repository
    for experiments) or from that layout."""
    repo = tmp_path / "repo"
    temp = repo / ".dvc/tmp/exps/tmpabc123"
    temp.mkdir(parents=True)
    monkeypatch.chdir(temp)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    assert main_repository() == repo.resolve()
    assert cache_dir(EmbedParams(cache_dir=".drift-cache")) == repo.resolve() / ".drift-cache"
    monkeypatch.setenv("DVC_ROOT", str(tmp_path / "elsewhere"))
    assert cache_dir(EmbedParams(cache_dir="c")) == (tmp_path / "elsewhere").resolve() / "c"
    assert cache_dir(EmbedParams(cache_dir=str(tmp_path / "abs"))) == tmp_path / "abs"  # absolute: as written
    monkeypatch.delenv("DVC_ROOT")
    monkeypatch.chdir(repo)
    assert cache_dir(EmbedParams(cache_dir="c")) == repo.resolve() / "c"


@pytest.mark.compute
@pytest.mark.pipeline
def test_a_temporary_experiment_keeps_its_store_in_the_main_repository(project, tmp_path):
    """For real: `dvc exp run --temp` with a relative embed.cache_dir builds the store in the repository the
    experiment came from, where the next experiment finds it."""
    import yaml

    repo = project(dvc_params("sotu"))  # sotu over three decades: the store's rows, the same embed stage
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["embed"]["cache_dir"] = ".drift-cache"
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (repo / ".gitignore").write_text((repo / ".gitignore").read_text() + "/.drift-cache/\n/.drift/\n")
    run(["git", "commit", "-qam", "relative cache"], repo)
    run(["dvc", "exp", "run", "--temp", "embed@sotu"], repo)
    assert list((repo / ".drift-cache").glob("minilm-l6-*.lance")), list(repo.iterdir())
    assert not (repo / ".dvc/tmp/exps").exists() or not list((repo / ".dvc/tmp/exps").rglob("*.lance"))


def test_summary_reads_the_datasets_params_yaml_declares(tmp_path):
    from tests.helpers import drift_cli, metrics_json

    metrics = tmp_path / "metrics"
    for dataset in ("sotu", "arxiv"):  # arxiv: another experiment's leftover folder
        (metrics / dataset).mkdir(parents=True)
        (metrics / dataset / "ffn-s.json").write_text(
            metrics_json(
                id=0.6, future=0.5, decay=0.1, metric="accuracy", higher_is_better=True, k=3, seeds=1
            )
        )
    params = tiny_params()
    only(params, "sotu")
    import yaml

    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    out = json.loads(drift_cli("summary", "--json", cwd=tmp_path).stdout)
    assert list(out) == ["sotu"]
    result = drift_cli("summary", "arxiv", cwd=tmp_path)
    assert (
        result.returncode != 0 and "arxiv is not a dataset of this workspace's params.yaml" in result.stderr
    )

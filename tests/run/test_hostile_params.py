"""A params.yaml from a pull request, and files a result depends on that DVC does not see: YAML alias bombs,
numbers that are not numbers, dataset names that collide with the pipeline's own paths, Ctrl-C while a stage
imports, and replaced image or weight files re-running what they decide. Each asserts the exact line a user
gets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from drift.core.errors import DriftError
from drift.core.params import load_params
from drift.core.presets import apply_preset, merged_document
from drift.run.checks import embed_record, write_checked
from tests.helpers import ROOT, drift_cli, make_project, refused, run
from tests.helpers import params_of as changed

BOMB = "".join(
    f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9) if i else '1'}]\n" for i in range(9)
)  # 9 levels of 9 aliases: 9**8 leaves when expanded
ALIAS_LINE = "uses the YAML alias *l0: aliases are refused (nested ones expand a small file into gigabytes); write the values out"


def test_an_alias_bomb_is_refused_by_every_reader_before_it_expands(tmp_path, monkeypatch):
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text() + BOMB)
    with pytest.raises(DriftError) as e:
        load_params(params)
    first_alias = (ROOT / "params.yaml").read_text().count("\n") + 2  # the bomb's line l1
    assert str(e.value) == f"{params} line {first_alias} {ALIAS_LINE}"
    with pytest.raises(DriftError, match="aliases are refused"):
        merged_document(None, params)
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "small.yaml").write_text("train: {epochs: 1}\n")
    before = params.read_text()
    with pytest.raises(DriftError, match="aliases are refused"):
        apply_preset("small", params, tmp_path / "presets")
    assert params.read_text() == before  # nothing written
    monkeypatch.chdir(tmp_path)
    result = drift_cli("check")
    assert (
        result.returncode == 2 and "aliases are refused" in result.stderr and "Traceback" not in result.stderr
    )


def test_the_shipped_files_use_no_alias_and_no_repeated_key():
    from drift.core.params import read_yaml

    for path in [ROOT / "params.yaml", *sorted((ROOT / "params").glob("*.yaml"))]:
        read_yaml(path)


@pytest.mark.parametrize(
    ("key", "value", "line"),
    [
        ("train.weight_decay", float("nan"), "train.weight_decay must be a finite number, got nan"),
        ("train.weight_decay", float("inf"), "train.weight_decay must be a finite number, got inf"),
        ("train.weight_decay", -0.1, "train.weight_decay must be at least 0, got -0.1"),
        ("train.seeds", [2**70], f"train.seeds[0] must be at most 4294967295, got {2**70}"),
        ("train.seeds", [-3], "train.seeds[0] must be at least 0, got -3"),
        ("split.seed", -1, "split.seed must be at least 0, got -1"),
        ("report.shift.seed", -1, "report.shift.seed must be at least 0, got -1"),
        (
            "report.policy.seconds_per_row",
            float("inf"),
            "report.policy.seconds_per_row must be a finite number, got inf",
        ),
        (
            "report.policy.shift_thresholds",
            [float("nan")],
            "report.policy.shift_thresholds[0] must be a finite number, got nan",
        ),
        ("compute.cpus_per_task", float("inf"), "compute.cpus_per_task must be a finite number, got inf"),
    ],
)
def test_every_number_is_finite_and_in_range(key, value, line):
    assert refused(changed(**{key: value})) == line


def test_yaml_infinity_is_refused_as_written(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text().replace("weight_decay: 0.01", "weight_decay: .inf"))
    with pytest.raises(DriftError, match=r"^train.weight_decay must be a finite number, got inf$"):
        load_params(params)


@pytest.mark.parametrize(
    ("name", "line"),
    [
        (
            "ingest",
            "datasets: dataset 'ingest' (metrics) writes metrics/ingest, where dataset 'sotu' "
            "(ingest_metrics) writes metrics/ingest/sotu.json: rename one of them",
        ),
        (
            "deviations",
            "datasets: dataset 'deviations' (plots) writes plots/deviations, where dataset 'sotu' "
            "(deviations) writes plots/deviations/sotu: rename one of them",
        ),
        (
            "forgetting",
            "datasets: dataset 'forgetting' (plots) writes plots/forgetting, where dataset 'sotu' "
            "(forgetting) writes plots/forgetting/sotu.json: rename one of them",
        ),
        (
            "policies",
            "datasets: dataset 'policies' (plots) writes plots/policies, where dataset 'sotu' "
            "(policies) writes plots/policies/sotu.json: rename one of them",
        ),
        (
            "sotu-shift",
            "datasets: dataset 'sotu' (shift_summary) and dataset 'sotu-shift' (tables) both write "
            "tables/sotu-shift.json: rename one of them",
        ),
        (
            "tick.v2",
            "datasets: 'tick.v2' is not a valid name: use letters, digits, '-' and '_', starting with a "
            "letter, digit or '_' (at most 100 characters)",
        ),
        (
            "sotu.quarantine",
            "datasets: 'sotu.quarantine' is not a valid name: use letters, digits, '-' and '_', starting "
            "with a letter, digit or '_' (at most 100 characters)",
        ),
    ],
)
def test_dataset_names_never_collide_with_the_pipelines_paths(name, line):
    data = changed()
    data["datasets"][name] = {"input": "t.csv"}
    data[name] = {"kind": "table", "time": "time", "text": ["text"], "label": "label", "task": "binary"}
    data["train"]["models"][name] = ["ffn-s"]
    assert refused(data) == line


def test_slice_labels_written_in_params_refuse_markup():
    from drift.data.datasets import check_datasets

    data = changed()
    data["sotu"]["slices"] = {"unit": "custom", "edges": [1950, 1980, 2010], "labels": ["a", "</script>|"]}
    with pytest.raises(DriftError) as e:
        check_datasets(load_params(data))
    assert str(e.value) == (
        "sotu.slices.labels[1] must not hold '<': slice labels are shown in HTML, Markdown and terminals, "
        "got '</script>|'"
    )


# ---------------------------------------------------------------- Ctrl-C while a stage imports


@pytest.mark.pipeline
@pytest.mark.parametrize("script", ["stages/train.py", "drift"])
def test_ctrl_c_while_importing_is_one_line_and_exit_130(tmp_path, script):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DVC_STAGE": "train@sotu"}
    command = (
        [sys.executable, str(ROOT / script), "sotu"]
        if script.endswith(".py")
        else [str(Path(sys.executable).parent / "drift"), "init", "x.csv"]
    )
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    maps, deadline = Path(f"/proc/{process.pid}/maps"), time.monotonic() + 30
    # inside the imports: pydantic's core loads right after the handler, torch or Lance a second or more later
    while "pydantic_core" not in maps.read_text() and time.monotonic() < deadline:
        time.sleep(0.005)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    want = (
        "train@sotu: interrupted; re-run resumes"
        if script.endswith(".py")
        else "drift init: interrupted; re-run resumes"
    )
    assert (process.returncode, err.strip()) == (130, want)


# ---------------------------------------------------------------- what DVC cannot see


def _portraits(folder: Path, colours: dict[str, int]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, value in colours.items():
        Image.fromarray(np.full((8, 8, 3), value, np.uint8)).save(folder / name)


def _image_table(repo: Path) -> dict:
    """A table of 40 image paths over four years, two classes of plain grey squares."""
    rows = ["time,image,label"]
    colours = {}
    for i in range(40):
        colours[f"p{i}.png"] = 40 if i % 2 else 200
        rows.append(f"{2000 + i % 4}-06-01,img/p{i}.png,{'a' if i % 2 else 'b'}")
    _portraits(repo / "table" / "img", colours)
    (repo / "table" / "t.csv").write_text("\n".join(rows) + "\n")
    return {
        "kind": "table",
        "time": "time",
        "image": "image",
        "image_encoding": "path",
        "label": "label",
        "task": "binary",
        "slices": {"unit": "year", "start": 2000, "end": 2003},
    }


@pytest.mark.compute
@pytest.mark.pipeline
def test_replacing_an_image_a_row_names_reruns_its_ingest(tmp_path):
    params = changed()
    params["datasets"] = {"pics": {"input": "table/t.csv"}}
    params["train"]["models"] = {"pics": ["mlp-s"]}
    params["report"]["saliency"] = {}
    repo = tmp_path / "repo"
    repo.mkdir()
    params["pics"] = _image_table(repo)
    make_project(repo, params, tmp_path / "cache")
    first = run(["dvc", "repro", "ingest@pics"], repo)
    assert "Running stage 'ingest@pics'" in first.stdout
    again = run(["dvc", "repro", "ingest@pics"], repo)
    assert "Stage 'ingest@pics' didn't change" in again.stdout
    records = (repo / "data/records/pics.parquet").read_bytes()
    _portraits(repo / "table" / "img", {"p0.png": 40, "p1.png": 200})  # the two classes' pictures swapped
    swapped = run(["dvc", "repro", "ingest@pics"], repo)
    assert "Running stage 'ingest@pics'" in swapped.stdout
    assert (repo / "data/records/pics.parquet").read_bytes() != records


def test_replacing_local_weights_changes_what_embed_depends_on(tmp_path, monkeypatch):
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"\x01" * 64)
    (weights / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    data = changed(**{"embed.weights": {"minilm-l6": str(weights)}})
    params = load_params(data)
    before = embed_record(params, "sotu")
    assert set(before["weights"]) == {"minilm-l6"}
    assert embed_record(params, "synth-portraits")["weights"] == {}  # an image dataset runs no text encoder
    (weights / "model.safetensors").write_bytes(b"\x02" * 64)  # other weights, the same shapes
    after = embed_record(params, "sotu")
    assert after != before
    written = write_checked(params, tmp_path)
    assert sorted(p.name for p in written) == [
        "sotu.embed.json",
        "sotu.json",
        "sotu.train.json",
        "synth-portraits.embed.json",
        "synth-portraits.json",
        "synth-portraits.train.json",
    ]
    assert (
        "data/checked/${key}.embed.json"
        in (ROOT / "dvc.yaml").read_text().split("  embed:")[1].split("  train:")[0]
    )


def test_digests_read_regular_files_only(tmp_path):
    from drift.run.digests import Digests

    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "a").write_bytes(b"a")
    digests = Digests(tmp_path / "memo.json")
    assert digests.file(tmp_path / "fifo") == "not-a-file"  # never opened: a FIFO would block
    assert digests.file(tmp_path / "gone") == "missing"
    first = digests.file(tmp_path / "a")
    digests.save()
    (tmp_path / "a").write_bytes(b"b")
    assert Digests(tmp_path / "memo.json").file(tmp_path / "a") != first


@pytest.mark.parametrize("name", ["train", "embed", "encoders", "models", "datasets"])
def test_a_dataset_named_as_a_section_of_params_is_refused(name):
    data = changed()
    data["datasets"][name] = {"input": "t.csv"}
    assert refused(data) == f"datasets: {name!r} is a section of params.yaml itself: rename the dataset"

"""Small things a new user on their own data meets first: one check of a dataset name for every command, the
multilabel wording of `drift init`, its note on partial first and last slices, the embedding time `drift plan`
estimates, `drift --version`, and the numbers `drift show --deviation` and `drift policy` print."""

from __future__ import annotations

import datetime as dt
import json
import re
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import yaml

from drift.cli.policy_commands import policy_names
from drift.core.params import SliceSpec, load_params
from drift.protocol.slicing import partial_slices, slice_edges
from tests.helpers import SHIPPED_PARAMS, metrics_json, tiny_params
from tests.helpers import drift_cli as drift

LABELS = ["2000", "2001", "2002", "2003"]
# trained through 0..3 (rows), evaluated on 0..3 (columns)
MATRICES = {
    "ffn-s": [[0.9, 0.7, 0.6, 0.5], [0.8, 0.9, 0.7, 0.6], [0.7, 0.8, 0.9, 0.7], [0.6, 0.7, 0.8, 0.9]],
    "tx-s": [[0.8, 0.5, 0.4, 0.3], [0.7, 0.8, 0.5, 0.4], [0.6, 0.7, 0.8, 0.5], [0.5, 0.6, 0.7, 0.8]],
}


def long_rows(matrix) -> list[dict]:
    return [
        {"train": a, "eval": b, "value": matrix[i][j]}
        for i, a in enumerate(LABELS)
        for j, b in enumerate(LABELS)
    ]


def committed(root: Path, dataset: str = "sotu") -> None:
    """What the report stage commits for `dataset`, by hand: matrices, deviations, metrics; and a params.yaml
    declaring sotu and synth-portraits (the latter not yet evaluated)."""
    (root / "params.yaml").write_text(yaml.safe_dump(tiny_params(), sort_keys=False))
    mean = np.mean([MATRICES[m] for m in MATRICES], axis=0)
    for model, matrix in MATRICES.items():
        plots = root / "plots" / dataset / model / "matrix.json"
        plots.parent.mkdir(parents=True, exist_ok=True)
        plots.write_text(json.dumps(long_rows(matrix)))
        deviation = root / "plots" / "deviations" / dataset / f"{model}.json"
        deviation.parent.mkdir(parents=True, exist_ok=True)
        deviation.write_text(json.dumps(long_rows((np.array(matrix) - mean).round(6).tolist())))
        metrics = root / "metrics" / dataset / f"{model}.json"
        metrics.parent.mkdir(parents=True, exist_ok=True)
        metrics.write_text(metrics_json(id=0.9, future=0.7, decay=0.2, k=4))


def one_line(result) -> str:
    assert result.returncode == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


COMMANDS = {  # each command that takes a dataset name, as a user types it
    "summary": lambda ds: ("summary", ds),
    "show": lambda ds: ("show", ds, "ffn-s"),
    "policy": lambda ds: ("policy", ds),
}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_checks_a_dataset_name_alike(tmp_path, command):
    committed(tmp_path)
    args = COMMANDS[command]
    assert drift(*args("sotu"), cwd=tmp_path).returncode == 0
    # declared in params.yaml, not yet evaluated: no results yet, not "unknown"
    assert one_line(drift(*args("synth-portraits"), cwd=tmp_path)) == (
        "error: no results for synth-portraits yet: run `dvc repro` (or `dvc repro report@synth-portraits`)"
    )
    # the valid names are params.yaml's datasets, never a corpus it does not declare
    assert one_line(drift(*args("sotuu"), cwd=tmp_path)) == (
        "error: unknown dataset 'sotuu': did you mean sotu? valid: sotu, synth-portraits"
    )
    assert one_line(drift(*args("amazon"), cwd=tmp_path)) == (
        "error: unknown dataset 'amazon': valid: sotu, synth-portraits"
    )


def multilabel_csv(path: Path) -> Path:
    rng = np.random.default_rng(0)
    lines = ["id,date,body,tag_a,tag_b,tag_c"]
    for i in range(120):
        tags = ",".join(str(v) for v in rng.integers(0, 2, 3))
        lines.append(
            f"r{i},{2015 + i % 6}-0{1 + i % 9}-1{i % 9},a ticket about topic {i % 7} and more words,{tags}"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def test_init_asks_for_a_multilabel_table_as_its_option_takes_it(tmp_path):
    (tmp_path / "params.yaml").write_text(SHIPPED_PARAMS.read_text())
    multilabel_csv(tmp_path / "t.csv")
    question = drift("init", "tix", "t.csv", cwd=tmp_path)
    assert question.returncode == 2 and question.stderr.strip().endswith(
        "answer with --label <column> (a multilabel table: every 0/1 label column, --label <col1,col2,...>)"
    )
    for given in ([], ["--label", "tag_a"]):
        result = drift("init", "tix", "t.csv", "--task", "multilabel", *given, cwd=tmp_path)
        assert one_line(result) == (
            "error: --task multilabel reads one 0/1 column per label: name them all, --label <col1,col2,...>"
        )
    done = drift("init", "tix", "t.csv", "--label", "tag_a,tag_b,tag_c", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    section = yaml.safe_load((tmp_path / "params.yaml").read_text())["tix"]
    assert section["label"] == ["tag_a", "tag_b", "tag_c"] and section["task"] == "multilabel"


def dated_csv(path: Path, first: dt.date, last: dt.date, n: int = 400) -> Path:
    days = (last - first).days
    lines = ["id,date,body,label"]
    for i in range(n):
        day = first + dt.timedelta(days=round(i * days / (n - 1)))
        lines.append(f"r{i},{day},a ticket about topic {i % 7} and more words,{i % 2}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_init_names_the_partial_first_and_last_slices(tmp_path):
    (tmp_path / "params.yaml").write_text(SHIPPED_PARAMS.read_text())
    dated_csv(tmp_path / "t.csv", dt.date(2018, 12, 1), dt.date(2026, 8, 15))
    result = drift("init", "tix", "t.csv", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert (
        "partial slices: the first slice, 2018, holds only 2018-12-01 to 2018-12-31 (31 of its 365 days); "
        "the last slice, 2026, holds only 2026-01-01 to 2026-08-15 (227 of its 365 days)"
    ) in result.stdout
    # a note only: the slices are those init proposes anyway
    assert yaml.safe_load((tmp_path / "params.yaml").read_text())["tix"]["slices"] == {
        "unit": "year",
        "start": 2018,
        "end": 2027,
    }
    # the table is declared but not run: every command says so, none calls it unknown
    for args in (("policy", "tix"), ("show", "tix", "ffn-s"), ("summary", "tix")):
        assert "no results for tix yet: run `dvc repro`" in one_line(drift(*args, cwd=tmp_path))


def test_whole_slices_get_no_note(tmp_path):
    edges, labels = slice_edges(SliceSpec.model_validate({"unit": "year", "start": 2018, "end": 2022}))
    assert partial_slices(edges, labels, dt.datetime(2018, 1, 3), dt.datetime(2021, 12, 30)) == []
    only = partial_slices(edges, labels, dt.datetime(2019, 3, 1), dt.datetime(2019, 5, 1))
    assert [(p["which"], p["label"], p["days"]) for p in only] == [("only", "2019", 61)]
    # years stand for whole years: data of 2018 to 2021 given as years covers every slice
    (tmp_path / "params.yaml").write_text(SHIPPED_PARAMS.read_text())
    rows = ["year,body,label"] + [
        f"{2018 + i % 4},a ticket about topic {i % 7} and words,{i % 2}" for i in range(120)
    ]
    (tmp_path / "y.csv").write_text("\n".join(rows) + "\n")
    result = drift("init", "yrs", "y.csv", cwd=tmp_path)
    assert result.returncode == 0 and "partial slices" not in result.stdout, result.stdout + result.stderr


def test_plan_estimates_the_embedding_time(tmp_path, monkeypatch):
    from drift.core.encoder_registry import ENCODER_PARAMS
    from drift.run.plan import embed_estimate, encoder_rate, plan
    from drift.store.embeddings import EmbeddingsManifest, EmbeddingStore, StoreManifest
    from drift.store.slices import hand_manifest, write_slice_table

    monkeypatch.chdir(tmp_path)  # .drift/runs/embed/ of this workspace
    monkeypatch.delenv("DVC_ROOT", raising=False)
    monkeypatch.setenv("DRIFT_CACHE_DIR", str(tmp_path / "cache"))  # no rehearsed rates
    # nothing measured here: the table rate, scaled by parameters x tokens
    assert encoder_rate("sotu", "minilm-l6", 64)[0] == pytest.approx(8.2)
    rate, source = encoder_rate("sotu", "bert", 64)
    assert rate == pytest.approx(8.2 * ENCODER_PARAMS["minilm-l6"] / ENCODER_PARAMS["bert"])
    assert source.startswith("table: minilm-l6's 8.2 rows/s at 64 tokens")

    # five rows in the slice table, three of them in the store table its last embed run used
    keys = [f"k{i}" for i in range(5)]
    table = pa.table(
        {
            "id": keys,
            "key": keys,
            "slice": pa.array([0] * 5, pa.int32()),
            "split": ["train"] * 5,
            "label": [0, 1, 0, 1, 0],
        }
    )
    write_slice_table(table, tmp_path / "data/slices/sotu.lance", hand_manifest("sotu", ["2000"]))
    store = EmbeddingStore(tmp_path / "cache", "minilm-l6", "ab" * 32, 4, with_tokens=False)
    store.append(keys[:3], np.zeros((3, 4), np.float32))
    stored = StoreManifest(
        encoder="minilm-l6",
        fingerprint="ab" * 32,
        fingerprint_fields={},
        store=store.path.name,
        dim=4,
        rows=5,
        keys_sha256="-",
        with_tokens=False,
    )
    (tmp_path / "data/embeddings").mkdir(parents=True)
    EmbeddingsManifest(encoders={"minilm-l6": stored}).to_file(tmp_path / "data/embeddings/sotu.json")
    runs = tmp_path / ".drift/runs/embed"
    runs.mkdir(parents=True)
    (runs / "sotu-minilm-l6.json").write_text(
        json.dumps({"encoder": "minilm-l6", "computed": 100, "seconds": 20})
    )
    data = yaml.safe_load(SHIPPED_PARAMS.read_text())
    data["embed"]["cache_dir"] = str(tmp_path / "cache")
    params = load_params(data)
    dataset = {"encoders": ["minilm-l6"], "rows": 5, "modality": "text", "slices": {"source": "manifest"}}
    estimate = embed_estimate(params, "sotu", dataset, tmp_path / "data/slices", tmp_path / "data/embeddings")
    assert estimate == {
        "minilm-l6": {
            "rows_to_embed": 2,
            "counted": f"not in store table {store.path.name}",
            "rows_per_s": 5.0,
            "rate": "measured by the embed run of sotu-minilm-l6",
            "seconds": 0.4,
        }
    }
    # without a slice manifest to count from: every row
    assumed = embed_estimate(params, "sotu", {**dataset, "slices": {"source": "params"}})
    assert assumed["minilm-l6"]["rows_to_embed"] == 5 and assumed["minilm-l6"]["counted"].startswith(
        "every row"
    )

    # each slow step is announced before it starts (the CLI's status line)
    path = tmp_path / "params.yaml"
    tiny = yaml.safe_load(SHIPPED_PARAMS.read_text())
    tiny["datasets"] = {"synth-portraits": {"input": "requirements.lock"}}
    tiny["train"].update(seeds=[0], epochs=1, models={"synth-portraits": ["mlp-s"]})
    path.write_text(yaml.safe_dump(tiny, sort_keys=False))
    steps: list[str] = []
    out = plan(
        params_path=path,
        presets=Path(__file__).resolve().parents[2] / "params",
        seconds=0.05,
        cache_path=tmp_path / "bench.json",
        manifest_dir=tmp_path / "none",
        on_step=steps.append,
    )
    assert steps == ["measuring this CPU's matmul rate", "measuring mlp-s on synth-portraits"]
    assert out["datasets"]["synth-portraits"]["embed"] == {}  # pixels: no encoder to run


def test_version():
    result = drift("--version")
    assert result.returncode == 0 and result.stdout == f"drift {version('drift')}\n"


def test_show_deviation_keeps_labels_apart_from_the_values(tmp_path):
    committed(tmp_path)
    for extra in ([], ["--deviation"]):
        out = drift("show", "sotu", "ffn-s", *extra, "--root", tmp_path).stdout
        rows = [line for line in out.splitlines() if re.match(r"\s*200\d *[+-]?\d\.\d\d", line)]
        assert len(rows) == 4 and all(re.match(r"200\d [ +-]", row) for row in rows), out
        header = next(line for line in out.splitlines() if "2000" in line and "2003" in line)
        # each value sits under its column's label
        for label in LABELS:
            column = header.index(label)
            assert all(re.match(r"[ +-]?\d\.\d\d", row[column : column + 6].strip()) for row in rows), out
    assert "-0.05" in drift("show", "sotu", "ffn-s", "--deviation", "--root", tmp_path).stdout


def test_policy_prints_thresholds_at_three_significant_digits(tmp_path):
    policies = [
        {"policy": "shift", "param": 0.029137, "name": "shift 0.029137"},
        {"policy": "drop", "param": -0.026667, "name": "drop -0.026667"},
        {"policy": "drop", "param": 0.0, "name": "drop 0"},
        {"policy": "every", "param": 2, "name": "every 2"},
        {"policy": "never", "param": None, "name": "never"},
    ]
    assert policy_names(policies) == ["shift 0.0291", "drop -0.0267", "drop 0", "every 2", "never"]
    alike = [{"policy": "shift", "param": v, "name": f"shift {v:g}"} for v in (0.0291371, 0.0291372)]
    assert policy_names(alike) == ["shift 0.0291371", "shift 0.0291372"]  # rounded, they would print alike

    committed(tmp_path)
    shift = tmp_path / "shift.json"
    values = np.round(np.random.default_rng(0).random((4, 4)) / 17, 6)
    shift.write_text(json.dumps(long_rows(values.tolist())))
    out = drift("policy", "sotu", "ffn-s", "--shift", shift, "--root", tmp_path)
    assert out.returncode == 0, out.stderr
    shown = re.findall(r"shift (\S+)", out.stdout)  # significant digits: those after the leading zeros
    assert shown and all(len(re.sub(r"^-?0\.0*|\.", "", v)) <= 3 for v in shown), out.stdout

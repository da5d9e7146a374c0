"""Untrusted input: a table from someone else and a params.yaml from a pull request. Each test is one probe of
docs/explanations/reliability.md (names, paths, bad bytes, bounds, empty results, checkpoints, Ctrl-C), with
the exact line a user sees; DVC and the shell run for real where they are the subject."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from PIL import Image

from drift.core.errors import DriftError
from drift.core.params import parse
from drift.core.paths import dataset_paths
from drift.data.datasets._io import parse_date
from drift.data.datasets.table import TableParams, parse_time
from drift.data.ingest import ingest
from drift.models import InputSpec
from drift.models.checkpoints import load_checkpoint
from drift.store.cells import ResultCache, checkpoint_header, checkpoint_problem
from drift.store.slices import SliceManifest, slice_warnings
from tests.helpers import ROOT, drift_cli, refused, run
from tests.helpers import params_of as params

RULE = "use letters, digits, '-', '_' and '.', starting with a letter, digit or '_' (at most 100 characters)"
DATASET_RULE = (
    "use letters, digits, '-' and '_', starting with a letter, digit or '_' (at most 100 characters)"
)
BAD_NAMES = [
    "x;touch pwned",
    "../evil",
    "a/b",
    "a b",
    "$(touch pwned)",
    "",
    ".",
    "..",
    "../../../escape",
    "-h",
]


def with_table(data: dict, name: str, models=("ffn-s",)) -> dict:
    data["datasets"][name] = {"input": "t.csv"}
    data[name] = {"kind": "table", "time": "time", "text": ["text"], "label": "label", "task": "binary"}
    data["train"]["models"][name] = list(models)
    return data


# ---------------------------------------------------------------- 1. names are identifiers


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_dataset_name_that_is_no_identifier_is_refused_by_the_schema_drift_init_and_the_paths(
    tmp_path, name
):
    assert refused(with_table(params(), name)) == f"datasets: {name!r} is not a valid name: {DATASET_RULE}"
    (tmp_path / "params.yaml").write_text("datasets: {}\n")
    result = drift_cli("init", "--", name, "t.csv", cwd=tmp_path)
    assert (
        result.returncode == 2
        and result.stderr.strip() == f"error: dataset name: {name!r} is not a valid name: {DATASET_RULE}"
    )
    with pytest.raises(DriftError, match="^dataset name: .* is not a valid name: "):
        dataset_paths(name)


@pytest.mark.parametrize("model", ["../evil", "ffn-s;touch pwned", "$(id)"])
def test_a_model_name_that_is_no_identifier_is_refused(model):
    assert (
        refused(params(**{"train.models.sotu": [model]}))
        == f"train.models.sotu: {model!r} is not a valid name: {RULE}"
    )
    assert (
        refused(params(**{"train.baselines": [model]}))
        == f"train.baselines: {model!r} is not a valid name: {RULE}"
    )


def test_every_dvc_command_quotes_the_dataset_name():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    commands = [s["do"]["cmd"] for s in stages.values() if "do" in s]
    assert commands and all(cmd.endswith(" '${key}'") for cmd in commands)


@pytest.mark.pipeline
def test_dvc_passes_a_hostile_name_to_the_stage_as_one_word_and_the_check_stage_refuses_it(tmp_path):
    """A real `dvc repro`: the command template of dvc.yaml, a foreach key holding `;`, `$(...)` and a space.
    The shell never runs them: the script gets the name as one argument (and the check stage refuses it)."""
    ingest_cmd = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["ingest"]["do"]["cmd"]
    cmd = ingest_cmd.replace("python stages/ingest.py", f"{sys.executable} echo.py")
    (tmp_path / "echo.py").write_text(
        "import sys, pathlib\npathlib.Path('argv.txt').open('a').write(repr(sys.argv[1:]) + '\\n')\n"
    )
    names = ["x;touch pwned", "$(touch pwned2)", "a b"]
    (tmp_path / "params.yaml").write_text(
        yaml.safe_dump({"datasets": {n: {"input": "t.csv"} for n in names}})
    )
    (tmp_path / "dvc.yaml").write_text(
        yaml.safe_dump({"stages": {"echo": {"foreach": "${datasets}", "do": {"cmd": cmd}}}})
    )
    run(["git", "init", "-q"], tmp_path)
    run(["dvc", "init", "-q"], tmp_path)
    run(["dvc", "repro", "-q"], tmp_path, check=False)
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()
    seen = (tmp_path / "argv.txt").read_text().splitlines() if (tmp_path / "argv.txt").exists() else []
    assert sorted(seen) == sorted(repr([n]) for n in names)
    # the real check stage on the same name: one line, before any other stage
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(with_table(params(), "x;touch pwned")))
    result = run([sys.executable, str(ROOT / "stages" / "check.py")], tmp_path, check=False)
    assert result.returncode == 2 and result.stderr.strip() == (
        f"error: datasets: 'x;touch pwned' is not a valid name: {DATASET_RULE}"
    )
    assert not (tmp_path / "pwned").exists()


# ---------------------------------------------------------------- 2. reads stay inside their root


def test_image_paths_outside_the_tables_folder_are_quarantined_and_never_opened(tmp_path, monkeypatch):
    data, outside = tmp_path / "data", tmp_path / "elsewhere"
    (data / "img").mkdir(parents=True)
    outside.mkdir()
    Image.new("RGB", (32, 32), (200, 10, 10)).save(data / "img" / "good.png")
    Image.new("RGB", (32, 32), (10, 200, 10)).save(outside / "secret.png")
    (data / "img" / "link.png").symlink_to(outside / "secret.png")
    cells = [
        "img/good.png",
        "../../../../etc/passwd",
        "/etc/hostname",
        str(outside / "secret.png"),
        "img/link.png",
        "img/../../elsewhere/secret.png",
    ]
    pq.write_table(
        pa.table(
            {
                "id": [f"r{i}" for i in range(len(cells))],
                "year": [2000] * len(cells),
                "label": [0, 1] * 3,
                "image": cells,
            }
        ),
        data / "t.parquet",
    )
    opened = []
    real_open = Image.open
    monkeypatch.setattr(Image, "open", lambda f, *a, **k: (opened.append(str(f)), real_open(f, *a, **k))[1])
    cfg = {
        "source": str(data / "t.parquet"),
        "id": "id",
        "time": "year",
        "time_encoding": "year",
        "image": "image",
        "image_encoding": "path",
        "label": "label",
        "task": "binary",
        "classes": [0, 1],
        "slices": {"unit": "year", "start": 2000, "end": 2001},
    }
    counts = ingest("imgs", parse(TableParams, cfg, "imgs"), tmp_path / "r.parquet", tmp_path / "q.parquet")
    assert counts["kept"] == 1 and counts["quarantined_by_reason"] == {"path_outside_root": 5}
    assert opened == [str((data / "img" / "good.png").resolve())]
    # a wider root, allowed explicitly, lets the file elsewhere in (the symlink and the absolute path to it)
    counts = ingest(
        "imgs",
        parse(TableParams, {**cfg, "image_root": str(tmp_path)}, "imgs"),
        tmp_path / "r.parquet",
        tmp_path / "q.parquet",
    )
    assert counts["kept"] == 4 and counts["quarantined_by_reason"] == {"path_outside_root": 2}


# ---------------------------------------------------------------- 4. bad bytes are rows, not files


def hostile_table(tmp_path: Path, fmt: str) -> Path:
    """200 rows, two of them with bytes that are not UTF-8 (rows 18 and 121), one time with an offset, one
    with Z."""
    lines = []
    for i in range(200):
        text = b"bad \xff\xfe bytes" if i in (17, 120) else b"row %d says hello" % i
        time_ = (
            b"2020-01-05T10:00:00+02:00"
            if i == 5
            else b"2020-01-05T10:00:00Z"
            if i == 6
            else b"20%02d-03-01 10:00:00" % (10 + i % 10)
        )
        label = b"pos" if i % 2 else b"neg"
        lines.append(
            b"%s,%s,%s" % (time_, text, label)
            if fmt == "csv"
            else b'{"time": "%s", "text": "%s", "label": "%s"}' % (time_, text, label)
        )
    path = tmp_path / f"t.{fmt}"
    path.write_bytes((b"time,text,label\n" if fmt == "csv" else b"") + b"\n".join(lines) + b"\n")
    return path


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_invalid_utf8_quarantines_its_rows_and_the_rest_is_ingested(tmp_path, fmt):
    path = hostile_table(tmp_path, fmt)
    cfg = {
        "source": str(path),
        "time": "time",
        "text": ["text"],
        "label": "label",
        "task": "binary",
        "slices": {"unit": "year", "start": 2010, "end": 2021},
    }
    counts = ingest("t", parse(TableParams, cfg, "t"), tmp_path / "r.parquet", tmp_path / "q.parquet")
    assert counts["kept"] == 198 and counts["quarantined_by_reason"] == {"invalid_utf8": 2}
    bad = pq.read_table(tmp_path / "q.parquet").to_pylist()
    assert [(b["where"], b["reason"]) for b in bad] == [
        (f"t.{fmt}:18", "invalid_utf8"),
        (f"t.{fmt}:121", "invalid_utf8"),
    ]
    times = dict(zip(*pq.read_table(tmp_path / "r.parquet", columns=["id", "time"]).to_pydict().values()))
    assert (
        str(times[f"t.{fmt}:6"]) == "2020-01-05 08:00:00"
        and str(times[f"t.{fmt}:7"]) == "2020-01-05 10:00:00"
    )


def test_invalid_utf8_in_a_parquet_text_column_of_bytes_quarantines_its_rows(tmp_path):
    texts = [b"bad \xff bytes" if i in (3, 7) else b"hello %d" % i for i in range(20)]
    pq.write_table(
        pa.table(
            {
                "time": [f"2020-01-0{1 + i % 9}" for i in range(20)],
                "text": pa.array(texts, pa.binary()),
                "label": ["a", "b"] * 10,
            }
        ),
        tmp_path / "b.parquet",
    )
    cfg = {
        "source": str(tmp_path / "b.parquet"),
        "time": "time",
        "text": ["text"],
        "label": "label",
        "task": "binary",
        "slices": {"unit": "year", "start": 2020, "end": 2021},
    }
    counts = ingest("t", parse(TableParams, cfg, "t"), tmp_path / "r.parquet", tmp_path / "q.parquet")
    assert counts["kept"] == 18 and counts["quarantined_by_reason"] == {"invalid_utf8": 2}
    assert [b["where"] for b in pq.read_table(tmp_path / "q.parquet").to_pylist()] == [
        "b.parquet:4",
        "b.parquet:8",
    ]


def hostile_parquet(path: Path, column_type: str) -> Path:
    """200 rows; rows 18 and 121 hold invalid UTF-8 in the text, 51 in the label, 61 in the time: as a string
    column built from the raw bytes (what a careless writer leaves: pyarrow does not check) or as binary."""

    def strings(values):
        if column_type == "binary":
            return pa.array(values, pa.binary())
        offsets = np.cumsum([0] + [len(v) for v in values]).astype(np.int32)
        return pa.Array.from_buffers(
            pa.string(), len(values), [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(values))]
        )

    texts = [b"bad \xff bytes" if i in (17, 120) else b"hello number %d" % i for i in range(200)]
    labels = [b"a\xfe" if i == 50 else b"ab"[i % 2 : i % 2 + 1] for i in range(200)]
    times = [b"2020-01-0\xff" if i == 60 else b"2020-01-0%d" % (1 + i % 9) for i in range(200)]
    table = pa.table({"time": strings(times), "text": strings(texts), "label": strings(labels)})
    if path.suffix == ".arrow":  # a save_to_disk file: the Arrow IPC stream format
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
    else:
        pq.write_table(table, path)
    return path


@pytest.mark.parametrize(
    "column_type, fmt", [("string", "parquet"), ("binary", "parquet"), ("string", "arrow")]
)
def test_invalid_utf8_in_any_parquet_column_quarantines_its_rows(tmp_path, column_type, fmt):
    path = hostile_parquet(tmp_path / f"p.{fmt}", column_type)
    cfg = {
        "source": str(path),
        "time": "time",
        "text": ["text"],
        "label": "label",
        "task": "binary",
        # no classes: label_names skips the bad cell
        "slices": {"unit": "year", "start": 2020, "end": 2021},
    }
    counts = ingest("t", parse(TableParams, cfg, "t"), tmp_path / "r.parquet", tmp_path / "q.parquet")
    assert counts["kept"] == 196 and counts["quarantined_by_reason"] == {"invalid_utf8": 4}
    assert [(b["where"], b["reason"]) for b in pq.read_table(tmp_path / "q.parquet").to_pylist()] == [
        (f"p.{fmt}:18", "invalid_utf8"),
        (f"p.{fmt}:51", "invalid_utf8"),
        (f"p.{fmt}:61", "invalid_utf8"),
        (f"p.{fmt}:121", "invalid_utf8"),
    ]
    assert pq.read_table(tmp_path / "r.parquet")["text"][0].as_py() == "hello number 0"
    (tmp_path / "params.yaml").write_text("datasets: {}\n")
    result = drift_cli("init", "mine", path.name, cwd=tmp_path)  # every role from the columns themselves
    assert result.returncode == 0, result.stderr
    assert (
        "4 row(s) hold invalid UTF-8: ingest will quarantine them (invalid_utf8) and keep the rest"
        in result.stdout
    )
    section = yaml.safe_load((tmp_path / "params.yaml").read_text())["mine"]
    assert (section["time"], section["text"], section["label"], section["task"]) == (
        "time",
        ["text"],
        "label",
        "binary",
    )


def test_drift_init_proposes_a_section_for_a_table_with_invalid_utf8_and_counts_its_rows(tmp_path):
    hostile_table(tmp_path, "csv")
    (tmp_path / "params.yaml").write_text("datasets: {}\n")
    result = drift_cli(
        "init", "mine", "t.csv", "--time", "time", "--text", "text", "--label", "label", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert (
        "2 row(s) hold invalid UTF-8: ingest will quarantine them (invalid_utf8) and keep the rest"
        in result.stdout
    )


def test_timestamps_with_offsets_and_z_are_utc_in_every_reader():
    import polars as pl

    values = [
        "2020-01-05 10:00:00",
        "2020-01-05T10:00:00+02:00",
        "2020-01-05T10:00:00Z",
        "2020-01-05T10:00:00-05:30",
    ]
    assert [str(t) for t in parse_time(pl.Series(values), "timestamp", None).to_list()] == [
        "2020-01-05 10:00:00",
        "2020-01-05 08:00:00",
        "2020-01-05 10:00:00",
        "2020-01-05 15:30:00",
    ]
    assert str(parse_date("2020-01-05T10:00:00+02:00")) == "2020-01-05 08:00:00"
    assert str(parse_date("2020-01-05T10:00:00Z")) == "2020-01-05 10:00:00"


# ---------------------------------------------------------------- 5. work bounded by the settings


@pytest.mark.parametrize(
    "key, value, line",
    [
        ("embed.max_length", 100000, "embed.max_length must be at most 8192, got 100000"),
        (
            "embed.max_length",
            1000,
            "embed.max_length is 1000, above the 512 positions of encoder minilm-l6: set it to at most 512",
        ),
        ("train.epochs", 100000000, "train.epochs must be at most 10000, got 100000000"),
        ("train.threads", 100000, "train.threads must be at most 256, got 100000"),
        ("train.batch_size", 10**9, "train.batch_size must be at most 65536, got 1000000000"),
    ],
)
def test_settings_beyond_sane_bounds_are_refused_with_the_limit(key, value, line):
    assert refused(params(**{key: value})) == line


@pytest.mark.compute
def test_one_huge_text_costs_what_a_normal_one_does():
    from drift.encoders.text import CHARS_PER_TOKEN, TextEncoder

    encoder = TextEncoder("minilm-l6", max_length=64, device="cpu")
    huge = "word " * 10_000_000  # 50 MB
    start = time.perf_counter()
    pooled, tokens, counts = encoder.encode_flat([huge, "a normal text"])
    assert time.perf_counter() - start < 20  # uncut: 9 minutes and 8 GB
    assert counts.tolist()[0] == 64 and pooled.shape == (2, 384)
    assert CHARS_PER_TOKEN * 64 < len(huge)


@pytest.mark.pipeline
def test_a_typo_in_a_roster_fails_in_the_check_stage_before_ingest(tmp_path):
    data = with_table(params(), "mine", models=["tx-ss"])
    (tmp_path / "t.csv").write_text("time,text,label\n2020-01-01,a,pos\n2021-01-01,b,neg\n")
    data["mine"]["slices"] = {"unit": "year", "start": 2020, "end": 2022}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(data))
    result = run([sys.executable, str(ROOT / "stages" / "check.py")], tmp_path, check=False)
    from drift.core.model_registry import ALIASES, MODELS

    assert result.returncode == 2 and result.stderr == (
        f"error: unknown model 'tx-ss': did you mean tx-s, tx-m, tx-l? valid: {', '.join(sorted([*MODELS, *ALIASES]))}\n"
    )
    assert not (tmp_path / "data" / "checked").exists()


# ---------------------------------------------------------------- 6. warnings where results will be empty


def sliced(min_samples: int, slices: list[dict]) -> SliceManifest:
    """A slice manifest of dataset mine with these slices (indices and dates filled in)."""
    return SliceManifest(
        dataset="mine",
        task="binary",
        modality="text",
        label_names=["neg", "pos"],
        min_samples=min_samples,
        slices=[{"index": i, "start": "", "end": "", **s} for i, s in enumerate(slices)],
    )


def test_one_warning_line_per_reason_results_will_be_empty():
    one_slice = sliced(
        20, [{"label": "2020", "rows": 200, "train": 140, "test": 60, "trainable": True, "usable": True}]
    )
    assert slice_warnings(one_slice) == [
        "mine: 1 usable slice(s) (2020) of 1: Future and Decay will be empty; spread the rows over more slices "
        "(mine.slices) or lower mine.min_samples (now 20)"
    ]
    no_test = sliced(
        1,
        [
            {"label": "2020", "rows": 1, "train": 1, "test": 0, "trainable": True, "usable": False},
            {"label": "2021", "rows": 9, "train": 6, "test": 3, "trainable": True, "usable": True},
            {"label": "2022", "rows": 9, "train": 6, "test": 3, "trainable": True, "usable": True},
        ],
    )
    assert slice_warnings(no_test) == [
        "mine: slice(s) 2020 have no test rows: their columns stay empty; raise "
        "split.test_fraction or widen mine.slices"
    ]
    untrainable = sliced(
        50, [{"label": "2020", "rows": 9, "train": 6, "test": 3, "trainable": False, "usable": False}]
    )
    assert slice_warnings(untrainable)[1] == (
        "mine: no slice has training rows and 50 or more rows: no model can be trained, the roster fills no cell; "
        "lower mine.min_samples or split.test_fraction"
    )


# ---------------------------------------------------------------- 7. messages a user can act on


def test_a_checkpoint_that_is_not_a_plain_state_dict_is_named_recomputed_and_flagged(tmp_path):
    buffer = io.BytesIO()
    torch.save(torch.nn.Linear(2, 2), buffer)  # a whole module: a pickle weights_only refuses
    body = buffer.getvalue()
    cache = ResultCache(tmp_path / "cache")
    path = cache.checkpoint_file("ab" * 32)
    path.parent.mkdir(parents=True)
    path.write_bytes(checkpoint_header("ab" * 32, body) + body)  # a valid checksum, under its own key
    assert cache.checkpoint("ab" * 32) is None and cache.corrupt == [str(path)]  # a miss: train recomputes it
    # drift cache verify
    assert checkpoint_problem(path.read_bytes(), "ab" * 32) == "not a plain state dict (UnpicklingError)"
    workspace = tmp_path / "cutoff000.pt"
    workspace.write_bytes(body)
    with pytest.raises(DriftError) as e:
        load_checkpoint("baseline-linear", InputSpec("pooled", (2,)), 2, "binary", workspace)
    assert str(e.value) == (
        f"checkpoint {workspace} is not a plain state dict (UnpicklingError): delete it and run "
        f"`dvc repro -f train@<dataset>` to train or place it again"
    )
    assert "weights_only" not in str(e.value)


@pytest.mark.pipeline
def test_ctrl_c_in_a_stage_is_one_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import time\nfrom drift.core.stage import run_stage\n"
        "def main(argv):\n    print('ready', flush=True)\n    time.sleep(60)\n"
        "run_stage(main)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DVC_STAGE": "train@sotu"}
    process = subprocess.Popen(
        [sys.executable, str(script), "sotu"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert process.stdout.readline().strip() == "ready"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130 and err == "train@sotu: interrupted; re-run resumes\n"


def test_a_stage_log_stays_in_the_logs_folder_whatever_the_arguments():
    from drift.core.stage import LOGS, log_path

    path = log_path("ingest@../../../escape")
    assert (
        path.parent.name == "logs" and path.parent == log_path("ingest@sotu").parent and LOGS.endswith("logs")
    )
    assert path.name == "ingest@.._.._.._escape.log"


def test_a_preset_name_that_is_no_identifier_is_refused(tmp_path):
    from drift.core.presets import apply_preset

    with pytest.raises(DriftError) as e:
        apply_preset("../params", tmp_path / "params.yaml", tmp_path)
    assert str(e.value) == f"preset: '../params' is not a valid name: {RULE}"


def _open_files(pid: int) -> list[str]:
    fds = Path(f"/proc/{pid}/fd")
    names = []
    for fd in fds.iterdir() if fds.exists() else []:
        try:
            names.append(os.readlink(fd))
        except OSError:  # closed meanwhile
            pass
    return names


@pytest.mark.pipeline
def test_ctrl_c_in_a_drift_command_is_one_line_and_leaves_nothing_behind(tmp_path):
    rows = b"".join(
        b"2020-01-%02d,some words here %d,%s\n" % (1 + i % 28, i, b"ab"[i % 2 : i % 2 + 1])
        for i in range(2_000_000)
    )
    # invalid UTF-8: a copy
    (tmp_path / "big.csv").write_bytes(b"time,text,label\n2020-01-01,bad \xff,a\n" + rows)
    (tmp_path / "params.yaml").write_text("datasets: {}\n")
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path / "tmp")}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "drift.cli",
            "init",
            "mine",
            "big.csv",
            "--time",
            "time",
            "--text",
            "text",
            "--label",
            "label",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    # inside the command: copying the table
    while not any("/utf8-" in name for name in _open_files(process.pid)):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert (process.returncode, err, out) == (
        130,
        "python -m drift.cli init: interrupted; re-run resumes\n",
        "",
    )
    assert (tmp_path / "params.yaml").read_text() == "datasets: {}\n" and list(
        (tmp_path / "tmp").iterdir()
    ) == []

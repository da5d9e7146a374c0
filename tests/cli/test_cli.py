"""The `drift` command, run as users run it."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.helpers import SHIPPED_PARAMS, metrics_json
from tests.helpers import drift_cli as drift

DRIFT = str(Path(sys.executable).parent / "drift")


def write_metrics(root: Path):
    for model, (id_, future) in {"ffn-s": (0.8, 0.7), "tx-s": (0.9, 0.6), "bigru-s": (0.7, 0.69)}.items():
        path = root / "metrics" / "sotu" / f"{model}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            metrics_json(
                id=id_,
                future=future,
                decay=id_ - future,
                metric="accuracy",
                higher_is_better=True,
                k=18,
                seeds=1,
                family="x",
            )
        )
    path = root / "metrics" / "amazon" / "ffn-s.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        metrics_json(
            id=0.7,
            future=0.8,
            decay=0.1,
            metric="balanced_mse",
            higher_is_better=False,
            k=20,
            seeds=3,
            family="FFN",
        )
    )


def test_summary_ranks_by_decay_or_as_asked(tmp_path):
    write_metrics(tmp_path)
    result = drift("summary", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    # decay: bigru-s 0.7 - 0.69 = 0.01, ffn-s 0.8 - 0.7 = 0.1, tx-s 0.9 - 0.6 = 0.3
    assert [r["model"] for r in out["sotu"]] == ["bigru-s", "ffn-s", "tx-s"]
    assert [r["rank"] for r in out["sotu"]] == [1, 2, 3]
    assert {r["ranked_by"] for r in out["sotu"]} == {"decay"}
    table = drift("summary", "sotu", cwd=tmp_path).stdout
    assert "ffn-s" in table and "0.700" in table and "amazon" not in table and "ranked by Decay" in table
    assert "vs prior" not in table  # no reference model: no margin column
    assert "lower is better" in drift("summary", "amazon", cwd=tmp_path).stdout

    by_future = json.loads(drift("summary", "sotu", "--by", "future", "--json", cwd=tmp_path).stdout)["sotu"]
    assert [r["model"] for r in by_future] == ["ffn-s", "bigru-s", "tx-s"] and by_future[0][
        "ranked_by"
    ] == "future"
    by_id = json.loads(drift("summary", "sotu", "--by", "id", "--json", cwd=tmp_path).stdout)["sotu"]
    assert [r["model"] for r in by_id] == ["tx-s", "ffn-s", "bigru-s"]
    bad = drift("summary", "--by", "auc", cwd=tmp_path)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "valid: decay, future, id" in bad.stderr


def test_summary_errors_are_one_line(tmp_path):
    result = drift("summary", cwd=tmp_path)
    assert result.returncode == 2 and "run `dvc repro` first" in result.stderr
    write_metrics(tmp_path)
    result = drift("summary", "sotuu", cwd=tmp_path)
    assert result.returncode == 2 and "did you mean sotu" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_models_json_fields(tmp_path):
    result = drift("models", "--json", cwd=tmp_path)
    rows = json.loads(result.stdout)
    assert {tuple(sorted(r)) for r in rows} == {
        ("family", "input", "name", "size", "total_params", "trainable_params")
    }
    by_name = {r["name"]: r for r in rows}
    assert (
        by_name["probe-dinov2-s"]["trainable_params"] == 770
        and by_name["probe-minilm-l6"]["trainable_params"] == 385
    )
    assert abs(by_name["cnn-s"]["trainable_params"] - 94_000) / 94_000 < 0.1


def test_models_for_a_dataset_use_its_inputs_and_outputs(tmp_path):
    root = tmp_path  # the shipped params.yaml: sotu is binary on 384-d MiniLM states
    shutil.copy(SHIPPED_PARAMS, root / "params.yaml")
    rows = {r["name"]: r for r in json.loads(drift("models", "--dataset", "sotu", "--json", cwd=root).stdout)}
    assert rows["probe-minilm-l6"]["trainable_params"] == 384 * 2 + 2
    # the frozen encoder counts in the total
    assert rows["probe-minilm-l6"]["total_params"] == 770 + 22_700_000
    assert rows["probe-roberta"]["trainable_params"] == 768 * 2 + 2
    assert "cnn-s" not in rows and "probe-dinov2-s" not in rows
    images = {
        r["name"]
        for r in json.loads(drift("models", "--dataset", "synth-portraits", "--json", cwd=root).stdout)
    }
    assert "cnn-s" in images and "ffn-s" not in images and "probe-dinov2-s" in images


# --- reference models in `drift summary` -----------------------------------------------------------------------

# ID, Future per model (accuracy, higher is better); decay = ID - Future
WITH_REFS = {
    "ffn-s": (0.80, 0.60, "FFN"),
    "tx-s": (0.90, 0.80, "Transformer"),
    "cnn-s": (0.55, 0.50, "CNN"),
    "baseline-prior": (0.60, 0.60, "Reference"),
    "baseline-linear": (0.70, 0.62, "Reference"),
}


def write_with_refs(root: Path, models=WITH_REFS, seeds=1, dataset="sotu"):
    for model, (id_, future, family) in models.items():
        path = root / "metrics" / dataset / f"{model}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        stats = {
            "id": id_,
            "future": future,
            "decay": id_ - future,
            "metric": "accuracy",
            "higher_is_better": True,
            "k": 3,
            "seeds": seeds,
            "family": family,
        }
        if seeds > 1:
            stats.update(id_std=0.0123, future_std=0.0456, decay_std=0.0789)
        if family == "Reference":
            stats["reference"] = True
        path.write_text(metrics_json(**stats))


def invoke(*args, root: Path):
    from typer.testing import CliRunner

    from drift.cli import app

    return CliRunner().invoke(app, [*args, "--metrics-dir", str(root / "metrics")])


def test_summary_with_references(tmp_path):
    write_with_refs(tmp_path)
    result = invoke("summary", "--json", root=tmp_path)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["sotu"]
    # decay: cnn-s 0.05, tx-s 0.10, ffn-s 0.20; the references after them, unranked
    assert [(r["rank"], r["model"], r["reference"]) for r in rows] == [
        (1, "cnn-s", False),
        (2, "tx-s", False),
        (3, "ffn-s", False),
        (None, "baseline-prior", True),
        (None, "baseline-linear", True),
    ]
    by = {r["model"]: r for r in rows}
    assert by["ffn-s"]["margin_prior"] == pytest.approx(0.80 - 0.60) and by["ffn-s"]["beats_prior"] is True
    assert by["tx-s"]["margin_linear"] == pytest.approx(0.90 - 0.70)
    assert by["cnn-s"]["margin_prior"] == pytest.approx(0.55 - 0.60) and by["cnn-s"]["beats_prior"] is False
    assert "margin_prior" not in by["baseline-prior"]

    result = invoke("summary", "sotu", root=tmp_path)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "vs prior" in out and "vs linear" in out and "-0.050" in out and "+0.200" in out
    ref_lines = [line for line in out.splitlines() if line.strip().startswith("ref ")]
    assert [line.split()[1] for line in ref_lines] == ["baseline-prior", "baseline-linear"]
    lines = out.splitlines()
    assert lines.index(ref_lines[0]) > next(i for i, line in enumerate(lines) if " ffn-s " in line)
    warning = (
        "warning: cnn-s does not beat baseline-prior in distribution on sotu "
        "(ID 0.550 vs prior 0.600, accuracy, higher is better)"
    )
    assert warning in out and out.count("does not beat") == 1
    assert out.index(warning) > out.index(ref_lines[-1])  # under its table


def test_summary_without_a_prior_prints_no_warning(tmp_path):
    write_with_refs(tmp_path, {k: v for k, v in WITH_REFS.items() if k != "baseline-prior"})
    result = invoke("summary", root=tmp_path)
    assert result.exit_code == 0 and "does not beat" not in result.stdout
    header = next(line for line in result.stdout.splitlines() if line.startswith("rank"))
    assert "vs prior" not in header and "vs linear" in header
    rows = json.loads(invoke("summary", "--json", root=tmp_path).stdout)["sotu"]
    assert all(r["margin_prior"] is None and r["beats_prior"] is None for r in rows if not r["reference"])


DEFAULT_ROSTER = {"bigru-s": (0.75, 0.6, "Recurrent"), "probe-minilm": (0.65, 0.55, "Frozen")}
# above linear: no mark
LONG_NAMES = {"probe-vit-s16-in21k": (0.72, 0.55, "Frozen"), "bilstm-attn-l": (0.75, 0.6, "Recurrent")}


@pytest.mark.parametrize(
    "extra, seeds, every_column",
    [
        (DEFAULT_ROSTER, 1, True),  # the default run's names, one seed: room for vs linear and the family
        (DEFAULT_ROSTER, 3, False),  # ± seed std kept, the optional columns give way
        (LONG_NAMES, 1, False),  # a 19-character name: vs linear gives way
        (LONG_NAMES, 3, False),
    ],
)
def test_summary_table_fits_80_columns_without_cutting(extra, seeds, every_column):
    from rich.console import Console

    from drift.cli.pipeline_commands import summary_table
    from drift.report.results import summary_rows

    models = {**WITH_REFS, **extra}
    spread = {"id_std": 0.0123, "future_std": 0.0456, "decay_std": 0.0789} if seeds > 1 else {}
    stats = {
        m: {
            "id": i,
            "future": f,
            "decay": i - f,
            "metric": "accuracy",
            "higher_is_better": True,
            "k": 3,
            "seeds": seeds,
            "family": fam,
            **spread,
        }
        for m, (i, f, fam) in models.items()
    }
    rows = summary_rows(stats, "decay")
    table, std_left_out = summary_table(rows, 80)
    console = Console(width=80, record=True, file=open("/dev/null", "w"))
    console.print(table)
    text = console.export_text()
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines) and "…" not in text
    header = lines[0].split()
    assert {"rank", "model", "ID", "Future", "Decay"} <= set(header) and "prior" in header  # "vs prior"
    for r in rows:  # every row on one line with its full name, its values and its margin
        line = next(line for line in lines if f" {r['model']} " in f" {line} ")
        assert f"{r['id']:.3f}" in line and f"{r['decay']:.3f}" in line
        assert line.split()[0] == ("ref" if r["reference"] else str(r["rank"]))
        if not r["reference"]:
            assert f"{r['margin_prior']:+.3f}" in line
    assert (("linear" in header) and ("family" in header)) is every_column
    assert std_left_out is False
    if seeds > 1:
        assert "± 0.012" in text  # the seed spread is kept before the optional columns


def test_summary_shows_the_margin_over_baseline_tfidf():
    from rich.console import Console

    from drift.cli.pipeline_commands import summary_table
    from drift.report.results import summary_rows

    models = {**WITH_REFS, "baseline-tfidf": (0.85, 0.70, "Reference")}
    stats = {
        m: {
            "id": i,
            "future": f,
            "decay": i - f,
            "metric": "accuracy",
            "higher_is_better": True,
            "k": 3,
            "seeds": 1,
            "family": fam,
        }
        for m, (i, f, fam) in models.items()
    }
    rows = summary_rows(stats, "decay")
    assert next(r for r in rows if r["model"] == "tx-s")["margin_tfidf"] == pytest.approx(0.05)
    # narrow: vs tfidf gives way after vs linear and the family
    for width, shown in ((200, True), (60, False)):
        table, _ = summary_table(rows, width)
        console = Console(width=width, record=True, file=open("/dev/null", "w"))
        console.print(table)
        text = console.export_text()
        assert ("tfidf" in text.splitlines()[0]) is shown and "…" not in text
        if shown:
            assert "+0.050" in next(line for line in text.splitlines() if " tx-s " in f" {line} ")


def test_a_metrics_dir_by_another_name_is_refused(tmp_path):
    """The summary reads plots/ and params.yaml beside --metrics-dir: a folder of another name would have
    had them read from somewhere else, so it is one line naming the folder and the fix."""
    write_with_refs(tmp_path)
    (tmp_path / "metrics").rename(tmp_path / "results")
    from typer.testing import CliRunner

    from drift.cli import app

    result = CliRunner().invoke(app, ["summary", "--metrics-dir", str(tmp_path / "results")])
    assert result.exit_code != 0
    assert "is not a workspace's metrics/ folder" in result.output and "<workspace>/metrics" in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.pipeline
def test_tables_are_not_cut_when_piped(tmp_path):
    """Piped (no terminal, no $COLUMNS), a summary too wide for 80 columns keeps every column and the seed
    std; with $COLUMNS=80 the optional columns give way as on a narrow terminal."""
    import os
    import subprocess

    write_with_refs(tmp_path, {**WITH_REFS, **LONG_NAMES}, seeds=3)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    cmd = [DRIFT, "summary", "--metrics-dir", str(tmp_path / "metrics")]
    piped = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    header = next(line for line in piped.stdout.splitlines() if " rank " in f" {line} ")
    assert "family" in header and "linear" in header and "…" not in piped.stdout
    assert "left out to fit" not in piped.stdout and max(map(len, piped.stdout.splitlines())) > 80
    narrow = subprocess.run(cmd, capture_output=True, text=True, env={**env, "COLUMNS": "80"}, cwd=tmp_path)
    assert all(len(line) <= 80 for line in narrow.stdout.splitlines() if "│" in line or " rank " in line)


def test_wild_time_summary_names_the_split_by_its_slice_label(tmp_path):
    write_with_refs(tmp_path)
    for path in (tmp_path / "metrics" / "sotu").glob("*.json"):
        stats = json.loads(path.read_text())
        stats["protocols"]["wild-time"] = {
            "eval_fix_split": 1,
            "eval_fix_split_label": "1990s",
            "eval_fix_average": 0.6,
            "eval_fix_worst": 0.5,
            "eval_stream_average": 0.7,
            "eval_stream_worst": 0.6,
        }
        path.write_text(metrics_json(**stats))
    shown = drift("summary", "--protocol", "wild-time", "--metrics-dir", tmp_path / "metrics", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "Eval-Fix trained through 1990s" in shown.stdout and "period 1" not in shown.stdout


# ---------------------------------------------------------------- drift init: --per-slice, a byte-exact round trip


def write_tickets(path: Path, per_year: int = 600, years=(2019, 2020, 2021)) -> None:
    """Tickets spread evenly over the months of `years`: per_year / 12 a month."""
    import datetime as dt

    rows = [
        {
            "ticket_id": f"T{y}-{i}",
            "opened": dt.datetime(y, 1 + i % 12, 1 + i % 28, 9, i % 60).isoformat(),
            "body": f"{['billing', 'login', 'shipping'][i % 3]} trouble with my order {i} please help",
            "category": ["billing", "login", "shipping"][i % 3],
        }
        for y in years
        for i in range(per_year)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def only_added(before: str, after: str) -> list[str]:
    """The lines `after` adds to `before`; fails when it changes or removes any byte of `before`."""
    import difflib

    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    assert all(op in ("equal", "insert") for op, *_ in ops), "".join(
        difflib.unified_diff(a, b, "before", "after")
    )
    return [line for op, _, _, j1, j2 in ops if op == "insert" for line in b[j1:j2]]


def test_drift_init_per_slice_chooses_the_unit_shows_it_and_slices_as_shown(tmp_path):
    from drift.core.params import load_params
    from drift.data.datasets import dataset_cfg
    from drift.data.ingest import ingest
    from drift.data.records import read_records
    from drift.store.slices import slice_dataset

    write_tickets(tmp_path / "t.jsonl", per_year=120)  # 10 rows a month over 2019-2021
    shutil.copy(SHIPPED_PARAMS, tmp_path / "params.yaml")
    for n, unit, k in ((8, "month", 36), (32, "quarter", 12), (50, "half-year", 6), (100, "year", 3)):
        shutil.copy(SHIPPED_PARAMS, tmp_path / "params.yaml")
        done = drift("init", "mine", "t.jsonl", "--per-slice", n, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        shown = done.stdout.splitlines()[0]
        median = {"month": 10, "quarter": 30, "half-year": 60, "year": 120}[unit]
        assert shown == (
            f"--per-slice {n}: unit {unit}, {k} slices (2019-2022), rows per slice min {median}, "
            f"median {median}, max {median}"
        ), done.stdout
        # every unit, then written
        assert "decade" in done.stdout and "wrote mine" in done.stdout.splitlines()[-2]
    # the last one (year) sliced for real: the slice table's rows per slice are the ones shown
    import os

    import yaml

    assert yaml.safe_load((tmp_path / "params.yaml").read_text())["mine"]["slices"] == {
        "unit": "year",
        "start": 2019,
        "end": 2022,
    }
    params = load_params(tmp_path / "params.yaml")
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        ingest("mine", dataset_cfg(params, "mine"), tmp_path / "r.parquet", tmp_path / "q.parquet")
        _, manifest = slice_dataset(read_records(tmp_path / "r.parquet"), "mine", params.split)
    finally:
        os.chdir(old)
    assert [s.rows for s in manifest.slices] == [120, 120, 120]
    # --slices and --per-slice: one line, nothing written; N must be a count
    before = (tmp_path / "params.yaml").read_text()
    both = drift("init", "other", "t.jsonl", "--per-slice", 100, "--slices", "year", cwd=tmp_path)
    assert both.returncode == 2 and "--slices and --per-slice both choose the slices: give one" in both.stderr
    assert len(both.stderr.strip().splitlines()) == 1
    zero = drift("init", "other", "t.jsonl", "--per-slice", 0, cwd=tmp_path)
    assert zero.returncode == 2 and "--per-slice 0" in zero.stderr
    assert (tmp_path / "params.yaml").read_text() == before
    shown = json.loads(drift("init", "other", "t.jsonl", "--per-slice", 400, "--json", cwd=tmp_path).stdout)
    assert shown["slicing"]["unit"] == "decade" and shown["slicing"]["rows"] == [120, 180, 240]


HAND_WRITTEN = """\
# my project's params: comments, flow lists, nulls, quoted strings and long lists, as a person writes them
datasets: {sotu: {input: "requirements.lock"}}   # flow style
sotu:
  min_words: 30        # a comment after a value
  start_year: 1853
  slices: {unit: 'decade', start: 1850, end: 2030}
  cap_per_slice: 100
  min_samples: 40
  strict: false
embed:
  text_encoder: "minilm-l6"
  encoders: []
  weights: {}
  cache_dir: ~
  dtype: 'float32'
train:
  epochs: 1
  seeds: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33]
  max_tokens: null
  grad_clip:
  models:
    sotu:
      - ffn-s
      - probe-minilm
# a comment between sections
report:
  policy:
    every: [2,
            3]
    shift_thresholds: null
"""


@pytest.mark.parametrize("start", ["shipped", "hand-written"])
def test_drift_init_adds_only_its_own_lines_to_params_yaml_and_force_replaces_only_them(tmp_path, start):
    import yaml

    write_tickets(tmp_path / "t.jsonl", per_year=60)
    params = tmp_path / "params.yaml"
    params.write_text(SHIPPED_PARAMS.read_text() if start == "shipped" else HAND_WRITTEN)
    before = params.read_text()
    done = drift("init", "mine", "t.jsonl", "--slices", "half-year", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    after = params.read_text()
    entry = "mine: {input: t.jsonl}"
    # a flow mapping grows in place: its line keeps its comment, nothing else moves
    if start == "hand-written":
        grown = 'datasets: {sotu: {input: "requirements.lock"}, ' + entry + "}   # flow style"
        assert after.splitlines()[1] == grown
        before = before.replace(before.splitlines()[1], grown)
    added = only_added(before, after)
    roster = "    mine: [ffn-s, probe-minilm]\n"
    assert added == ([] if start == "hand-written" else ["  " + entry + "\n"]) + [roster, "\n", "mine:\n"] + [
        f"  {line}\n"
        for line in (
            "kind: table",
            "id: ticket_id",
            "time: opened",
            "time_encoding: timestamp",
            "text: [body]",
            "label: category",
            "task: multiclass",
            "classes: [billing, login, shipping]",
            "slices: {unit: half-year, start: 2019, end: 2022}",
            "min_samples: 20",
            "strict: false",
        )
    ]
    written = yaml.safe_load(after)
    assert written["datasets"]["mine"] == {"input": "t.jsonl"}
    assert written["train"]["models"]["mine"] == ["ffn-s", "probe-minilm"]
    # the same name again: one line, nothing written; --force replaces its section and entry only
    again = drift("init", "mine", "t.jsonl", cwd=tmp_path)
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1
    assert "'mine' is already in params.yaml" in again.stderr and "--force" in again.stderr
    assert params.read_text() == after
    forced = drift("init", "mine", "t.jsonl", "--slices", "year", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    replaced = params.read_text()
    assert yaml.safe_load(replaced)["mine"]["slices"] == {"unit": "year", "start": 2019, "end": 2022}
    assert replaced == after.replace(
        "slices: {unit: half-year, start: 2019, end: 2022}", "slices: {unit: year, start: 2019, end: 2022}"
    )

"""dvc.yaml, written from one table: each stage's script, parameters, inputs and outputs (named by
drift/core/paths.py) and its code dependencies (the stage script's import closure inside drift/, computed
here).

    python -m drift.run.pipeline            write dvc.yaml
    python -m drift.run.pipeline --check    exit 1 when dvc.yaml differs from what this writes (a test runs it)

Edit this table, not dvc.yaml: a path changed in drift/core/paths.py or an import added to a stage's modules
reaches dvc.yaml the next time this runs, and tests/run/test_pipeline_file.py fails until it has.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Required, TypedDict

from drift.core.closure import ROOT, import_closure
from drift.core.dataset_registry import DATASETS, TABLE_READER
from drift.core.params import CHECKPOINT, ROSTER, TrainParams
from drift.core.paths import CHECKED, dvc_path


class Stage(TypedDict, total=False):
    """A stage's row: inputs and outputs are drift/core/paths.py names, `extra` deps are literal."""

    comment: str
    readers: bool  # its deps add what the dataset readers import (ingest)
    extra: list[str]
    inputs: Required[list[str]]
    params: Required[list[str]]
    outs: list[str]
    outs_uncached: list[str]
    outs_block: list[str]
    outs_persist: list[str]
    metrics: list[str]
    metrics_dirs: list[str]
    plots: list[tuple[str, str, str, str]]  # (path name, template, x, y)


# stage -> what it reads and writes
STAGES: dict[str, Stage] = {
    "ingest": {
        "comment": "its raw input (params.yaml `datasets`) and its reader (data/checked): a change re-runs "
        "this dataset's ingest only",
        "readers": True,
        "extra": ["${item.input}"],
        "inputs": ["checked"],
        "params": ["${key}"],
        "outs": ["records", "quarantine"],
        "metrics": ["ingest_metrics"],
    },
    "slice": {
        "comment": "the dataset's slicing keys and label names come with its records (ingest writes them there)",
        "inputs": ["records"],
        "params": ["split"],
        "outs": ["slices", "slice_manifest"],
    },
    "embed": {
        "comment": "only its inputs, its code, the embed params and its dataset's section (its own embed settings): a head, seed "
        "or epoch change finds every row in the store",
        "extra": ["requirements.lock"],
        "inputs": ["slice_manifest", "checked_embed"],
        "params": ["embed", "compute", "${key}"],
        "outs_block": ["embeddings"],
        "outs_persist": ["features"],
    },
    "train": {
        "extra": ["requirements.lock"],
        # records: train.row_order split redraws the split over them in ingest order; checked_train: the
        # declarations of its own heads (params.yaml `models:`)
        "inputs": ["slice_manifest", "embeddings", "records", "checked_train"],
        # what decides a checkpoint or which exist, from the schema's field metadata (train.models: this
        # dataset's)
        "params": [
            f"train.{n}"
            for n in TrainParams.deciding(CHECKPOINT) + TrainParams.deciding(ROSTER)
            if n != "models"
        ]
        + ["embed.max_length", "train.models.${key}", "compute", "${key}"],
        "outs": ["models"],
    },
    "evaluate": {
        "extra": ["requirements.lock"],
        "inputs": ["models", "slice_manifest", "embeddings", "checked_train"],
        "params": [
            "evaluate",
            "train.threads",
            "train.max_tokens",
            "train.baselines",
            "embed.max_length",
            "train.models.${key}",
            "compute",
            "${key}",
        ],
        "outs": ["eval"],
    },
    "report": {
        "extra": ["requirements.lock", "drift/report/templates"],  # the HTML page's markup (html.py)
        "inputs": ["eval", "models", "slice_manifest", "embeddings"],
        "params": [
            "train.baselines",
            "train.epochs",
            "report",
            "train.models.${key}",
            "train.max_tokens",
            "embed.max_length",
            "embed.text_encoder",
            "embed.encoders",
            "${key}",
        ],
        "metrics_dirs": ["metrics"],
        "plots": [
            ("plots", "drift_heatmap", "eval", "train"),
            ("deviations", "drift_deviation", "eval", "train"),
            ("forgetting", "drift_lines", "gap", "value"),
            ("policies", "drift_policies", "cost", "mean"),
            ("losses", "drift_losses", "epoch", "loss"),
        ],
        "outs_uncached": ["tables", "tables_md", "shift_summary", "report_html"],
    },
}

HEADER = """\
# Written by `python -m drift.run.pipeline` from drift/run/pipeline.py (stages) and drift/core/paths.py (paths): edit those,
# then run it again; tests/run/test_pipeline_file.py fails while this file differs from what it writes.
# One stage family per step of docs/architecture.md, each a thin script in stages/ calling drift/. `foreach` makes
# ingest@sotu, slice@sotu, ... for every dataset in params.yaml `datasets` (name: {input}). Code deps are each
# stage script's import closure inside drift/ (ingest's adds what the readers import; its own reader comes through
# data/checked/<name>.json); requirements.lock is a dep too: new package versions can change results.
"""


# ---------------------------------------------------------------- dvc.yaml


def _flow(items: list[str], indent: int) -> str:
    """A YAML flow list, wrapped at 118 columns with its items aligned after the bracket at column `indent`."""
    lines, line = [], ""
    for item in items:
        piece = (f'"{item}"' if "$" in item else item) + ", "
        if line and indent + 1 + len(line) + len(piece) > 119:
            lines.append(line.rstrip())
            line = ""
        line += piece
    lines.append(line.rstrip().rstrip(","))
    return "[" + ("\n" + " " * (indent + 1)).join(lines) + "]"


def check_stage(root: Path = ROOT) -> list[str]:
    """The first stage: the whole params.yaml validated on every `dvc repro` and `dvc exp run`, even when no
    other stage would re-run (always_changed); its file per dataset (the reader and its code digest, the same
    bytes while neither changes) orders each ingest after it and re-runs it when its reader changes."""
    script = "stages/check.py"
    deps = [script] + sorted(import_closure(root / script, root)) + ["params.yaml"]
    return [
        "  check:",
        f"    cmd: python {script}",
        "    # a typo, a bad value or a model that cannot run on its dataset fails here, before any stage reads params.yaml",
        f"    deps: {_flow(deps, 10)}",
        f"    outs: [{CHECKED}]",
        "    always_changed: true",
        "",
    ]


def dvc_yaml(root: Path = ROOT) -> str:
    out = [HEADER, "stages:"] + check_stage(root)
    for name, stage in STAGES.items():
        script = f"stages/{name}.py"
        code = set(import_closure(root / script, root))
        if stage.get("readers"):  # what the readers import, but no reader: each comes through data/checked
            readers = {info.reader for info in DATASETS.values()} | {TABLE_READER}
            for reader in readers:
                code |= set(import_closure(root / reader, root)) - readers
        deps = [script] + sorted(code) + stage.get("extra", [])
        deps += [dvc_path(key) for key in stage["inputs"]]
        # the key quoted: no name reaches the shell as more than one word (names are identifiers too)
        out += [f"  {name}:", "    foreach: ${datasets}", "    do:", f"      cmd: python {script} '${{key}}'"]
        if stage.get("comment"):
            out.append(f"      # {stage['comment']}")
        out.append(f"      deps: {_flow(deps, 12)}")
        out.append(f"      params: {_flow(stage['params'], 14)}")
        if stage.get("outs"):
            out.append(f"      outs: {_flow([dvc_path(k) for k in stage['outs']], 12)}")
        if stage.get("outs_uncached"):
            out.append("      outs:")
            out += [f"        - {dvc_path(k)}: {{cache: false}}" for k in stage["outs_uncached"]]
        if stage.get("outs_block"):
            # cached, so `dvc push` / `dvc pull` carry them; the persistent ones are kept between runs (not
            # removed first) and rebuilt only when stale (the embeddings train reads, GBs on a paper corpus)
            out.append("      outs:")
            out += [f"        - {dvc_path(k)}" for k in stage["outs_block"]]
            out += [f"        - {dvc_path(k)}: {{persist: true}}" for k in stage.get("outs_persist", [])]
        metrics = [dvc_path(k) for k in stage.get("metrics", []) + stage.get("metrics_dirs", [])]
        if metrics:
            out.append("      metrics:")
            out += [f"        - {m}: {{cache: false}}" for m in metrics]
        if stage.get("plots"):
            out.append("      plots:")
            out += [
                f"        - {dvc_path(k)}: {{cache: false, template: {t}, x: {x}, y: {y}}}"
                for k, t, x, y in stage["plots"]
            ]
        out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    path = ROOT / "dvc.yaml"
    text = dvc_yaml()
    if "--check" in argv:
        if path.read_text() != text:
            print(
                f"{path} differs from what drift/run/pipeline.py writes: run `python -m drift.run.pipeline`",
                file=sys.stderr,
            )
            return 1
        return 0
    path.write_text(text)
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

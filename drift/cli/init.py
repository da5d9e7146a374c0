"""`drift init <name> <source>`: a table of your own added to params.yaml (its section, its `datasets` entry, a
roster), from what its columns show (drift/data/inspect.py), comments of params.yaml kept."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from drift.cli.common import console, fail
from drift.core.datasets import DATASETS
from drift.core.errors import DriftError, check_name
from drift.core.params import load_params
from drift.data.datasets import check_datasets
from drift.data.inspect import Ambiguous, entry, propose

ROSTERS = {"text": ["ffn-s", "probe-minilm"], "image": ["mlp-s", "cnn-s"]}  # the models a new dataset starts with


def write_dataset(params_path: Path, name: str, section: dict, modality: str) -> None:
    """Add (or replace) dataset `name` in params.yaml: its entry under `datasets`, its section, its roster."""
    from ruamel.yaml import YAML  # lazy: ruamel.yaml, only when params.yaml is edited

    yaml_rt = YAML()
    yaml_rt.width = 120
    params = yaml_rt.load(params_path.read_text()) if params_path.exists() else {}
    params.setdefault("datasets", {})[name] = entry(section["source"])
    params[name] = section
    models = params.setdefault("train", {}).setdefault("models", {})
    if not models.get(name):
        models[name] = ROSTERS[modality]
    # the edited params must hold up before they are written
    check_datasets(load_params(json.loads(json.dumps(params))))
    with open(params_path, "w") as f:
        yaml_rt.dump(params, f)


def init(name: str = typer.Argument(..., help="the dataset's name in params.yaml (any name not built in)"),
         source: str = typer.Argument(..., help="a Parquet, CSV or JSON-lines file (.gz too), a folder or glob "
                                      "of them, or a Hugging Face save_to_disk folder"),
         time: Optional[str] = typer.Option(None, "--time", help="the time column"),
         text: Optional[str] = typer.Option(None, "--text", help="text columns, comma-separated, joined in order"),
         image: Optional[str] = typer.Option(None, "--image", help="the image column (bytes, paths or arrays)"),
         label: Optional[str] = typer.Option(None, "--label", help="the label column (multilabel: comma-separated)"),
         task: Optional[str] = typer.Option(None, "--task", help="binary, multiclass, regression or multilabel"),
         id_column: Optional[str] = typer.Option(None, "--id", help="the id column (unique per row); none: row "
                                                 "numbers; by default the one unique key-like column"),
         slices: Optional[str] = typer.Option(None, "--slices", help="UNIT[:START:END], e.g. year, half-year, "
                                              "decade:1950:2030 (default: years when the data spans 3 or more)"),
         params_path: Path = typer.Option(Path("params.yaml"), "--params", help="the params.yaml to edit"),
         as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """Inspect a table's columns, propose its section (time, input, label, task, slices) and write it to
    params.yaml, so that the next `dvc repro` runs it. An ambiguous column is a question on stderr."""
    split = (lambda v: [c.strip() for c in v.split(",") if c.strip()] if v else None)
    try:
        check_name(name, "dataset name")
        if name in DATASETS:
            raise DriftError(f"{name!r} is a built-in dataset: choose another name for your table")
        proposal = propose(name, source, time=time, text=split(text), image=image, label=split(label), task=task,
                           id_column=id_column, slices=slices)
        section = proposal["section"]
        write_dataset(params_path, name, section, "text" if "text" in section else "image")
    except Ambiguous as question:
        Console(stderr=True, soft_wrap=True).print(f"[yellow]question:[/yellow] {question}", highlight=False)
        raise typer.Exit(2)
    except DriftError as e:
        fail(e)
    if as_json:
        print(json.dumps(proposal, indent=2, default=str))
        return
    columns = ", ".join(f"{c} ({t})" for c, t in proposal["columns"].items())
    console.print(f"[bold]{name}[/bold]: {proposal['files']} file(s), columns {columns}; time from "
                  f"{proposal['span'][0]} to {proposal['span'][1]}", highlight=False, soft_wrap=True)
    chosen = {k: section[k] for k in ("id", "time", "time_encoding", "time_format", "text", "image",
                                      "image_encoding", "label", "task", "classes", "slices") if k in section}
    for key, value in chosen.items():
        console.print(f"  {key}: {value}", highlight=False, soft_wrap=True)
    if proposal.get("invalid_utf8"):
        console.print(f"{proposal['invalid_utf8']} row(s) hold invalid UTF-8: ingest will quarantine them "
                      f"(invalid_utf8) and keep the rest", highlight=False, soft_wrap=True)
    console.print(f"wrote {name} to {params_path} (datasets.{name}, {name}:, train.models.{name}); change any "
                  f"key there or re-run with --time/--text/--image/--label/--task", style="dim", soft_wrap=True)
    console.print(f"next: dvc repro   then: drift summary {name}   and reports/{name}.html", highlight=False)


COMMANDS = (init,)

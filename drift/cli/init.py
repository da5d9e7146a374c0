"""`drift init <name> <source>`: a table of your own added to params.yaml (its section, its `datasets` entry,
a roster), from what its columns show (drift/data/inspect.py); params.yaml is edited as text, so every other
byte of it stays as it was."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import typer
import yaml
from rich.console import Console

from drift.cli.common import console, esc, fail
from drift.core.dataset_registry import DATASETS
from drift.core.errors import DriftError, check_name
from drift.core.params import load_params, read_yaml
from drift.data.datasets import check_datasets
from drift.data.inspect import Ambiguous, propose

ROSTERS = {
    "text": ["ffn-s", "probe-minilm"],
    "image": ["mlp-s", "cnn-s"],
}  # the models a new dataset starts with


def write_dataset(
    params_path: Path, name: str, where: str, section: dict, modality: str, force: bool = False
) -> None:
    """Add dataset `name` to params.yaml as text: its `datasets` entry (`input: where`, the one place its
    files are named), its section (at the end) and, when it has none, its roster under train.models. Every
    other byte stays as it was (comments, flow lists, quoting, nulls). A name already there is a one-line
    error; `force` replaces its entry and section in place (the roster stays). The edited text must parse to
    exactly the intended params and pass the schema before it is written."""
    text = params_path.read_text() if params_path.exists() else ""
    params = read_yaml(params_path, text) or {}
    if not isinstance(params, dict):
        raise DriftError(f"{params_path} holds no mapping at its top level: it cannot take a dataset")
    if (name in params or name in (params.get("datasets") or {})) and not force:
        raise DriftError(
            f"{name!r} is already in {params_path}: choose another name, or --force to replace its "
            f"section and datasets entry (the rest of the file stays as it is)"
        )
    wanted = json.loads(json.dumps(params, default=str))
    wanted.setdefault("datasets", {})
    wanted["datasets"] = {**(wanted["datasets"] or {}), name: {"input": where}}
    wanted[name] = json.loads(json.dumps(section, default=str))
    train = wanted.setdefault("train", {}) or {}
    wanted["train"] = train
    roster = None if (train.get("models") or {}).get(name) else ROSTERS[modality]
    if roster:
        train["models"] = {**(train.get("models") or {}), name: roster}

    text = _set_item(text, ["datasets"], name, {"input": where})
    text = _set_item(text, [], name, section)
    if roster:
        text = _set_item(text, ["train", "models"], name, roster)
    if (
        json.loads(json.dumps(read_yaml(params_path, text), default=str)) != wanted
    ):  # the text edit went wrong: stop
        raise DriftError(
            f"could not add {name!r} to {params_path} without rewriting it: add the section "
            f"`drift init --json` prints by hand"
        )
    check_datasets(load_params(wanted))  # the edited params must hold up before they are written
    tmp = params_path.with_name(f".{params_path.name}.drift-init")
    try:  # written whole, then moved: Ctrl-C or a full disk never leaves half a params.yaml
        tmp.write_text(text)
        os.replace(tmp, params_path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _dump(key: str, value, indent: int) -> str:
    """`key: value` as YAML lines at `indent`: scalars and collections of scalars in flow style."""
    out = yaml.safe_dump(
        {key: value}, sort_keys=False, default_flow_style=None, width=120, allow_unicode=True
    )
    return "".join(" " * indent + line + "\n" for line in out.splitlines())


def _end(node) -> int:
    """Where a node's text ends: a block collection ends with its last item, not at the next key's line."""
    while isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and not node.flow_style and node.value:
        node = node.value[-1][1] if isinstance(node, yaml.MappingNode) else node.value[-1]
    return node.end_mark.index


def _line_end(text: str, index: int) -> int:
    """The start of the line after the one holding `index` (a block scalar's end is already there)."""
    if index > 0 and text[index - 1] == "\n":
        return index
    newline = text.find("\n", index)
    return len(text) if newline < 0 else newline + 1


def _set_item(text: str, path: list[str], key: str, value) -> str:
    """`text` with mapping `path` (top level: []) holding `key: value`, created where missing; only the lines
    of that item (or of the created mappings) change."""
    node = yaml.compose(text) if text.strip() else None
    indent = 0
    parents: list[str] = []
    for part in path:
        if node is not None and not isinstance(node, yaml.MappingNode):
            raise DriftError(f"params.yaml: {'.'.join(parents) or 'the top level'} is no mapping")
        found = [(k, v) for k, v in (node.value if node is not None else []) if k.value == part]
        if not found or not isinstance(found[0][1], yaml.MappingNode) or not found[0][1].value:
            break
        parents.append(part)
        node = found[0][1]
        indent = node.value[0][0].start_mark.column
    missing = path[len(parents) :]
    node_items = node.value if node is not None else []
    if missing:  # the mappings `path` lacks created (or an empty one filled) with the item inside
        tree = {key: value}
        for part in reversed(missing[1:]):
            tree = {part: tree}
        existing = [(k, v) for k, v in node_items if k.value == missing[0]]
        if existing:  # present but empty or null (`datasets:`, `models: {}`): that item replaced
            k, v = existing[0]
            return (
                text[: k.start_mark.index - k.start_mark.column]
                + _dump(missing[0], tree, k.start_mark.column)
                + text[_line_end(text, _end(v)) :]
            )
        if not parents:
            return _append(text, _dump(missing[0], tree, 0))
        at = _line_end(text, _end(node))
        return text[:at] + _dump(missing[0], tree, indent) + text[at:]
    if node is None:
        return _append(text, _dump(key, value, 0))
    items = [(k, v) for k, v in node.value if k.value == key]
    if items:  # replaced in place
        k, v = items[0]
        if node.flow_style:
            flow = yaml.safe_dump({key: value}, default_flow_style=True, width=10**6).strip()[1:-1]
            return text[: k.start_mark.index] + flow + text[_end(v) :]
        block = _dump(key, value, k.start_mark.column)
        return text[: k.start_mark.index - k.start_mark.column] + block + text[_line_end(text, _end(v)) :]
    if node.flow_style:  # {a: 1} -> {a: 1, key: value}
        flow = yaml.safe_dump({key: value}, default_flow_style=True, width=10**6).strip()[1:-1]
        close = node.end_mark.index - 1
        return text[:close] + (", " if node.value else "") + flow + text[close:]
    if not path:
        return _append(text, _dump(key, value, 0))
    at = _line_end(text, _end(node))
    return text[:at] + _dump(key, value, indent) + text[at:]


def _append(text: str, block: str) -> str:
    """`block` at the end of `text`, after a blank line (a new top-level key)."""
    if text and not text.endswith("\n"):
        text += "\n"
    return text + ("\n" if text.strip() else "") + block


def init(
    name: str = typer.Argument(..., help="the dataset's name in params.yaml (any name not built in)"),
    source: str = typer.Argument(
        ...,
        help="a Parquet, CSV or JSON-lines file (.gz too), a folder or glob "
        "of them, or a Hugging Face save_to_disk folder",
    ),
    time: str | None = typer.Option(None, "--time", help="the time column"),
    text: str | None = typer.Option(None, "--text", help="text columns, comma-separated, joined in order"),
    image: str | None = typer.Option(None, "--image", help="the image column (bytes, paths or arrays)"),
    label: str | None = typer.Option(None, "--label", help="the label column (multilabel: comma-separated)"),
    task: str | None = typer.Option(None, "--task", help="binary, multiclass, regression or multilabel"),
    id_column: str | None = typer.Option(
        None,
        "--id",
        help="the id column (unique per row); none: row numbers; by default the one unique key-like column",
    ),
    slices: str | None = typer.Option(
        None,
        "--slices",
        help="UNIT[:START:END], e.g. year, half-year, "
        "quarter, month, decade:1950:2030 (default: years when the data "
        "spans 3 or more)",
    ),
    per_slice: int | None = typer.Option(
        None,
        "--per-slice",
        help="choose the unit whose slices hold about N rows (shown before writing); not with --slices",
    ),
    force: bool = typer.Option(
        False, "--force", help="replace the section and datasets entry of a name already in params.yaml"
    ),
    params_path: Path = typer.Option(Path("params.yaml"), "--params", help="the params.yaml to edit"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
):
    """Inspect a table's columns, propose its section (time, input, label, task, slices) and write it to
    params.yaml, so that the next `dvc repro` runs it. An ambiguous column is a question on stderr."""

    def split(v):
        return [c.strip() for c in v.split(",") if c.strip()] if v else None

    try:
        check_name(name, "dataset name", dots=False)
        if name in DATASETS:
            raise DriftError(f"{name!r} is a built-in dataset: choose another name for your table")
        if task == "multilabel" and len(split(label) or []) < 2:
            raise DriftError(
                "--task multilabel reads one 0/1 column per label: name them all, --label <col1,col2,...>"
            )
        proposal = propose(
            name,
            source,
            time=time,
            text=split(text),
            image=image,
            label=split(label),
            task=task,
            id_column=id_column,
            slices=slices,
            per_slice=per_slice,
        )
        section = proposal["section"]
        if proposal["slicing"] and not as_json:
            show_slicing(proposal["slicing"])
        write_dataset(
            params_path,
            name,
            proposal["input"],
            section,
            "text" if "text" in section else "image",
            force=force,
        )
    except Ambiguous as question:
        text = str(question)
        if text.endswith("--label <column>"):  # --label also takes a multilabel table's columns
            text += " (a multilabel table: every 0/1 label column, --label <col1,col2,...>)"
        Console(stderr=True, soft_wrap=True).print(f"[yellow]question:[/yellow] {esc(text)}", highlight=False)
        raise typer.Exit(2) from None
    except DriftError as e:
        fail(e)
    if as_json:
        print(json.dumps(proposal, indent=2, default=str))
        return
    columns = ", ".join(f"{c} ({t})" for c, t in proposal["columns"].items())
    console.print(
        f"[bold]{name}[/bold]: {proposal['files']} file(s), columns {esc(columns)}; time from "
        f"{esc(proposal['span'][0])} to {esc(proposal['span'][1])}",
        highlight=False,
        soft_wrap=True,
    )
    chosen = {
        k: section[k]
        for k in (
            "id",
            "time",
            "time_encoding",
            "time_format",
            "text",
            "image",
            "image_encoding",
            "label",
            "task",
            "classes",
            "slices",
        )
        if k in section
    }
    for key, value in chosen.items():
        console.print(f"  {key}: {esc(value)}", highlight=False, soft_wrap=True)
    if line := partial_slices_line(section, proposal["span"]):
        console.print(esc(line), highlight=False, soft_wrap=True)
    if proposal.get("invalid_utf8"):
        console.print(
            f"{proposal['invalid_utf8']} row(s) hold invalid UTF-8: ingest will quarantine them "
            f"(invalid_utf8) and keep the rest",
            highlight=False,
            soft_wrap=True,
        )
    notes = {
        "implausible_times": "have a time outside plausible_years: ingest will quarantine them "
        "(outside_plausible_years)",
        "outlying_rows": "lie in years far from the rest: the proposed slices leave them out",
    }
    for key, note in notes.items():
        if proposal.get(key):
            console.print(f"{proposal[key]} row(s) {note}", highlight=False, soft_wrap=True)
    console.print(
        f"wrote {name} to {esc(params_path)} (datasets.{name}, {name}:, train.models.{name}); change any "
        f"key there or re-run with --time/--text/--image/--label/--task",
        style="dim",
        soft_wrap=True,
    )
    console.print(f"next: dvc repro   then: drift summary {name}   and reports/{name}.html", highlight=False)


def partial_slices_line(section: dict, span: list[str]) -> str | None:
    """One line naming the first and the last slice when the data covers only part of them (a yearly slice
    that holds only December), with the span each holds; None when both are (nearly) whole."""
    from drift.core.params import SliceSpec
    from drift.protocol.slicing import partial_slices, slice_edges

    edges, labels = slice_edges(SliceSpec.model_validate(section["slices"]))
    low, high = (dt.datetime.fromisoformat(t) for t in span)
    start = dt.datetime(low.year, low.month, low.day)  # whole days: the note counts days
    if section.get("time_encoding") == "year":  # a year stands for the whole year
        end = dt.datetime(high.year + 1, 1, 1)
    else:  # a date or a time: through the end of its day
        end = dt.datetime(high.year, high.month, high.day) + dt.timedelta(days=1)
    parts = [
        f"the {p['which']} slice, {p['label']}, holds only {p['from']:%Y-%m-%d} to "
        f"{p['to'] - dt.timedelta(days=1):%Y-%m-%d} ({p['days']:.0f} of its {p['of_days']:.0f} days)"
        for p in partial_slices(edges, labels, start, end)
    ]
    return f"partial slices: {'; '.join(parts)}" if parts else None


def show_slicing(choice: dict) -> None:
    """The unit --per-slice chose, and what each unit would give, as rows per slice."""
    low, median, high = choice["rows"]
    console.print(
        f"--per-slice {choice['per_slice']}: unit {esc(choice['unit'])}, {choice['k']} slices "
        f"({esc(choice['slices']['start'])}-{esc(choice['slices']['end'])}), rows per slice min {low}, median "
        f"{median:g}, max {high}",
        highlight=False,
        soft_wrap=True,
    )
    for c in choice["candidates"]:
        console.print(
            f"  {esc(c['unit']):<9} {c['k']:>5} slices   rows per slice min {c['rows'][0]}, median "
            f"{c['rows'][1]:g}, max {c['rows'][2]}",
            style="dim",
            highlight=False,
            soft_wrap=True,
        )


COMMANDS = (init,)

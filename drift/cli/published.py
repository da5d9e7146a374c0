"""`drift published`: the authors' published runs (drift/report/published.py), and one of ours against them."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich import box
from rich.table import Table

from drift.cli.common import console, fail, fmt
from drift.core.errors import DriftError
from drift.protocol.summary import check_order
from drift.report.published import (
    compare,
    load_published,
    our_result,
    published_model,
    published_ranking,
    resolve_dataset,
)

LABELS = {"id": "ID", "future": "Future", "decay": "Decay"}


def ranking_table(rows: list[dict], digits: int) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column, justify in (("#", "right"), ("model", "left"), ("ours", "left"), ("family", "left"),
                            ("ID", "right"), ("Future", "right"), ("Decay", "right")):
        table.add_column(column, justify=justify, no_wrap=True)
    for r in rows:
        table.add_row(str(r["rank"]), r["display"], r["model"], r["published_family"],
                      *(fmt(r[s], digits) for s in LABELS))
    return table


def comparison_table(result: dict, digits: int) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in ("", "ours", "published", "ours - published"):
        table.add_column(column, justify="left" if not column else "right", no_wrap=True)
    for s, label in LABELS.items():
        table.add_row(label, fmt(result["ours"][s], digits), fmt(result["published"][s], digits),
                      fmt(result["delta"][s], digits, sign=True))
    return table


def published(dataset: str = typer.Argument(..., help="yearbook, amazon or arxiv (their names work too)"),
              model: Optional[str] = typer.Argument(None, help="one of our models with results in this workspace "
                                                    "(data/eval/ or plots/): compared with the published run"),
              by: str = typer.Option("decay", "--by", help="rank by decay (the paper's order), future or id"),
              as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
              root: Path = typer.Option(Path("."), "--root", help="the repository's root")):
    """The authors' published runs: every model's ID, Future and Decay, recomputed from the published drift
    matrices, ranked as the paper ranks them; with a model, our run beside theirs, cell by cell."""
    try:
        name = resolve_dataset(dataset)
        data = load_published(name)
        digits = data["printed_decimals"]
        unit = f" ({data['unit']})" if data["unit"] else ""
        direction = "higher is better" if data["higher_is_better"] else "lower is better"
        if model is None:
            rows = published_ranking(name, check_order(by))
            if as_json:
                print(json.dumps({"dataset": name, "metric": data["metric"], "unit": data["unit"],
                                  "higher_is_better": data["higher_is_better"], "ranked_by": by,
                                  "source": data["source"], "models": rows}, indent=2))
                return
            console.print(f"[bold]{data['title']}[/bold], published runs: {data['published_metric']}{unit}, "
                          f"{direction}; by {by}", highlight=False)
            console.print(ranking_table(rows, digits))
            repo = data["source"]["repository"].removeprefix("https://github.com/")
            console.print(f"{repo}@{data['source']['commit'][:7]}, {data['source']['license']}; scores recomputed here",
                          style="dim", highlight=False)
            return
        ours = published_model(data, model)["name"]  # theirs or the paper's name of it works too
        result = compare(our_result(root, name, ours), name, ours)
    except DriftError as e:
        fail(e)
    if as_json:
        print(json.dumps(result, indent=2))
        return
    console.print(f"[bold]{result['display']}[/bold] on {data['title']}: ours ({result['seeds']} seed(s), "
                  f"{result['source']}) against the published run ({result['published_seeds']} seeds), "
                  f"{data['published_metric']}{unit}, {direction}", highlight=False)
    console.print(comparison_table(result, digits))
    if result["largest"] is not None:
        w = result["largest"]
        console.print(f"{result['cells']} cells: mean |ours - published| {fmt(result['mean_abs_difference'], digits + 1)}, "
                      f"largest {fmt(w['difference'], digits + 1, sign=True)} at trained through {w['train']}, "
                      f"scored on {w['eval']} ({fmt(w['ours'], digits)} vs {fmt(w['published'], digits)})",
                      highlight=False)


COMMANDS = (published,)

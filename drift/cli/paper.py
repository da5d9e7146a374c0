"""`drift paper`: the authors' published results (drift/report/published.py), with the workspace's run beside
them."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich import box
from rich.console import JustifyMethod
from rich.table import Table

from drift.cli.common import console, esc, fail, fmt
from drift.core.dataset_registry import DATASETS as OURS
from drift.core.errors import DriftError, close_matches
from drift.core.params import load_params
from drift.report.published import DATASETS, compare_run, empty_cells_line, has_published

STATS = ("id", "future", "decay")


def published_table(result: dict, digits: int) -> Table:
    """The published ranking alone (Tables 5, 13, 21)."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("#", "right"),
        ("model", "left"),
        ("paper", "left"),
        ("family", "left"),
        ("ID", "right"),
        ("Future", "right"),
        ("Decay", "right"),
    )
    for column, justify in columns:
        table.add_column(column, justify=justify, no_wrap=True)
    for r in result["models"]:
        if r["published"] is not None:
            table.add_row(
                str(r["published"]["rank"]),
                esc(r["model"]),
                esc(r["paper_name"]),
                esc(r["published_family"]),
                *(fmt(r["published"][s], digits) for s in STATS),
            )
    return table


def comparison_table(result: dict, digits: int) -> Table:
    """Per model up to three rows: our ID / Future / Decay and rank, the paper's, and the difference with the
    mean |ours - paper| over the cells both fill; a model one side lacks has that side's row only."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("model", "left"),
        ("as printed", "left"),
        ("", "left"),
        ("ID", "right"),
        ("Future", "right"),
        ("Decay", "right"),
        ("rank", "right"),
        ("|ΔM|", "right"),
    )
    for column, justify in columns:
        table.add_column(column, justify=justify, no_wrap=True)
    for r in result["models"]:
        lines = []
        if r["ours"] is not None:
            lines.append(
                ["ours", *(fmt(r["ours"][s], digits) for s in STATS), str(r["ours"]["rank"] or "—"), ""]
            )
        if r["published"] is not None:
            lines.append(
                ["paper", *(fmt(r["published"][s], digits) for s in STATS), str(r["published"]["rank"]), ""]
            )
        if r["difference"] is not None:
            lines.append(
                [
                    "Δ",
                    *(fmt(r["difference"][s], digits, sign=True) for s in STATS),
                    "",
                    fmt(r["mean_abs_difference"], digits + 1),
                ]
            )
        for n, line in enumerate(lines):
            printed = esc(r["paper_name"]) if line[0] == "paper" else ""
            table.add_row(
                esc(r["model"]) if n == 0 else "",
                printed,
                *line,
                end_section=n == len(lines) - 1 and len(lines) > 1,
            )
    return table


def _names(models: list[str], most: int = 8) -> str:
    return ", ".join(models[:most]) + (f" (+{len(models) - most} more)" if len(models) > most else "")


def paper(
    dataset: str = typer.Argument(..., help="yearbook, amazon or arxiv (the authors' names work too)"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output: one object per model"),
    root: Path = typer.Option(Path("."), "--root", help="the repository's root"),
):
    """The paper's published results for a dataset (every model's ID, Future and Decay, ranked by Decay as in
    Tables 5, 13, 21), with this workspace's run beside them: the differences, the mean absolute difference
    over the cells both fill and the rank correlation of the two Decay rankings. Where the paper scores an
    empty test set 0.0 (Yearbook's 1924), ours is compared under the same rule, and a line says so."""
    if not has_published(dataset):
        params = root / "params.yaml"  # its datasets (a table of your own too) have no published run either
        try:
            ours = set(OURS) | (set(load_params(params).datasets) if params.exists() else set())
        except DriftError as e:
            fail(e)
        if dataset in ours:
            console.print(
                f"{esc(dataset)}: no published run (the paper's datasets: {', '.join(DATASETS)})",
                highlight=False,
                soft_wrap=True,
            )
            return
        fail(DriftError(f"unknown dataset {dataset!r}: {close_matches(dataset, ours)}"))
    try:
        result = compare_run(root, dataset)
    except DriftError as e:
        fail(e)
    if as_json:
        print(json.dumps(result, indent=2))
        return
    digits = result["printed_decimals"]
    unit = f" ({result['unit']})" if result["unit"] else ""
    direction = "higher is better" if result["higher_is_better"] else "lower is better"
    source = result["source"]
    credit = (
        f"published: {esc(source['repository'].removeprefix('https://github.com/'))}@{esc(source['commit'][:7])}, "
        f"{esc(source['license'])}; scores recomputed from the published matrices"
    )
    if not result["run"]:
        console.print(
            f"[bold]{esc(result['title'])}[/bold], the paper's runs: {esc(result['published_metric'])}{esc(unit)}, "
            f"{direction}; ranked by Decay",
            highlight=False,
        )
        console.print(published_table(result, digits))
        if line := empty_cells_line(result):
            console.print(esc(line), highlight=False)
        console.print(
            f"no run of {esc(result['dataset'])} in {esc(result['root'])} (data/eval/{esc(result['dataset'])}/, "
            f"plots/{esc(result['dataset'])}/): the published results alone",
            highlight=False,
        )
        console.print(credit, style="dim", highlight=False)
        return
    console.print(
        f"[bold]{esc(result['title'])}[/bold], our run against the paper's: {esc(result['published_metric'])}"
        f"{esc(unit)}, {direction}; Δ = ours − paper, rank by Decay",
        highlight=False,
    )
    console.print(comparison_table(result, digits))
    if line := empty_cells_line(result):
        console.print(esc(line), highlight=False)
    rho = result["spearman_decay"]
    console.print(
        f"{result['cells']} cells both fill: mean |ours − paper| {fmt(result['mean_abs_difference'], digits + 1)}; "
        f"Spearman ρ of the Decay rankings {fmt(rho['rho'], 2)} over {rho['models']} models",
        highlight=False,
    )
    for what, names in (
        ("only in the paper", result["only_published"]),
        ("only in our run", result["only_ours"]),
        ("slices only in the paper", result["slices"]["only_published"]),
        ("slices only in our run", result["slices"]["only_ours"]),
    ):
        if names:
            console.print(f"{what}: {esc(_names(names))}", highlight=False)
    console.print(credit, style="dim", highlight=False)


COMMANDS = (paper,)

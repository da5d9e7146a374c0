"""`drift rehearse`: a preset's whole pipeline on a small sample in a temporary workspace
(drift/run/rehearse.py)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich import box
from rich.table import Table

from drift.cli.common import console, esc, fail
from drift.core.errors import DriftError


def _rate(value, unit: str) -> str:
    return "—" if not value else f"{value:,.0f} {unit}" if value >= 10 else f"{value:.2g} {unit}"


def rehearsal_table(out: dict) -> Table:
    """One row per stage: passed or failed, seconds, and what it did and how fast (80 columns)."""
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in ("stage", "status", "s", "done", "throughput"):
        t.add_column(column, justify="right" if column == "s" else "left", overflow="fold")
    for s in out["stages"]:
        stage, _, name = s["stage"].partition("@")  # "check" is one stage for every dataset
        d = out["datasets"].get(name, {})
        done, rate = "", ""
        if s["status"] == "passed":
            if stage == "slice":
                done = f"{d.get('rows') or 0:,} rows"
            elif stage == "embed":
                done = f"{len(d.get('encoders', {}))} encoders"
                rate = "; ".join(
                    f"{enc} "
                    + (
                        _rate(e.get("tokens_per_s"), "tok/s")
                        if e.get("tokens_per_s")
                        else _rate(e.get("rows_per_s"), "img/s" if name == "yearbook" else "rows/s")
                    )
                    for enc, e in d.get("encoders", {}).items()
                )
            elif stage == "train":
                done = f"{d.get('trainings', 0)} trainings"
                rate = "; ".join(
                    f"{fam} {_rate(f['train_rows_per_s'], 'rows/s')}"
                    for fam, f in d.get("families", {}).items()
                    if f.get("train_rows_per_s")
                )
            elif stage == "evaluate":
                done = f"{d.get('cells', 0)} cells"
                rate = _rate(d.get("cells_per_s"), "cells/s")
        status = {"passed": "[green]passed[/green]", "failed": "[red]failed[/red]"}.get(
            s["status"], esc(s["status"])
        )
        t.add_row(esc(s["stage"]), status, f"{s['seconds']:.1f}", esc(done), esc(rate))
    return t


def rehearse(
    preset: str = typer.Argument(..., help="a preset in params/, e.g. paper-amazon"),
    data: Path | None = typer.Option(
        None,
        "--data",
        help="a sample in the corpus's format (its folder or file) instead of the one drift ships; it wins over "
        "the files params.yaml names",
    ),
    params: Path | None = typer.Option(
        None,
        "--params",
        help="the params.yaml the preset merges into (default: ./params.yaml, else the one drift ships)",
    ),
    set_: list[str] = typer.Option(
        None, "-S", "--set", help="key=value over the preset, as `dvc exp run -S` (repeatable)"
    ),
    full: bool = typer.Option(False, "--full", help="every cutoff, seed and epoch of the preset"),
    real_weights: bool = typer.Option(
        False,
        "--real-weights",
        help="the encoders' real weights (the Hugging Face cache or embed.weights), not stand-ins",
    ),
    keep: bool = typer.Option(False, "--keep", help="keep the workspace (to re-run a stage there)"),
    tiny: bool = typer.Option(
        False, "--tiny", help="the smallest rehearsal (the tests'): one-layer text stand-ins, a few rows"
    ),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
):
    """Rehearse a campaign before it runs: every stage and model of PRESET, run by `dvc repro` in a temporary
    git + DVC workspace made from the installed package, on a small sample in the corpus's real format
    (shipped with drift), with stand-in encoders of the preset's architectures and widths (random weights).
    Prints what it shrank, each stage's result and throughput; the rates go to the drift cache dir for `drift
    plan`. Exits 1 when a stage fails."""
    from drift.run.rehearse import (
        rehearse as run_rehearsal,  # lazy: torch, kept out of `drift --help`
    )

    try:
        out = run_rehearsal(
            preset,
            set_ or [],
            data,
            full=full,
            real_weights=real_weights,
            keep=keep,
            profile="tiny" if tiny else "default",
            params_path=params,
        )
    except DriftError as e:
        fail(e)
    if as_json:
        print(json.dumps(out, indent=2))
    else:
        console.print(
            f"[bold]rehearse[/bold] {esc(preset)} ({esc(out['profile'])} profile) on {esc(out['device'])}: "
            f"{'passed' if out['ok'] else 'FAILED'} in {out['seconds']:.0f} s",
            highlight=False,
        )
        for name, note in out["samples"].items():
            console.print(f"sample {esc(name)}: {esc(note)}", style="dim", highlight=False)
        if out["standins"]:
            console.print(
                "stand-ins (random weights): "
                + esc(
                    ", ".join(
                        f"{enc} {s['width']}-d" + (f" x{s['layers']} layers" if s.get("layers") else "")
                        for enc, s in out["standins"].items()
                    )
                ),
                style="dim",
                highlight=False,
            )
        console.print("shrunk: " + esc("; ".join(out["shrunk"]) or "nothing"), style="dim", highlight=False)
        console.print(rehearsal_table(out))
        for s in out["stages"]:
            if s["status"] == "failed":
                console.print(
                    f"[red]{esc(s['stage'])}[/red]: {esc(s['error'])}", highlight=False, soft_wrap=True
                )
                console.print(
                    f"re-run it alone: {esc(s['rerun'])}" + ("" if keep else " (with --keep)"),
                    highlight=False,
                    soft_wrap=True,
                )
        for name, d in out["datasets"].items():
            for family, engine in (d.get("engines") or {}).items():
                console.print(
                    f"{esc(name)} {esc(family)} ({esc(engine['model'])}): solo {engine['solo']:,.0f} vs batched "
                    f"{engine['batched']:,.0f} rows/s",
                    style="dim",
                    highlight=False,
                )
        if out.get("rates_file"):
            console.print(
                f"rates stored in {esc(out['rates_file'])} (drift plan {esc(preset)} reads them)",
                style="dim",
                highlight=False,
            )
    if not out["ok"]:
        raise typer.Exit(1)


COMMANDS = (rehearse,)

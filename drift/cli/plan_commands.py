"""`drift plan`: what a campaign costs before it runs (drift/run/plan.py counts, measures and projects)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from drift.cli.common import console, esc, fail
from drift.core.errors import DriftError


def _count(n) -> str:
    """A count in at most 7 characters: 12,345 or 3.46M."""
    if n is None:
        return "—"
    if n < 100_000:
        return f"{n:,}"
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n / 1e3:.3g}k"


def _hours(h) -> str:
    if h is None or h == 0:
        return "—" if h is None else "0"
    return f"{h:,.1f}" if h >= 10 else f"{h:.2f}" if h >= 0.01 else f"{h:.1e}"


def plan_tables(out: dict) -> list:
    """The Rich renderables of `drift plan`: counts per dataset, projected hours per device (with the paper's
    Table 1 where it has the dataset), and the measured rates; each fits 80 columns."""

    def table(*columns):
        t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for i, column in enumerate(columns):
            t.add_column(esc(column), justify="left" if i == 0 else "right")
        return t

    datasets = out["datasets"]
    counts = table("dataset", "runs", "paper", "trainings", "row passes", "enc passes", "cells")
    for name, d in datasets.items():
        paper = d.get("paper", {}).get("model_seed_runs")
        counts.add_row(
            esc(name),
            str(d["model_seed_runs"]),
            "—" if paper is None else str(paper),
            _count(d["trainings"]),
            _count(d["row_passes"]),
            _count(d["encoder_passes"]),
            _count(d["cells"]),
        )
    if len(datasets) > 1:
        counts.add_row(
            "total",
            str(out["model_seed_runs"]),
            "",
            _count(out["trainings"]),
            _count(out["row_passes"]),
            _count(out["encoder_passes"]),
            _count(out["cells"]),
            style="bold",
        )
    renderables = [counts]
    devices = list(out["projected_hours"])
    if devices:
        hours = table("hours", *devices, "paper A100")
        for name, d in datasets.items():
            paper = d.get("paper")
            for part, key, paper_key in (
                ("train", "projected_train_hours", "train_gpu_h"),
                ("eval", "projected_eval_hours", "eval_gpu_h"),
            ):
                hours.add_row(
                    f"{esc(name)} {part}",
                    *[_hours(d[key][dev]) for dev in devices],
                    _hours(paper[paper_key]) if paper else "—",
                )
            if d.get("projected_embed_hours"):  # rehearsed encoders: apart from the totals, as Table 1
                hours.add_row(
                    f"{esc(name)} embed",
                    *[_hours(d["projected_embed_hours"][dev]) for dev in devices],
                    "—",
                    style="dim",
                )
        hours.add_row(
            "total",
            *[_hours(out["projected_hours"][dev]) for dev in devices],
            _hours(sum(d["paper"]["train_gpu_h"] + d["paper"]["eval_gpu_h"] for d in datasets.values()))
            if all("paper" in d for d in datasets.values())
            else "—",
            style="bold",
        )
        renderables.append(hours)
        rates = table("measured", "input", "train rows/s", "eval rows/s", "h here", "from")
        for name, models in out["benchmark"]["rates"].items():
            measured: dict[str, list] = {}
            for model, r in models.items():
                measured.setdefault(r["measured_as"], []).append(model)
            for bench_model, members in measured.items():
                r = models[members[0]]
                here = sum(
                    datasets[name]["models"][m]["train_hours_here"]
                    + datasets[name]["models"][m]["eval_hours_here"]
                    for m in members
                )
                label = bench_model + (f" +{len(members) - 1}" if len(members) > 1 else "")
                rates.add_row(
                    esc(label),
                    esc(r["shape"]),
                    _count(round(r["train_rows_per_s"])),
                    _count(round(r["eval_rows_per_s"])),
                    _hours(here),
                    "rehearsal" if r.get("source", "").startswith("rehearsal") else "bench",
                )
        renderables.append(rates)
    return renderables


def embed_notes(out: dict) -> list[str]:
    """One line per dataset and encoder: the rows it has to embed, how they were counted, and the rate."""
    lines = []
    for name, d in out["datasets"].items():
        for encoder, e in (d.get("embed") or {}).items():
            r = e["rows_per_s"]
            rate = "no rate" if r is None else f"{r:,.1f} rows/s" if r < 100 else f"{r:,.0f} rows/s"
            lines.append(
                f"{name} embed with {encoder}: {e['rows_to_embed']:,} of {d['rows']:,} rows ({e['counted']}) "
                f"at {rate}, {e['rate']}"
            )
    return lines


def _parse_pairs(values: list[str], option: str, kind=float) -> dict:
    """NAME=VALUE options (--rows amazon=300000, --device-rate A100=40) as a mapping."""
    pairs = {}
    for value in values or []:
        name, sep, number = value.partition("=")
        try:
            pairs[name.strip()] = kind(number)
            if not sep or not name.strip() or pairs[name.strip()] <= 0:
                raise ValueError
        except ValueError:
            raise DriftError(
                f"{option} {value!r}: give NAME=NUMBER with a positive number, e.g. "
                f"{option} {'amazon=300000' if kind is int else 'A100=40'}"
            ) from None
    return pairs


def plan(
    preset: str | None = typer.Argument(
        None,
        help="a preset in params/ (e.g. paper-yearbook), merged "
        "in memory over params.yaml; params.yaml alone by default",
    ),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
    params: Path = typer.Option(Path("params.yaml"), help="the params file to plan"),
    rows: list[str] = typer.Option(
        None, "--rows", help="DATASET=N: rows of a dataset whose slice manifest is not there (repeatable)"
    ),
    device_rate: list[str] = typer.Option(
        None,
        "--device-rate",
        help="NAME=FACTOR: a device's speed relative to this machine, e.g. measured (repeatable)",
    ),
    bench: bool = typer.Option(
        True,
        "--bench/--no-bench",
        help="measure (or read cached) rates and project hours; --no-bench counts only",
    ),
    every_model: bool = typer.Option(
        False,
        "--every-model",
        help="measure every model, not one per family (its S size) standing for the others",
    ),
    rebench: bool = typer.Option(
        False,
        "--rebench",
        help="measure again, replacing the cached rates (say, measured while the machine was busy)",
    ),
):
    """What a campaign costs before it runs: model-seed runs (the paper's Table 1), trainings, training
    row-passes, encoder passes, evaluation cells, and the hours here and on a GPU from rates measured on this
    machine (cached in the drift cache dir, so the second plan is instant)."""
    try:
        # a status line on stderr while it loads, counts and measures (a terminal only: a pipe gets nothing)
        with Console(stderr=True).status("plan: loading torch") as status:
            from drift.run.plan import plan as make_plan  # lazy: torch, kept out of `drift --help`

            status.update("plan: counting")
            out = make_plan(
                preset,
                params,
                rows=_parse_pairs(rows, "--rows", int),
                device_rates=_parse_pairs(device_rate, "--device-rate"),
                bench=bench,
                every_model=every_model,
                refresh=rebench,
                on_step=lambda text: status.update(f"plan: {esc(text)}"),
            )
    except DriftError as e:
        fail(e)
    if as_json:
        print(json.dumps(out, indent=2))
        return
    title = f"preset {preset} over {params}" if preset else str(params)
    console.print(f"[bold]plan[/bold]: {esc(title)}", highlight=False, soft_wrap=True)
    for renderable in plan_tables(out):
        console.print(renderable)
    notes = [
        f"{name}: {d['slices']['trainable']} cutoffs x {d['slices']['usable']} usable slices, "
        f"{d['rows']:,} rows; {d['slices']['note']}"
        for name, d in out["datasets"].items()
    ]
    notes.append(
        "runs: model x seed (references left out, as Table 1); trainings: run x cutoff; row passes: "
        "training rows seen (cutoff k trains on slices <= k, x epochs); enc passes: rows x encoders, once "
        "each (the store); cells: checkpoints x usable slices. Hours: training and evaluation (no "
        "references), as Table 1 (A100 GPU-hours); embed rows: the encoders' time, apart from the totals."
    )
    notes += embed_notes(out)
    for device, d in out["devices"].items():
        notes.append(f"{device}: x{d['factor']:.3g}, {d['source']}")
    if out["benchmark"]:
        b = out["benchmark"]
        notes.append(
            f"rates: {b['threads']} threads, {'every model' if b['every_model'] else 'one model per family'}"
            f"; {b['measured_now']} measured now, the rest from {b['cache']}; {b['tokens_assumption']}"
        )
    sources = {
        r["source"]
        for models in (out["benchmark"] or {}).get("rates", {}).values()
        for r in models.values()
        if r.get("source", "").startswith("rehearsal")
    }
    notes += [f"rehearsed rates: {source}" for source in sorted(sources)]
    for note in notes:
        console.print(esc(note), style="dim", highlight=False, soft_wrap=False, overflow="fold")


COMMANDS = (plan,)

"""`drift show`, `drift compare`, `drift plots`, `drift saliency`: the report stage's outputs, drawn for
people.

`show` and `compare` read their data through drift.report.api (what the report stage commits to git: metrics/,
plots/), so they work on any checkout; `compare` and `plots` read other revisions and DVC experiments through
DVC itself.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import polars as pl
import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from drift.cli.common import check_dataset, console, esc, fail, fmt, plain
from drift.core.errors import DriftError, close_matches
from drift.core.paths import dataset_paths
from drift.report import api
from drift.report.results import STATS

LABELS = {"id": "ID", "future": "Future", "decay": "Decay"}


def _cell_colors(matrix: np.ndarray, higher_is_better: bool, diverging: bool):
    """value -> (background hex, foreground) with the PNGs' colour maps: viridis (reversed when lower is
    better) over the matrix's range, or a red-blue map symmetric around zero for deviations."""
    # lazy: matplotlib, kept out of `drift --help`
    import matplotlib
    from matplotlib.colors import to_hex

    finite = matrix[np.isfinite(matrix)]
    if diverging:
        bound = float(np.abs(finite).max()) if len(finite) and np.abs(finite).max() > 0 else 1.0
        lo, hi = -bound, bound
        cmap = matplotlib.colormaps["RdBu" if higher_is_better else "RdBu_r"]
    else:
        lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
        cmap = matplotlib.colormaps["viridis" if higher_is_better else "viridis_r"]

    def color(v):
        r, g, b, _ = cmap(0.5 if hi == lo else (v - lo) / (hi - lo))
        return to_hex((r, g, b)), "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"

    return color


def _cell_width(labels: list[str]) -> int:
    return max(6, max(len(label) for label in labels) + 1)


def heatmap_width(labels: list[str]) -> int:
    """Characters the heatmap needs with its values printed."""
    return max(len(label) for label in labels) + 1 + _cell_width(labels) * len(labels)


def terminal_heatmap(
    labels: list[str],
    matrix: np.ndarray,
    higher_is_better: bool,
    diverging: bool = False,
    with_numbers: bool = True,
) -> Table:
    """Rich table: trained-up-to on rows with the latest cutoff on top, evaluated-on on columns (time grows up
    and right), cells coloured by value, empty cells blank, the diagonal in bold. Without numbers the cells
    are plain colour blocks, for long timelines in a narrow terminal."""
    color = _cell_colors(matrix, higher_is_better, diverging)
    width = _cell_width(labels) if with_numbers else 2
    number = "{:+.2f}" if diverging else "{:.2f}"
    table = Table(
        box=None,
        padding=0,
        show_edge=False,
        pad_edge=False,
        caption=None if with_numbers else f"columns: {esc(labels[0])} … {esc(labels[-1])}, left to right",
    )
    table.add_column("", justify="right", no_wrap=True)
    table.add_column("", width=1)  # a space between the row labels and the cells (a sign would touch them)
    for label in labels:
        table.add_column(esc(label.center(width)) if with_numbers else "", no_wrap=True, width=width)
    for i in reversed(range(len(labels))):
        cells = []
        for j in range(len(labels)):
            v = matrix[i, j]
            if not np.isfinite(v):
                cells.append(Text(" " * width))  # an empty cell stays blank, never a colour
                continue
            bg, fg = color(v)
            text = number.format(v).center(width) if with_numbers else " " * width
            cells.append(Text(text, style=f"{'bold ' if i == j else ''}{fg} on {bg}"))
        table.add_row(plain(labels[i], style="bold"), "", *cells)
    return table


def class_table(classes: pl.DataFrame) -> Table:
    """Each class's ID, Future and Decay (api.classes), the class named as the data has it."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    table.add_column(f"class ({esc(classes['metric'][0])})", no_wrap=True)
    for s in STATS:
        table.add_column(LABELS[s], justify="right", no_wrap=True)
    for r in classes.iter_rows(named=True):
        table.add_row(plain(r["class"]), fmt(r["id"]), fmt(r["future"]), fmt(r["decay"]))
    return table


def show(
    dataset: str = typer.Argument(..., help="a dataset with a report (plots/<dataset>/)"),
    model: str = typer.Argument(..., help="a model of that dataset, or cohort-mean"),
    deviation: bool = typer.Option(False, "--deviation", help="its deviation from the cohort mean instead"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
    root: Path = typer.Option(Path("."), "--root", help="the repository's root"),
):
    """One drift matrix as a coloured terminal heatmap, with ID, Future and Decay under it, and each class's."""
    try:
        check_dataset(dataset, root, api.datasets(root))
        m = api.matrix(dataset, model, deviation, root)
        # the deviation has no per-class scores: no rows
        classes = pl.DataFrame(schema=api.CLASS_SCHEMA) if deviation else api.classes(dataset, model, root)
    except DriftError as e:
        fail(e)
    if as_json:
        out = {k: v for k, v in m.items() if k != "matrix"}
        out["matrix"] = [[None if not np.isfinite(v) else float(v) for v in row] for row in m["matrix"]]
        if len(classes):  # each class's ID, Future and Decay, named as the data has it
            out["classes"] = {
                "metric": classes["metric"][0],
                "higher_is_better": classes["higher_is_better"][0],
                "classes": classes.select("class", *STATS).to_dicts(),
            }
        print(json.dumps(out, indent=2))
        return
    direction = "higher is better" if m["higher_is_better"] else "lower is better"
    what = "deviation from the cohort mean (blue: better)" if deviation else m["metric"]
    console.print(
        f"[bold]{esc(dataset)} · {esc(model)}[/bold]: {esc(what)} ({direction}); rows: trained up to, "
        f"columns: evaluated on; latest cutoff on top",
        highlight=False,
        soft_wrap=True,
    )
    # a terminal gets colour blocks when the numbers do not fit; a pipe or file always gets the numbers
    need = heatmap_width(m["labels"])
    screen = console if console.is_terminal else Console(width=max(console.width, need))
    screen.print(
        terminal_heatmap(
            m["labels"],
            m["matrix"],
            m["higher_is_better"],
            deviation,
            with_numbers=not console.is_terminal or need <= console.width,
        )
    )
    parts = []
    for s in STATS:
        std, ci = m.get(f"{s}_std"), m.get(f"{s}_ci95")
        text = f"{LABELS[s]} {fmt(m.get(s), sign=deviation)}"
        if std is not None:
            text += f" ± {std:.3f}"
        if ci and None not in ci:
            text += f" [95% CI {ci[0]:.3f}, {ci[1]:.3f}]"
        parts.append(text)
    console.print("   ".join(parts), highlight=False, soft_wrap=True)
    if "seeds" in m:
        console.print(
            f"K = {m['k']} slices, {m['seeds']} seed(s); Decay > 0 means worse on later periods",
            style="dim",
            highlight=False,
            soft_wrap=True,
        )
    if len(classes):
        console.print(class_table(classes))


def compare(
    rev_a: str = typer.Argument(..., help="a git revision or DVC experiment, e.g. HEAD~1"),
    rev_b: str = typer.Argument("workspace", help="another (default: the workspace)"),
    dataset: str | None = typer.Option(None, "--dataset", "-d", help="only this dataset"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
    root: Path = typer.Option(Path("."), "--root", help="the repository's root"),
):
    """What changed in ID, Future and Decay per model between two revisions or experiments."""
    try:
        comparison = api.compare_records(rev_a, rev_b, root)
        params, rows = comparison["params"], comparison["datasets"]
        if dataset is not None:
            if dataset not in rows:  # a dataset of either revision is valid, declared in the workspace or not
                check_dataset(dataset, root, rows)
            rows = {dataset: rows[dataset]}
    except DriftError as e:
        fail(e)
    if as_json:
        print(json.dumps({"a": rev_a, "b": rev_b, "params": params, "datasets": rows}, indent=2))
        return
    console.print(f"[bold]{esc(rev_a)}[/bold] → [bold]{esc(rev_b)}[/bold]", highlight=False)
    for key, change in params.items():
        console.print(
            f"  param {esc(key)}: {esc(json.dumps(change['a']))} → {esc(json.dumps(change['b']))}",
            highlight=False,
        )
    for name, models in rows.items():
        first = models[0]
        direction = "higher is better" if first["higher_is_better"] else "lower is better"
        console.print(
            f"[bold]{esc(name)}[/bold]: {esc(first['metric'])} ({direction}); each cell: the value at "
            f"{esc(rev_b)} (its change from {esc(rev_a)}: green better, red worse)",
            highlight=False,
            soft_wrap=True,
        )
        table = Table(
            box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True
        )  # fits 80 columns
        table.add_column("model", no_wrap=True)
        table.add_column("status", no_wrap=True)
        for s in STATS:
            table.add_column(LABELS[s], justify="right", no_wrap=True)
        for r in models:
            cells = []
            for s in STATS:
                d = r[s]
                text = Text(fmt(d["b"] if d["b"] is not None else d["a"]))
                if d["change"] is not None:
                    style = {True: "green", False: "red", None: "dim"}[d["improved"]]
                    text.append(f" ({d['change']:+.3f})", style=style)
                cells.append(text)
            following = models[models.index(r) + 1] if r is not models[-1] else None
            table.add_row(
                esc(r["model"] + (" (ref)" if r["reference"] else "")),
                esc(r["status"]),
                *cells,
                style="dim italic" if r["reference"] else None,
                end_section=not r["reference"] and following is not None and following["reference"],
            )
        console.print(table)


def _dvc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=cwd, capture_output=True, text=True)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._~-]+", "_", name)


def render_plots(
    revs: list[str], out: Path, root: Path = Path("."), targets: list[str] | None = None, scale: float = 1.5
) -> list[dict]:
    """`dvc plots show --json` (no revisions) or `dvc plots diff REV... --json` rendered to PNG with
    vl-convert, so the plots and comparisons are visible without the Vega CDN. Vega plots become <out>/<plot
    path>.png (one picture with every revision); image plots are copied as <out>/<plot path>@<rev>.png.
    Returns [{"plot", "kind", "revisions", "file"}]."""
    import vl_convert  # lazy: vl_convert, only to render Vega-Lite plots

    with tempfile.TemporaryDirectory() as tmp:
        if revs:
            args = ["plots", "diff", *revs, "--json", "-o", tmp] + (
                ["--targets", *targets] if targets else []
            )
        else:
            args = ["plots", "show", *(targets or []), "--json", "-o", tmp]
        result = _dvc(*args, cwd=root)
        if result.returncode != 0:
            lines = [line for line in (result.stderr or result.stdout).splitlines() if line.strip()]
            raise DriftError(f"dvc {' '.join(args[:2])} failed: {lines[-1] if lines else result.returncode}")
        shown = json.loads(result.stdout)
        written = []
        for plot_id, entries in sorted((shown.get("data") or {}).items()):
            for entry in entries:
                revisions = entry.get("revisions") or []
                if entry["type"] == "vega":
                    target = out / Path(plot_id).with_suffix(".png")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(vl_convert.vegalite_to_png(entry["content"], scale=scale))
                elif entry["type"] == "image" and entry.get("url"):
                    path = Path(plot_id)
                    suffix = f"@{_safe(revisions[0])}" if revs and revisions else ""
                    target = out / path.with_name(path.stem + suffix + path.suffix)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(entry["url"], target)
                else:
                    continue
                written.append(
                    {"plot": plot_id, "kind": entry["type"], "revisions": revisions, "file": str(target)}
                )
        return written


def plots(
    revs: list[str] | None = typer.Argument(None, help="revisions or experiments (none: the workspace)"),
    out: Path = typer.Option(Path("plots_png"), "--out", "-o", help="where the PNGs go"),
    targets: list[str] | None = typer.Option(None, "--target", "-t", help="only these plot files or folders"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
    root: Path = typer.Option(Path("."), "--root", help="the repository's root"),
):
    """Render DVC's plots (and `dvc plots diff` comparisons) to PNG locally: no browser, no network."""
    try:
        written = render_plots(list(revs or []), out if out.is_absolute() else root / out, root, targets)
    except DriftError as e:
        fail(e)
    if as_json:
        print(json.dumps(written, indent=2))
        return
    console.print(f"{len(written)} PNG files in {esc(out)}:", highlight=False)
    for w in written:
        console.print(
            f"  {esc(w['file'])}  [dim]{esc(', '.join(w['revisions']))}[/dim]",
            highlight=False,
            soft_wrap=True,
        )


def _slice_indices(labels: list[str], names: list[str]) -> list[int]:
    """Slice labels ("1950") or indices ("3") -> indices; unknown ones are a one-line error."""
    out = []
    for name in names:
        if name in labels:
            out.append(labels.index(name))
        elif name.isdigit() and int(name) < len(labels):
            out.append(int(name))
        else:
            raise DriftError(f"unknown slice {name!r}: {close_matches(name, labels)}")
    return out


def _split(values: list[str] | None) -> list[str] | None:
    """Repeated options and comma-separated lists alike: --cutoffs 2000,2003 or --cutoffs 2000 --cutoffs 2003."""
    return None if not values else [v.strip() for value in values for v in value.split(",") if v.strip()]


def saliency(
    dataset: str = typer.Argument(..., help="an image dataset with trained models"),
    cutoffs: list[str] | None = typer.Option(
        None,
        "--cutoffs",
        "-c",
        help="training cutoffs (slice labels or indices, comma-separated); default 3 over the timeline",
    ),
    models: list[str] | None = typer.Option(
        None, "--models", "-m", help="image models (comma-separated); default every trained one"
    ),
    eval_slice: str | None = typer.Option(
        None, "--eval", help="evaluate every column on this slice; default the slice after each cutoff"
    ),
    n: int = typer.Option(64, "--n", help="portraits averaged per panel"),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="the PNG (default plots_png/<dataset>/saliency.png)"
    ),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
):
    """Mean gradient saliency maps of the image models (paper Figure 3) as a PNG grid: models × cutoffs."""
    from drift.report.saliency import write_saliency
    from drift.store.slices import read_slice_manifest

    try:
        trained = dataset_paths("any")["models"].parent  # data/models/<dataset>/: its checkpoints
        check_dataset(dataset, Path("."), [p.name for p in trained.glob("*") if p.is_dir()], "train")
        labels = read_slice_manifest(dataset_paths(dataset)["slices"]).labels()
        wanted = _split(cutoffs)
        cut = _slice_indices(labels, wanted) if wanted else None
        ev = _slice_indices(labels, [eval_slice])[0] if eval_slice is not None else None
        out = out or Path("plots_png") / dataset / "saliency.png"
        result = write_saliency(dataset, out, models=_split(models), cutoffs=cut, eval_slice=ev, n=n)
    except DriftError as e:
        fail(e)
    panels = [
        {"model": m, **{k: v for k, v in c.items() if k != "title"}, "drawn": (m, i) in result["maps"]}
        for m in result["models"]
        for i, c in enumerate(result["columns"])
    ]
    if as_json:
        print(json.dumps({"dataset": dataset, "file": str(out), "panels": panels}, indent=2))
        return
    console.print(
        f"wrote {esc(out)}: {len(result['models'])} model(s) × {len(result['columns'])} cutoff(s)",
        highlight=False,
    )
    for c in result["columns"]:
        console.print(
            f"  trained through {esc(c['cutoff_label'])}: {c['n']} portraits of {esc(c['eval_label'])}",
            style="dim",
            highlight=False,
        )


COMMANDS = (show, compare, plots, saliency)

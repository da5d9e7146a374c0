"""The `drift` command: the summaries people read (Rich tables on stdout, `--json` for scripts)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from drift.errors import DriftError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Measure how models decay over time: summaries of the DVC pipeline's drift matrices.")
console = Console()


def _register_subcommands():
    # show, compare, plots, saliency (drift/cli_report.py); imported here so the entry point drift.cli:app has them
    from drift.cache_cli import cache_app
    from drift.cli_report import register

    register(app)
    app.add_typer(cache_app, name="cache")


def _fail(error: DriftError):
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {error}", highlight=False)
    raise typer.Exit(2)


def _fmt(value, digits=3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _with_std(stats: dict, key: str) -> str:
    std = stats.get(f"{key}_std")
    return _fmt(stats.get(key)) + ("" if std is None else f" ± {std:.3f}")


def load_results(metrics_dir: Path, dataset: str | None = None) -> dict[str, dict[str, dict]]:
    """{dataset: {model: metrics}} from metrics/<dataset>/<model>.json (what `dvc metrics show` reads)."""
    from drift.datasets import DATASETS

    if dataset is not None and dataset not in DATASETS:
        from drift.errors import close_matches
        raise DriftError(f"unknown dataset {dataset!r}: {close_matches(dataset, DATASETS)}")
    results = {}
    for folder in sorted(p for p in metrics_dir.glob("*") if p.is_dir() and p.name in DATASETS):
        if dataset and folder.name != dataset:
            continue
        models = {f.stem: json.loads(f.read_text()) for f in sorted(folder.glob("*.json"))}
        if models:
            results[folder.name] = models
    if not results:
        where = f"{metrics_dir}/{dataset or '<dataset>'}/"
        raise DriftError(f"no results in {where}: run `dvc repro` first")
    return results


@app.command()
def summary(dataset: Optional[str] = typer.Argument(None, help="one dataset; all by default"),
            as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
            metrics_dir: Path = typer.Option(Path("metrics"), help="where the report stage wrote its metrics")):
    """Models ranked by Future performance, with ID, Future and Decay (paper Table 5)."""
    from drift.summary import ranking

    try:
        results = load_results(metrics_dir, dataset)
    except DriftError as e:
        _fail(e)
    out = {}
    for name, models in results.items():
        higher = next(iter(models.values()))["higher_is_better"]
        ranked = ranking({m: s for m, s in models.items()}, higher)
        out[name] = [{**models[r["model"]], "model": r["model"], "rank": r["rank"]} for r in ranked]
    if as_json:
        print(json.dumps(out, indent=2))
        return
    for name, rows in out.items():
        first = rows[0]
        direction = "higher is better" if first["higher_is_better"] else "lower is better"
        console.print(f"[bold]{name}[/bold]: {first['metric']} ({direction}), K = {first['k']}, "
                      f"seeds = {first['seeds']}, ranked by Future")
        table = Table()
        for column in ("rank", "model", "family", "ID", "Future", "Decay"):
            table.add_column(column, justify="right" if column in ("rank", "ID", "Future", "Decay") else "left")
        for row in rows:
            table.add_row(str(row["rank"] or "—"), row["model"], row.get("family", ""),
                          _with_std(row, "id"), _with_std(row, "future"), _with_std(row, "decay"))
        console.print(table)
    console.print("ID: mean of the diagonal (trained through, tested on held-out rows of the same period). "
                  "Future: mean over later periods. Decay: how much is lost going forward.", style="dim")


def dataset_specs(dataset: str, params_path: Path = Path("params.yaml")):
    """(spec of each input kind, n_outputs) for a dataset as params.yaml configures it."""
    from drift.config import dataset_cfg, load_params
    from drift.datasets import get_dataset
    from drift.encoders import get_encoder_spec
    from drift.models import InputSpec
    from drift.tasks import get_task

    params = load_params(params_path)
    module, cfg = get_dataset(dataset), dataset_cfg(params, dataset)
    n_outputs = get_task(module.TASK).n_outputs(len(module.label_names(cfg)))
    if module.MODALITY == "image":
        return {"pixels": InputSpec("pixels", (3, 32, 32))}, n_outputs, "image"
    dim = get_encoder_spec((params.get("embed") or {}).get("text_encoder", "minilm-l6")).dim
    return {"tokens": InputSpec("tokens", (dim,)), "pooled": InputSpec("pooled", (dim,))}, n_outputs, "text"


@app.command()
def models(dataset: Optional[str] = typer.Option(None, help="count parameters for this dataset's inputs and outputs"),
           as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """Every registered model: family, size, input, trainable and total parameters.

    Counted at the paper's reference setting (images 3x32x32 with 2 classes; text heads on 768-d token states
    with 1 output; probes at their encoder's width), or for DATASET's inputs and outputs. A probe's total
    includes its frozen encoder."""
    from drift.encoders.registry import ENCODER_PARAMS, ENCODERS
    from drift.models import InputSpec, count_params, create_model, list_models, reference_spec

    try:
        specs = dataset_specs(dataset) if dataset else None
    except DriftError as e:
        _fail(e)
    rows = []
    for info in list_models():
        encoder = ENCODERS.get(info.name.removeprefix("probe-")) if info.input == "pooled" else None
        if specs is None:
            spec, n_outputs = reference_spec(info.name)
        else:
            kinds, n_outputs, modality = specs
            if info.input == "pooled":
                if encoder.modality != modality:
                    continue
                spec = InputSpec("pooled", (encoder.dim,))
            elif info.input in kinds:
                spec = kinds[info.input]
            else:
                continue
        trainable, total = count_params(create_model(info.name, spec, n_outputs))
        if encoder is not None:
            total += ENCODER_PARAMS[encoder.name]
        rows.append({"name": info.name, "family": info.family, "size": info.size, "input": info.input,
                     "trainable_params": trainable, "total_params": total})
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    title = f"models for {dataset}" if dataset else "models (paper reference setting)"
    table = Table(title=title, title_justify="left")
    for column in ("name", "family", "size", "input", "trainable", "total"):
        table.add_column(column, justify="right" if column in ("trainable", "total") else "left")
    for r in rows:
        table.add_row(r["name"], r["family"], r["size"], r["input"], f"{r['trainable_params']:,}", f"{r['total_params']:,}")
    console.print(table)


@app.command()
def fetch(dataset: str = typer.Argument(..., help="yearbook, amazon or arxiv"),
          params: Path = typer.Option(Path("params.yaml"), help="where <dataset>.url and .source are set")):
    """Download a corpus from the URL in params (<dataset>.url), with resume and sha256 check."""
    from drift.config import dataset_cfg, load_params
    from drift.fetch import fetch_dataset

    try:
        for path in fetch_dataset(dataset, dataset_cfg(load_params(params), dataset)):
            console.print(f"fetched {path}")
    except DriftError as e:
        _fail(e)


@app.command()
def preset(name: str = typer.Argument(..., help="a file in params/, e.g. paper-yearbook"),
           params: Path = typer.Option(Path("params.yaml"), help="the params file to update")):
    """Apply a paper preset (params/<name>.yaml) to params.yaml; then `dvc exp run` or `dvc repro`."""
    from drift.config import apply_preset

    try:
        changed = apply_preset(name, params)
    except DriftError as e:
        _fail(e)
    console.print(f"applied {name}: {', '.join(changed) or 'nothing changed'}")
    console.print("next: `dvc exp run -n " + name + "` (or `dvc repro`)", style="dim")


_register_subcommands()


def main():
    app()

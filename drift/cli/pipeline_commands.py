"""`drift summary`, `drift models`, `drift fetch`, `drift track`, `drift preset`: the pipeline's inputs and
the summaries people read (Rich tables on stdout, `--json` for scripts)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from drift.cli.common import check_dataset, console, esc, fail, fmt
from drift.core.encoder_registry import ENCODERS, EncoderSpec, frozen_params, get_encoder_spec
from drift.core.errors import DriftError
from drift.core.params import load_params
from drift.core.paths import METRICS
from drift.core.presets import apply_preset
from drift.data.datasets import get_dataset
from drift.data.fetch import fetch_and_track, track_dataset
from drift.protocol.peers import check_protocol
from drift.protocol.summary import (
    BELOW_LINEAR_NOTE,
    REFERENCES,
    below_linear_message,
    below_prior_message,
    check_order,
    still_falling_message,
)
from drift.report import api
from drift.report.results import STAGE_FOLDERS


def _with_std(stats: dict, key: str) -> str:
    std = stats.get(f"{key}_std")
    return fmt(stats.get(key)) + ("" if std is None else f" ± {std:.3f}")


ORDER_TITLES = {
    "decay": "ranked by Decay (smallest first)",
    "future": "ranked by Future (best first)",
    "id": "ranked by ID (best first)",
}


def _margin(row: dict, key: str):
    if row["reference"]:
        return Text("")
    value = row.get(f"margin_{key}")
    if value is None:
        return Text("—")
    return Text(f"{value:+.3f}", style="green" if value > 0 else "yellow")


def _below_linear(row: dict) -> bool:
    """A ranked model whose ID is below baseline-linear's: its name carries the mark `*` (BELOW_LINEAR_NOTE)."""
    return not row["reference"] and row.get("margin_linear") is not None and row["margin_linear"] < 0


def summary_table(rows: list[dict], width: int) -> tuple[Table, bool]:
    """The Rich table of one dataset's summary rows that fits `width` columns without cutting any column:
    with the ± seed std and the "vs tfidf" and "vs linear" columns when they fit, dropping "vs linear" first,
    then the family, then "vs tfidf", then the std; a model below baseline-linear in distribution marked `*`.
    Returns (table, whether the std was left out for width)."""
    has = {
        key: any(f"margin_{key}" in r and r[f"margin_{key}"] is not None for r in rows)
        or any(r["model"] == f"baseline-{key}" for r in rows)
        for key in ("prior", "linear", "tfidf")
    }
    has_std = any(r.get(f"{s}_std") is not None for r in rows for s in ("id", "future", "decay"))
    # (std, vs tfidf, vs linear, family), richest first
    inner = [(True, True, True), (True, False, True), (True, False, False), (False, False, False)]
    layouts = [
        (std, tfidf and has["tfidf"], linear and has["linear"], family)
        for std in (True, False)
        for tfidf, linear, family in inner
        if has_std or not std
    ]
    layouts = list(dict.fromkeys(layouts))
    measure = Console(width=10_000)  # the table's natural width, not clamped to the terminal's
    for n, (std, tfidf, linear, family) in enumerate(layouts):
        last = n == len(layouts) - 1
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
        columns = ["rank", "model"] + (["family"] if family else []) + ["ID", "Future", "Decay"]
        columns += (["vs prior"] if has["prior"] else []) + (["vs linear"] if linear else [])
        columns += ["vs tfidf"] if tfidf else []
        for column in columns:  # the last resort may fold names, never drop them
            table.add_column(
                column,
                justify="left" if column in ("model", "family") else "right",
                no_wrap=not last or column not in ("model", "family"),
                overflow="fold",
                min_width=8 if last and column == "model" else None,
            )
        for i, row in enumerate(rows):
            ref = row["reference"]
            mark = " *" if _below_linear(row) else ""
            cells = ["ref" if ref else str(row["rank"] or "—"), esc(row["model"]) + mark]
            cells += [esc(row.get("family", ""))] if family else []
            cells += [_with_std(row, s) if std else fmt(row.get(s)) for s in ("id", "future", "decay")]
            cells += [_margin(row, "prior")] if has["prior"] else []
            cells += [_margin(row, "linear")] if linear else []
            cells += [_margin(row, "tfidf")] if tfidf else []
            next_ref = i + 1 < len(rows) and rows[i + 1]["reference"]
            table.add_row(*cells, style="dim italic" if ref else None, end_section=not ref and next_ref)
        if last or Measurement.get(measure, measure.options, table).maximum <= width:
            return table, has_std and not std
    raise AssertionError("unreachable: the last layout is returned whatever its width")


def summary(
    dataset: str | None = typer.Argument(None, help="one dataset; all by default"),
    by: str = typer.Option(
        "decay",
        "--by",
        help="rank by decay (smallest first, the paper's Tables 5, 13, 21), future or id (the better first)",
    ),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
    metrics_dir: Path = typer.Option(
        Path(METRICS),
        help="a workspace's metrics/ folder, where the report stage wrote its metrics (its plots/ and "
        "params.yaml are read beside it)",
    ),
    protocol: str = typer.Option(
        "ours",
        "--protocol",
        help="ours (ID / Future / Decay), wild-time "
        "(Eval-Fix, Eval-Stream) or clear (in-domain, next-domain, backward and "
        "forward transfer): each a summary of the same matrices",
    ),
):
    """Models ranked by Decay (or --by future / id), with ID, Future, Decay and the margin over the reference
    models (paper Table 5). References (baseline-*) are listed after the ranked models, without a rank.
    --protocol wild-time | clear: the peers' summaries of the same matrices instead."""
    try:
        check_order(by)
        check_protocol(protocol)
        if metrics_dir.name != METRICS:
            raise DriftError(
                f"--metrics-dir {metrics_dir} is not a workspace's {METRICS}/ folder: the summary reads the "
                f"plots/ and params.yaml beside it; give <workspace>/{METRICS}"
            )
        root = metrics_dir.parent  # the workspace: its params.yaml declares the datasets
        if dataset is not None:
            with_results = {p.parent.name for p in metrics_dir.glob("*/*.json")} - set(STAGE_FOLDERS)
            check_dataset(dataset, root, with_results)
        if protocol != "ours":
            results = api.metrics(dataset, root)
            peers = {name: peer_rows(name, models, protocol) for name, models in results.items()}
        else:
            shown = api.summary_records(dataset, by, root)
    except DriftError as e:
        fail(e)
    if protocol != "ours":
        print_peers(peers, protocol, as_json)
        return
    out, signals, curves = shown.rows, shown.label_free, shown.curves
    if as_json:
        print(json.dumps(out, indent=2))
        return
    for name, rows in out.items():
        first = rows[0]
        higher = first["higher_is_better"]
        direction = "higher is better" if higher else "lower is better"
        console.print(
            f"[bold]{esc(name)}[/bold]: {esc(first['metric'])} ({direction}), K = {first['k']}, "
            f"seeds = {first['seeds']}, {ORDER_TITLES[by]}",
            highlight=False,
            soft_wrap=True,
        )
        table, std_left_out = summary_table(rows, console.width)
        console.print(table)
        if std_left_out:
            console.print("(± seed std left out to fit the terminal: widen it, or use --json)", style="dim")
        if any(_below_linear(row) for row in rows):  # the mark's footnote, under its table
            console.print(f"* {esc(BELOW_LINEAR_NOTE)}", style="dim", highlight=False, soft_wrap=True)
        if signals[name]:
            console.print(label_free_table(rows))
        prior = next((r for r in rows if r["model"] == REFERENCES["prior"]), None)
        linear = next((r for r in rows if r["model"] == REFERENCES["linear"]), None)
        warnings = []
        for row in rows:
            if prior is not None and row.get("beats_prior") is False:
                warnings.append(
                    below_prior_message(name, row["model"], row["id"], prior["id"], first["metric"], higher)
                )
            if linear is not None and row.get("below_linear"):
                warnings.append(
                    below_linear_message(name, row["model"], row["id"], linear["id"], first["metric"], higher)
                )
            if row.get("still_falling"):
                warnings.append(still_falling_message(name, row["model"], curves[name][row["model"]]))
        for line in warnings:
            console.print(esc(line), style="yellow", highlight=False, soft_wrap=True)
    refs = any(r["reference"] for rows in out.values() for r in rows)
    console.print(
        "ID: mean of the diagonal (trained through, tested on held-out rows of the same period). "
        "Future: mean over later periods. Decay: how much is lost going forward."
        + (
            " vs prior / vs linear / vs tfidf: ID margin over the reference models baseline-prior / "
            "baseline-linear / baseline-tfidf (positive = better); references (ref) are not ranked."
            if refs
            else ""
        )
        + (
            " Without labels: how well the shift, the novel share and the estimated matrix ranked the "
            "true drop over future cells (Spearman ρ), and the estimate's error there (MAE)."
            if any(signals.values())
            else ""
        ),
        style="dim",
    )


PEER_COLUMNS = {
    "wild-time": {
        "eval_fix_average": "Eval-Fix avg",
        "eval_fix_worst": "Eval-Fix worst",
        "eval_stream_average": "Eval-Stream avg",
        "eval_stream_worst": "Eval-Stream worst",
    },
    "clear": {
        "in_domain": "in-domain",
        "next_domain": "next-domain",
        "backward_transfer": "backward",
        "forward_transfer": "forward",
    },
}
PEER_NOTES = {
    "wild-time": "Eval-Fix: trained through the split period, scored on every later one (average, worst). "
    "Eval-Stream: each period's model on the next period (average, worst).",
    "clear": "in-domain: the diagonal; next-domain: the next period (super-diagonal); backward: the periods "
    "before the training cutoff (below the diagonal); forward: those after it (above).",
}


def peer_rows(dataset: str, models: dict[str, dict], protocol: str) -> list[dict]:
    """One row per model of a peer protocol's summary, from metrics/<ds>/<model>.json's `protocols`."""
    rows = []
    for model, metrics in models.items():
        if protocol not in (metrics.get("protocols") or {}):
            raise DriftError(
                f"metrics/{dataset}/{model}.json has no {protocol} summary (written before it did): "
                f"run `dvc repro report@{dataset}`"
            )
        rows.append(
            {
                "model": model,
                "metric": metrics["metric"],
                "higher_is_better": metrics["higher_is_better"],
                "reference": metrics.get("reference", False),
                **metrics["protocols"][protocol],
            }
        )
    return sorted(rows, key=lambda r: (r["reference"], r["model"]))


def print_peers(peers: dict[str, list[dict]], protocol: str, as_json: bool) -> None:
    if as_json:
        print(json.dumps(peers, indent=2))
        return
    for name, rows in peers.items():
        first = rows[0]
        direction = "higher is better" if first["higher_is_better"] else "lower is better"
        label = first.get(
            "eval_fix_split_label"
        )  # the slice's label; older metrics: the scored period's index
        split = (
            (
                f", Eval-Fix trained through {esc(label)}"
                if label is not None
                else f", Eval-Fix trained through period {first['eval_fix_split']}"
            )
            if protocol == "wild-time"
            else ""
        )
        console.print(
            f"[bold]{esc(name)}[/bold]: {esc(first['metric'])} ({direction}), {protocol}{split}",
            highlight=False,
            soft_wrap=True,
        )
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
        table.add_column("model", no_wrap=True)
        for title in PEER_COLUMNS[protocol].values():
            table.add_column(title, justify="right", no_wrap=True)
        for row in rows:
            table.add_row(
                esc(row["model"]),
                *[fmt(row[k]) for k in PEER_COLUMNS[protocol]],
                style="dim italic" if row["reference"] else None,
            )
        console.print(table)
    console.print(PEER_NOTES[protocol], style="dim")


def label_free_table(rows: list[dict]) -> Table:
    """The summary's second table: per model, the label-free signals against its true decay."""
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
        title="without labels",
        title_justify="left",
        title_style="bold",
    )
    for column in ("model", "ρ shift", "ρ novel", "ρ estimate", "estimate MAE"):
        table.add_column(column, justify="left" if column == "model" else "right", no_wrap=True)
    for row in rows:
        signal = row.get("label_free")
        if signal is None:
            continue
        method = f" ({esc(signal['estimate_method'].upper())})" if signal.get("estimate_method") else ""
        table.add_row(
            esc(row["model"]),
            fmt(signal["rho_shift"], 2),
            fmt(signal["rho_novelty"], 2),
            fmt(signal["rho_estimate"], 2),
            fmt(signal["estimate_mae"]) + method,
            style="dim italic" if row["reference"] else None,
        )
    return table


def dataset_specs(dataset: str, params_path: Path = Path("params.yaml")):
    """(spec of each input kind, n_outputs) for a dataset as params.yaml configures it."""
    from drift.data.datasets import dataset_cfg
    from drift.models import InputSpec
    from drift.protocol.tasks import get_task

    params = load_params(params_path)
    info, cfg = params.info(dataset), dataset_cfg(params, dataset)
    n_outputs = get_task(info.task).n_outputs(len(get_dataset(dataset, cfg).label_names(cfg)))
    if info.modality == "image":
        return {"pixels": InputSpec("pixels", (3, 32, 32))}, n_outputs, "image"
    dim = get_encoder_spec(params.embed.text_encoder).dim
    return {"tokens": InputSpec("tokens", (dim,)), "pooled": InputSpec("pooled", (dim,))}, n_outputs, "text"


def encoder_row(spec: EncoderSpec) -> dict:
    """One encoder as `drift models --encoders` lists it: where it comes from (library, id, revision), its
    width."""
    return {
        "name": spec.name,
        "modality": spec.modality,
        "library": spec.library,
        "id": spec.hub_id,
        "revision": spec.revision or None,
        "dim": spec.dim,
        "pooling": spec.pooling,
        "declared": spec.declared,
        "params": frozen_params(spec),
    }


def encoders_table(rows: list[dict]) -> Table:
    table = Table(title="encoders (built-in, and declared in params.yaml `encoders:`)", title_justify="left")
    for column in ("name", "modality", "library", "id", "revision", "dim", "pooling", "params"):
        table.add_column(column, justify="right" if column in ("dim", "params") else "left")
    for r in rows:
        params = "-" if r["params"] is None else f"{r['params']:,}"
        cells = [esc(r[k] or "-") for k in ("name", "modality", "library", "id", "revision")]
        table.add_row(*cells, str(r["dim"]), esc(r["pooling"]), params)
    return table


def models(
    dataset: str | None = typer.Option(None, help="count parameters for this dataset's inputs and outputs"),
    encoders: bool = typer.Option(
        False, "--encoders", help="list the encoders instead: built-in and declared, their source and width"
    ),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
):
    """Every registered model: family, size, input, trainable and total parameters; then every encoder,
    built-in and declared in params.yaml (`encoders:`), with its library, id, revision and width.

    Counted at the paper's reference setting (images 3x32x32 with 2 classes; text heads on 768-d token states
    with 1 output; probes at their encoder's width), or for DATASET's inputs and outputs. A probe's total
    includes its frozen encoder."""
    try:
        specs = dataset_specs(dataset) if dataset else None
        if dataset is None and Path("params.yaml").exists():
            load_params()  # registers the encoders params.yaml declares, and their probes
    except DriftError as e:
        fail(e)
    encoder_rows = [encoder_row(spec) for spec in ENCODERS.values()]
    if encoders:
        if as_json:
            print(json.dumps(encoder_rows, indent=2))
        else:
            console.print(encoders_table(encoder_rows))
        return
    # lazy: torch, kept out of `drift --help`
    from drift.models import InputSpec, list_models, model_params, reference_spec

    rows: list[dict] = []
    for info in list_models():
        encoder = ENCODERS.get(info.name.removeprefix("probe-")) if info.input == "pooled" else None
        if specs is None:
            spec, n_outputs = reference_spec(info.name)
        else:
            kinds, n_outputs, modality = specs
            if info.input == "pooled":
                assert encoder is not None  # drift.models registers a probe-<name> per encoder
                if encoder.modality != modality:
                    continue
                spec = InputSpec("pooled", (encoder.dim,))
            elif info.input in kinds:
                spec = kinds[info.input]
            else:
                continue
        trainable, total = model_params(info.name, spec, n_outputs)  # on the meta device: a head of any size
        if encoder is not None:
            total += frozen_params(encoder) or 0
        rows.append(
            {
                "name": info.name,
                "family": info.family,
                "size": info.size,
                "input": info.input,
                "trainable_params": trainable,
                "total_params": total,
            }
        )
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    title = f"models for {dataset}" if dataset else "models (paper reference setting)"
    table = Table(title=esc(title), title_justify="left")
    for column in ("name", "family", "size", "input", "trainable", "total"):
        table.add_column(column, justify="right" if column in ("trainable", "total") else "left")
    for r in rows:
        table.add_row(
            *(esc(r[k]) for k in ("name", "family", "size", "input")),
            f"{r['trainable_params']:,}",
            f"{r['total_params']:,}",
        )
    console.print(table)
    console.print(encoders_table(encoder_rows))


def fetch(
    dataset: str = typer.Argument(..., help="yearbook, amazon or arxiv"),
    params: Path = typer.Option(
        Path("params.yaml"), help="where <dataset>.url and datasets.<dataset>.input are set"
    ),
    dvc: bool = typer.Option(
        True,
        "--dvc/--no-dvc",
        help="register each file with DVC (an import of its "
        "URL, <file>.dvc) so dvc push/pull carry it and dvc update notices new versions",
    ),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
):
    """Download a corpus from the URL in params (<dataset>.url), with resume and sha256 check, and register
    each file with DVC as an import of its URL (<file>.dvc; outside a DVC repository it is only downloaded).
    """
    from drift.data.datasets import dataset_cfg

    try:
        done = fetch_and_track(dataset, dataset_cfg(load_params(params), dataset), dvc=dvc)
    except DriftError as e:
        fail(e)
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "dataset": dataset,
                        "url": t.url,
                        "path": str(t.path),
                        "dvc_file": None if t.dvc_file is None else str(t.dvc_file),
                    }
                    for t in done
                ],
                indent=2,
            )
        )
        return
    for t in done:
        console.print(
            f"fetched {esc(t.path)}" + (f", tracked by {esc(t.dvc_file)}" if t.dvc_file else ""),
            highlight=False,
            soft_wrap=True,
        )
    if any(t.dvc_file for t in done):
        console.print(
            "next: commit the .dvc and .gitignore files with git; `dvc push` uploads the data", style="dim"
        )


def track(
    dataset: str = typer.Argument(..., help="yearbook, amazon or arxiv"),
    params: Path = typer.Option(Path("params.yaml"), help="where datasets.<dataset>.input is set"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
):
    """Track raw files you put in place yourself with DVC (`dvc add` on what the dataset reads: the arXiv
    snapshot, the Yearbook folder or .tar.gz, each Amazon category file), as `drift fetch` tracks downloads.
    """
    from drift.data.datasets import dataset_cfg

    try:
        done = track_dataset(dataset, dataset_cfg(load_params(params), dataset))
    except DriftError as e:
        fail(e)
    if as_json:
        print(
            json.dumps(
                [{"dataset": dataset, "path": str(t.path), "dvc_file": str(t.dvc_file)} for t in done],
                indent=2,
            )
        )
        return
    for t in done:
        console.print(f"tracked {esc(t.path)} by {esc(t.dvc_file)}", highlight=False, soft_wrap=True)
    console.print(
        "next: commit the .dvc and .gitignore files with git; `dvc push` uploads the data", style="dim"
    )


def preset(
    name: str = typer.Argument(..., help="a file in params/, e.g. paper-yearbook"),
    params: Path = typer.Option(Path("params.yaml"), help="the params file to update"),
    only: bool = typer.Option(
        False,
        "--only",
        help="run only the preset's datasets: drop your own (drift init) datasets and their sections too",
    ),
):
    """Apply a paper preset (params/<name>.yaml) to params.yaml; then `dvc exp run` or `dvc repro`. Your own
    datasets (added by `drift init`) stay beside the preset's unless --only."""
    from drift.data.datasets import check_datasets

    try:
        changed = apply_preset(
            name, params, check=lambda merged: check_datasets(load_params(merged)), only=only
        )
    except DriftError as e:
        fail(e)
    console.print(
        f"applied {esc(name)}: {esc(', '.join(changed) or 'nothing changed')}",
        highlight=False,
        soft_wrap=True,
    )
    console.print("next: `dvc exp run -n " + esc(name) + "` (or `dvc repro`)", style="dim")


def check(params: Path = typer.Option(Path("params.yaml"), help="the params file to check")):
    """Check params.yaml as the pipeline's first stage does (schema, every dataset section, slices, rosters),
    without DVC: an earlier form of a key fails here in one line, before `dvc repro` parses dvc.yaml."""
    from drift.run.checks import check_run

    try:
        check_run(load_params(params))
    except DriftError as e:
        fail(e)
    console.print(f"{esc(params)}: checked", highlight=False)


COMMANDS = (summary, models, fetch, track, preset, check)

"""`drift policy`: retraining policies replayed from the committed drift matrices (drift/analysis/policy.py),
no training."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich import box
from rich.console import JustifyMethod
from rich.table import Table

from drift.analysis.policy import dataset_policies, load_signal, report_labels
from drift.cli.common import check_dataset, console, esc, fail, fmt
from drift.core.errors import DriftError
from drift.core.params import PolicyParams, TrainParams, load_params
from drift.report.results import report_datasets


def _cost(value: float, unit: str) -> str:
    return f"{value:,.1f}" if unit == "seconds" else f"{value:,.0f}"


def policy_names(policies: list[dict]) -> list[str]:
    """Each policy's name as printed: a threshold (shift, drop) at 3 significant digits, "shift 0.0291" for
    "shift 0.029137"; the full names when rounding would print two policies alike."""
    short = [
        f"{p['policy']} {p['param']:.3g}" if isinstance(p["param"], float) else p["name"] for p in policies
    ]
    return short if len(set(short)) == len(short) else [p["name"] for p in policies]


def policy_table(result: dict) -> Table:
    """One row per model and policy, models in sections; ★ the best mean score, • the rest of the Pareto front
    (no policy scores better for no more cost). Fits 80 columns."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("model", "left"),
        ("policy", "left"),
        ("", "left"),
        ("mean", "right"),
        ("worst", "right"),
        ("retrains", "right"),
        (f"cost ({esc(result['cost_unit'])})", "right"),
    )
    for column, justify in columns:
        table.add_column(column, justify=justify, no_wrap=True)
    models = list(result["models"].items())
    for n, (model, r) in enumerate(models):
        names = policy_names(r["policies"])
        for i, p in enumerate(r["policies"]):
            mark = "★" if p["best"] else "•" if p["pareto"] else ""
            table.add_row(
                esc(model) if i == 0 else "",
                esc(names[i]),
                mark,
                fmt(p["mean"]),
                fmt(p["worst"]),
                str(p["retrainings"]),
                _cost(p["cost"], result["cost_unit"]),
                style="dim italic" if r["reference"] else None,
                end_section=i == len(r["policies"]) - 1 and n < len(models) - 1,
            )
    return table


def policy(
    dataset: str = typer.Argument(..., help="a dataset with a report (plots/<dataset>/)"),
    model: str | None = typer.Argument(None, help="one model; every model of the report by default"),
    shift: Path | None = typer.Option(
        None,
        "--shift",
        help="a label-free shift matrix S[i][j], long-format "
        "JSON {train, eval, value}: adds the shift policies",
    ),
    estimate: Path | None = typer.Option(
        None,
        "--estimate",
        help="the model's estimated matrix E[i][j], long-format JSON: adds the drop policies (needs a model)",
    ),
    seconds_per_row: float | None = typer.Option(
        None, "--seconds-per-row", help="turn the cost (rows x epochs) into seconds"
    ),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
    root: Path = typer.Option(Path("."), "--root", help="the repository's root"),
):
    """Retraining policies (never, every n, always, on shift, on an estimated drop) replayed from the drift
    matrix: mean and worst score over the deployment periods, retrainings and their cost. Nothing is trained.
    """
    try:
        params_path = root / "params.yaml"  # its report.policy and train.epochs; without one, the defaults
        params = load_params(params_path) if params_path.exists() else None
        policy_params = params.report.policy if params else PolicyParams()
        epochs = (params.train if params else TrainParams()).epochs
        if estimate is not None and model is None:
            raise DriftError(
                "--estimate is one model's estimated matrix: name the model too "
                "(drift policy <dataset> <model> --estimate FILE)"
            )
        check_dataset(dataset, root, report_datasets(root))
        labels = report_labels(root, dataset) if shift is not None or estimate is not None else []
        result = dataset_policies(
            dataset,
            policy_params,
            epochs,
            root,
            [model] if model else None,
            shift=load_signal(shift, labels) if shift is not None and labels else None,
            estimates={model: load_signal(estimate, labels)} if estimate is not None and labels else None,
            seconds_per_row=seconds_per_row,
        )
    except DriftError as e:
        fail(e)
    if as_json:
        print(json.dumps(result, indent=2))
        return
    direction = "higher is better" if result["higher_is_better"] else "lower is better"
    console.print(
        f"[bold]{esc(dataset)}[/bold]: retraining policies replayed from the drift matrix, "
        f"{esc(result['metric'])} ({direction}) over the deployment periods",
        highlight=False,
    )
    console.print(policy_table(result))
    console.print(
        "★ best mean score (ties: the cheaper)  • on the Pareto front of mean score against cost",
        style="dim",
        highlight=False,
    )
    skipped = dict.fromkeys(s for r in result["models"].values() for s in r["skipped"])
    for line in [*result["notes"], *(f"skipped {s}" for s in skipped)]:
        console.print(esc(line), style="dim", highlight=False)


COMMANDS = (policy,)

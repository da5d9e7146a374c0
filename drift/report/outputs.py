"""The report of one dataset: everything people read about its drift matrices (Section 4.5, Sections 5, C-E).

From the evaluate stage's per-seed matrices (data/eval/<ds>/<model>.json) it writes small files committed to
git (DVC outputs, cache: false): metrics/<ds>/<model>.json (ID, Future, Decay, seed spread, margins over the
references); plots/<ds>/<model>/ matrix.json, heatmap.png, deviation.png; the cohort mean (Figure 5),
forgetting curves (Figures 4, 11), family bars (Table 10) and the image models' saliency (Figure 3) under
plots/<ds>/; the long-format JSON of plots/deviations/ and plots/forgetting/; tables/<ds>.json and .md (Tables
5-10). Labels and names are data, never markup: the plots data holds `<`, `>`, `&` as look-alikes
(drift.report.plots.plot_text) and every cell of the .md is escaped (md_text); the HTML page escapes its own
(drift.report.html). The training curves (plots/losses/<ds>.json, plots/<ds>/<model>/losses.png) come from the
checkpoints (drift.report.training). Rankings are by Decay, smallest first, unless `by` says "future" or "id".
Reference models get their files but no rank and no part in the cohort, deviations or families; a model that
does not beat baseline-prior is named on stderr and under "below_prior" in the tables."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np

from drift.core.environment import environment
from drift.core.errors import DriftError
from drift.core.params import FITTED_REFERENCES, SaliencyGrid
from drift.core.paths import dataset_paths
from drift.core.stage import write_json
from drift.evaluate.estimate import estimate_error
from drift.evaluate.eval_result import EstimateMethod, EvalResult, read_eval
from drift.models.checkpoints import chosen_C, list_checkpoints
from drift.protocol.matrix import from_json
from drift.protocol.peers import clear, wild_time
from drift.protocol.summary import (
    DEFAULT_ORDER,
    REFERENCES,
    STATS,
    below_prior,
    below_prior_message,
    check_order,
    cohort_mean,
    cutoff_table,
    deviations,
    family_curves,
    family_table,
    forgetting_curve,
    id_future_decay,
    is_reference,
    mean_over_seeds,
    ranking,
    reference_margins,
    seed_spread,
)
from drift.report.labels import write_class_outputs, write_label_shares
from drift.report.metrics_file import ModelMetrics
from drift.report.plots import (
    curve_rows,
    family_bars,
    forgetting_plot,
    heatmap,
    long_format,
)
from drift.report.training import write_training_curves
from drift.store.embeddings import EmbeddingsManifest, weights_revisions
from drift.store.slices import SliceManifest

COHORT = "cohort-mean"  # the cohort mean's folder among the models' in plots/<ds>/


def load_eval(eval_dir: Path, models: list[str]) -> dict[str, EvalResult]:
    """model -> the evaluate stage's file, validated (its per-seed matrices and their mean as properties)."""
    return {model: read_eval(eval_dir, model) for model in models}


def model_metrics(result: EvalResult) -> dict:
    """The metrics/<ds>/<model>.json of one model (ModelMetrics' fields): ID, Future, Decay of the
    seed-averaged matrix and their spread, and whether it is a reference model (the margins over the
    references are added by write_report)."""
    higher = result.higher_is_better
    spread = seed_spread(result.per_seed, higher)
    return {
        **id_future_decay(result.matrix, higher),
        "metric": result.metric,
        "higher_is_better": higher,
        "k": len(result.labels),
        "seeds": len(result.per_seed),
        "family": result.family,
        "reference": is_reference(result.model, {"family": result.family}),
        **{f"{s}_std": spread[s]["std"] for s in STATS},
        **{f"{s}_ci95": [spread[s]["ci_low"], spread[s]["ci_high"]] for s in STATS},
        # the peers' summaries of the same seed-averaged matrix (drift.protocol.peers), and the task's other
        # metrics
        "protocols": {
            "wild-time": wild_time(result.matrix, higher, labels=result.labels),
            "clear": clear(result.matrix),
        },
        **(
            {
                "also": {
                    metric: id_future_decay(mean_over_seeds([from_json(m) for m in seeds.values()]), higher)
                    for metric, seeds in result.also.items()
                }
            }
            if result.also
            else {}
        ),
    }


def label_free_estimate(result: EvalResult) -> tuple[str, np.ndarray] | None:
    """(method, seed-averaged estimated matrix) of an evaluation: ATC where the task has it, else DoC."""
    estimated = result.estimated
    method: EstimateMethod | None = "atc" if "atc" in estimated else "doc" if "doc" in estimated else None
    if method is None or not estimated[method]:
        return None
    return method, mean_over_seeds([from_json(m) for m in estimated[method].values()])


def fmt(value) -> str:
    return "—" if value is None else f"{value:.3f}"


def _title(name: str, model: str, stats: dict) -> str:
    return (
        f"{name} · {model} · ID {fmt(stats['id'])} · Future {fmt(stats['future'])} · "
        f"Decay {fmt(stats['decay'])}"
    )


def write_report(
    name: str,
    results: dict[str, EvalResult],
    root: Path = Path("."),
    n_cutoffs: int = 4,
    by: str = DEFAULT_ORDER,
) -> dict:
    """Write every output of the module docstring except the saliency grid; returns the tables. Tables are
    ranked by `by` (decay, future or id). A model that does not beat baseline-prior in distribution is named
    on stderr, one line each."""
    check_order(by)
    if not results:
        raise DriftError(f"train.models.{name} lists no models: nothing to report")
    p = dataset_paths(name, root)
    for out in (p["metrics"], p["plots"], p["deviations"]):
        shutil.rmtree(out, ignore_errors=True)  # a model dropped from the roster leaves nothing behind
    first = next(iter(results.values()))
    labels, metric, higher = first.labels, first.metric, first.higher_is_better
    for model, r in results.items():
        if r.labels != labels or r.metric != metric:
            raise DriftError(
                f"{model}'s drift matrices are over other slices or another metric than "
                f"{next(iter(results))}'s: re-run `dvc repro evaluate@{name}`"
            )
    matrices = {m: r.matrix for m, r in results.items()}
    families = {m: r.family for m, r in results.items()}
    references = [m for m, r in results.items() if is_reference(m, {"family": r.family})]
    cohort_matrices = {m: M for m, M in matrices.items() if m not in references}  # the references are no part

    # per model: metrics (with the margins over the references), matrix, heatmap
    metrics = {model: model_metrics(r) for model, r in results.items()}
    margins = reference_margins(metrics, higher)
    env = environment(root)
    # the Hugging Face commit of each encoder's weights (none from a local folder)
    if p["embeddings"].exists():
        revisions = weights_revisions(EmbeddingsManifest.from_file(p["embeddings"], name))
        if revisions:
            env["weights_revisions"] = revisions
    for model, r in results.items():
        # what produced the numbers: the lock file's hash here, every version in tables/<ds>.json
        # "environment"
        metrics[model].update(margins.get(model, {}), lock_sha256=env["lock_sha256"])
        # the native CPU path's numbers say so; the portable path's files stay as they were
        if "cpu_path" in env:
            metrics[model]["cpu_path"] = env["cpu_path"]
        # the C each cutoff's fitted reference chose (train.reference_C: cv), seed by seed's first
        if model in FITTED_REFERENCES and (seeds := list_checkpoints(p["models"], model)):
            metrics[model]["chosen_C"] = [chosen_C(path) for _, path in sorted(seeds[min(seeds)].items())]
        estimated = label_free_estimate(r)
        if estimated is not None:  # the matrix estimated without the future's labels, beside M, and its error
            method, matrix = estimated
            metrics[model]["estimate"] = {"method": method, "mae_future": estimate_error(matrix, r.matrix)}
            write_json(p["plots"] / model / "estimate.json", long_format(matrix, labels))
            heatmap(
                matrix,
                labels,
                p["plots"] / model / "estimate.png",
                f"{name} · {model} · estimated without labels ({method.upper()})",
                metric,
                higher,
            )
        ModelMetrics.parse(metrics[model], f"{model}'s metrics", name).to_file(p["metrics"] / f"{model}.json")
        write_json(p["plots"] / model / "matrix.json", long_format(r.matrix, labels))
        heatmap(
            r.matrix,
            labels,
            p["plots"] / model / "heatmap.png",
            _title(name, model, metrics[model]),
            metric,
            higher,
        )

    # cohort mean and deviations (Section 4.5, Figures 5-10), over the models that are not references
    p["deviations"].mkdir(parents=True, exist_ok=True)
    cohort_stats, deviation_rows = {s: None for s in STATS}, []
    if cohort_matrices:
        cohort = cohort_mean(cohort_matrices)
        cohort_stats = id_future_decay(cohort, higher)
        write_json(p["plots"] / COHORT / "matrix.json", long_format(cohort, labels))
        heatmap(
            cohort,
            labels,
            p["plots"] / COHORT / "heatmap.png",
            _title(name, f"cohort mean of {len(cohort_matrices)} models", cohort_stats),
            metric,
            higher,
        )
    for model, delta in (deviations(cohort_matrices) if cohort_matrices else {}).items():
        write_json(p["deviations"] / f"{model}.json", long_format(delta, labels, higher_is_better=higher))
        heatmap(
            delta,
            labels,
            p["plots"] / model / "deviation.png",
            f"{name} · {model} − cohort mean (blue: better)",
            metric,
            higher,
            diverging=True,
        )
        deviation_rows.append({"model": model, **id_future_decay(delta, higher)})

    # forgetting curves (Figure 4 / 11): references as dashed lines, not in the family curves
    curves = {m: forgetting_curve(M) for m, M in matrices.items()}
    by_family = family_curves({m: c for m, c in curves.items() if m not in references}, families)
    write_json(p["forgetting"], curve_rows(curves))
    forgetting_plot(
        curves,
        by_family,
        p["plots"] / "forgetting.png",
        f"{name}: forgetting curves",
        metric,
        references=references,
    )

    # tables (Tables 5-10), ranked by `by`; references after the ranked models, in no family average
    ranked = [
        {
            **r,
            "family": families[r["model"]],
            **{f"{s}_std": metrics[r["model"]][f"{s}_std"] for s in STATS},
            **margins.get(r["model"], {}),
        }
        for r in ranking(metrics, higher, by)
    ]
    per_cutoff = [
        {**r, "family": families[r["model"]]}
        for r in cutoff_table(matrices, labels, higher, n_cutoffs, by, references)
    ]
    below = below_prior(metrics, higher)
    family_rows = family_table(ranked, higher, by=by)
    tables = {
        "dataset": name,
        "metric": metric,
        "higher_is_better": higher,
        "labels": labels,
        "ranked_by": by,
        "ranking": ranked,
        "references": references,
        "below_prior": below,
        "families": family_rows,
        "cutoffs": per_cutoff,
        "family_cutoffs": family_table(per_cutoff, higher, by=by),
        "cohort": cohort_stats,
        "protocols": {
            m: metrics[m]["protocols"] for m in metrics
        },  # the peers' summaries (drift.protocol.peers)
        "deviations": deviation_rows,
        "environment": env,
    }
    write_json(p["tables"], tables)
    p["tables_md"].write_text(tables_markdown(tables))
    if family_rows:
        family_bars(
            family_rows,
            p["plots"] / "families.png",
            f"{name}: family averages, ranked by {ORDER_LABELS[by]}",
            metric,
        )
    for model in below:  # below_prior names a model only when baseline-prior has metrics
        print(
            below_prior_message(
                name, model, metrics[model]["id"], metrics[REFERENCES["prior"]]["id"], metric, higher
            ),
            file=sys.stderr,
        )
    return tables


# -----------------------------------------------------------------------------
# the tables as markdown, for reading on a git host

ORDER_LABELS = {"decay": "Decay", "future": "Future", "id": "ID"}
# markdown column -> the key of the row it shows
_MD_KEYS = {"vs prior": "margin_prior", "vs linear": "margin_linear", "vs tfidf": "margin_tfidf"}


# a cell's text is data, never Markdown or HTML: the characters that would start markup, end the cell (`|`) or
# the row (a newline) are escaped; ordinary names, labels and numbers are unchanged
MD_TEXT = str.maketrans(
    {c: "\\" + c for c in "\\`*_[]|"} | {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": " ", "\n": " "}
)


def md_text(value) -> str:
    """`value` as the literal text of a Markdown table cell (MD_TEXT)."""
    return str(value).translate(MD_TEXT)


def _md(rows: list[dict], columns: list[str]) -> str:
    def cell(r, c):
        if c == "rank" and r.get("reference"):
            return "ref"
        v = r.get(_MD_KEYS.get(c, c))
        if c in _MD_KEYS:
            return "" if r.get("reference") else "—" if v is None else f"{v:+.3f}"
        return fmt(v) if isinstance(v, float) or v is None else md_text(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r, c) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def _order_note(by: str) -> str:
    return {
        "decay": "ranked by Decay, smallest first",
        "future": "ranked by Future, best first",
        "id": "ranked by ID, best first",
    }[by]


def tables_markdown(t: dict) -> str:
    direction = "higher is better" if t["higher_is_better"] else "lower is better"
    by = t.get("ranked_by", DEFAULT_ORDER)
    ranking_md = _md(
        t["ranking"],
        [
            "rank",
            "model",
            "family",
            "id",
            "future",
            "decay",
            "future_std",
            "decay_std",
            "vs prior",
            "vs linear",
            "vs tfidf",
        ],
    )
    prior = next((r for r in t["ranking"] if r["model"] == REFERENCES["prior"]), None)
    warnings = [
        below_prior_message(
            t["dataset"], r["model"], r["id"], prior["id"], t["metric"], t["higher_is_better"]
        )
        for r in t["ranking"]
        if prior is not None and r["model"] in t.get("below_prior", [])
    ]
    parts = [
        f"# {t['dataset']}: {t['metric']} ({direction})",
        "ID: the diagonal (trained through, tested on held-out rows of the same period). Future: the later "
        "periods. Decay: what is lost going forward (positive = worse). vs prior, vs linear, vs tfidf: the ID "
        "margin over the reference models baseline-prior, baseline-linear and baseline-tfidf (text; positive = "
        "better); references (rank ref) are "
        "not ranked and not in the families or the cohort mean.",
        f"## Models, {_order_note(by)} (Table 5)",
        ranking_md + ("\n\n" + "\n".join(f"- {w}" for w in warnings) if warnings else ""),
        "## Families (Table 10)",
        _md(t["families"], ["rank", "family", "n_models", "id", "future", "decay"]),
        f"## Per cutoff (Tables 6-9): the diagonal cell and the later cells of one row, {_order_note(by)}",
        _md(t["cutoffs"], ["cutoff_label", "rank", "model", "family", "id", "future", "decay"]),
        "## Families per cutoff",
        _md(t["family_cutoffs"], ["cutoff_label", "rank", "family", "id", "future", "decay"]),
        "## Mean deviation from the cohort mean (cells every model fills)",
        _md(t["deviations"], ["model", "id", "future", "decay"]),
    ]
    return "\n\n".join(parts) + "\n"


def write_dataset_report(
    name: str,
    models: list[str],
    root: Path = Path("."),
    saliency: bool = True,
    by: str = DEFAULT_ORDER,
    saliency_grid: SaliencyGrid | None = None,
) -> dict:
    """The report stage: read the eval JSON, write the report and the classes' outputs (drift.report.labels:
    label shares per slice, per-class scores, a confusion matrix), the training curves (drift.report.training:
    plots/losses/<ds>.json and a figure per model), and for an image dataset the saliency grid
    (`saliency_grid`: params.yaml report.saliency.<dataset>; None: every image model at a few cutoffs spread
    over the timeline)."""
    p = dataset_paths(name, root)
    results = load_eval(p["eval"], models)
    tables = write_report(name, results, root, by=by)
    # the classes by name: the label shares per slice, each model's per-class scores (drift.report.labels)
    write_label_shares(name, root)
    write_class_outputs(name, results, root)
    # how far each training got: the checkpoints' loss per epoch (drift.report.training)
    write_training_curves(name, models, root)
    manifest = p["slice_manifest"]
    image = manifest.exists() and SliceManifest.from_file(manifest, name).modality == "image"
    if saliency and image:  # torch is imported only here: text reports stay quick
        # lazy: torch, only for an image dataset's saliency
        from drift.models import get_model_info
        from drift.report.saliency import write_saliency

        pixels = [
            m for m in models if get_model_info(m).input == "pixels"
        ]  # probes on frozen encoders have no pixels
        grid = saliency_grid or SaliencyGrid()
        chosen = [m for m in grid.models or pixels if m in pixels]
        for m in sorted(set(grid.models or []) - set(pixels)):
            print(
                f"warning: saliency grid skips {m}: not an image model of train.models.{name}",
                file=sys.stderr,
            )
        if chosen:
            write_saliency(
                name, p["plots"] / "saliency.png", models=chosen, cells=grid.cells, n=grid.n, root=root
            )
    return tables

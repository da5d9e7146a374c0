"""The report of one dataset: everything people read about its drift matrices (Section 4.5, Sections 5, C-E).

From the evaluate stage's per-seed matrices (data/eval/<ds>/<model>.json) it writes, all small and committed
to git (DVC outputs with cache: false), so every checkout and `dvc plots diff` can read them:

  metrics/<ds>/<model>.json          ID, Future, Decay, metric, direction, K, seeds, family, spread over seeds
  plots/<ds>/<model>/matrix.json     the seed-averaged matrix in long format (heatmap template)
  plots/<ds>/<model>/heatmap.png     the same in the paper's orientation
  plots/<ds>/<model>/deviation.png   its deviation from the cohort mean, zero-centred diverging scale
  plots/<ds>/cohort-mean/            the cohort-mean matrix (matrix.json + heatmap.png), Figure 5
  plots/<ds>/forgetting.png          forgetting curves per model and per family, Figure 4 / 11
  plots/<ds>/families.png            family averages as bars, Table 10
  plots/<ds>/saliency.png            gradient saliency grid of the image models, Figure 3 (image datasets)
  plots/deviations/<ds>/<model>.json the deviation in long format (diverging heatmap template)
  plots/forgetting/<ds>.json         forgetting curves as rows {gap, value, model} (line template)
  tables/<ds>.json, tables/<ds>.md   ranking (Table 5), per-cutoff rows (Tables 6-9), families (Table 10),
                                     per-model mean deviation from the cohort
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from drift.config import write_json
from drift.errors import DriftError
from drift.evaluate import from_json
from drift.plots import curve_rows, family_bars, forgetting_plot, heatmap, long_format
from drift.summary import (STATS, cohort_mean, cutoff_table, deviations, family_curves, family_table,
                           forgetting_curve, id_future_decay, mean_over_seeds, ranking, seed_spread)

COHORT = "cohort-mean"  # the cohort mean's folder among the models' in plots/<ds>/


def report_paths(name: str, root: Path = Path(".")) -> dict[str, Path]:
    return {
        "eval": root / "data" / "eval" / name,
        "metrics": root / "metrics" / name,
        "plots": root / "plots" / name,
        "deviations": root / "plots" / "deviations" / name,
        "forgetting": root / "plots" / "forgetting" / f"{name}.json",
        "tables": root / "tables" / f"{name}.json",
        "tables_md": root / "tables" / f"{name}.md",
    }


def load_eval(eval_dir: Path, models: list[str]) -> dict[str, dict]:
    """model -> the evaluate stage's JSON, plus "per_seed" (matrices) and "matrix" (their cell-wise mean)."""
    results = {}
    for model in models:
        path = eval_dir / f"{model}.json"
        if not path.exists():
            raise DriftError(f"no drift matrices at {path}: run `dvc repro evaluate@{eval_dir.name}` first")
        result = json.loads(path.read_text())
        result["per_seed"] = [from_json(m) for m in result["seeds"].values()]
        if not result["per_seed"]:
            raise DriftError(f"{path} holds no seed: re-run `dvc repro evaluate@{eval_dir.name}`")
        result["matrix"] = mean_over_seeds(result["per_seed"])
        results[model] = result
    return results


def model_metrics(result: dict) -> dict:
    """The metrics/<ds>/<model>.json of one model: ID, Future, Decay of the seed-averaged matrix and their spread."""
    higher = result["higher_is_better"]
    spread = seed_spread(result["per_seed"], higher)
    return {
        **id_future_decay(result["matrix"], higher), "metric": result["metric"], "higher_is_better": higher,
        "k": len(result["labels"]), "seeds": len(result["per_seed"]), "family": result["family"],
        **{f"{s}_std": spread[s]["std"] for s in STATS},
        **{f"{s}_ci95": [spread[s]["ci_low"], spread[s]["ci_high"]] for s in STATS},
    }


def fmt(value) -> str:
    return "—" if value is None else f"{value:.3f}"


def _title(name: str, model: str, stats: dict) -> str:
    return (f"{name} · {model} · ID {fmt(stats['id'])} · Future {fmt(stats['future'])} · "
            f"Decay {fmt(stats['decay'])}")


def write_report(name: str, results: dict[str, dict], root: Path = Path("."), n_cutoffs: int = 4) -> dict:
    """Write every output of the module docstring except the saliency grid; returns the tables."""
    if not results:
        raise DriftError(f"train.models.{name} lists no models: nothing to report")
    p = report_paths(name, root)
    for out in (p["metrics"], p["plots"], p["deviations"]):
        shutil.rmtree(out, ignore_errors=True)  # a model dropped from the roster leaves nothing behind
    first = next(iter(results.values()))
    labels, metric, higher = first["labels"], first["metric"], first["higher_is_better"]
    for model, r in results.items():
        if r["labels"] != labels or r["metric"] != metric:
            raise DriftError(f"{model}'s drift matrices are over other slices or another metric than "
                             f"{next(iter(results))}'s: re-run `dvc repro evaluate@{name}`")
    matrices = {m: r["matrix"] for m, r in results.items()}
    families = {m: r["family"] for m, r in results.items()}

    # per model: metrics, matrix, heatmap
    metrics = {}
    for model, r in results.items():
        metrics[model] = model_metrics(r)
        write_json(p["metrics"] / f"{model}.json", metrics[model])
        write_json(p["plots"] / model / "matrix.json", long_format(r["matrix"], labels))
        heatmap(r["matrix"], labels, p["plots"] / model / "heatmap.png", _title(name, model, metrics[model]),
                metric, higher)

    # cohort mean and deviations (Section 4.5, Figures 5-10)
    cohort = cohort_mean(matrices)
    cohort_stats = id_future_decay(cohort, higher)
    write_json(p["plots"] / COHORT / "matrix.json", long_format(cohort, labels))
    heatmap(cohort, labels, p["plots"] / COHORT / "heatmap.png",
            _title(name, f"cohort mean of {len(matrices)} models", cohort_stats), metric, higher)
    deviation_rows = []
    for model, delta in deviations(matrices).items():
        write_json(p["deviations"] / f"{model}.json", long_format(delta, labels, higher_is_better=higher))
        heatmap(delta, labels, p["plots"] / model / "deviation.png",
                f"{name} · {model} − cohort mean (blue: better)", metric, higher, diverging=True)
        deviation_rows.append({"model": model, **id_future_decay(delta, higher)})

    # forgetting curves (Figure 4 / 11)
    curves = {m: forgetting_curve(M) for m, M in matrices.items()}
    by_family = family_curves(curves, families)
    write_json(p["forgetting"], curve_rows(curves))
    forgetting_plot(curves, by_family, p["plots"] / "forgetting.png", f"{name}: forgetting curves", metric)

    # tables (Tables 5-10)
    ranked = [{**r, "family": families[r["model"]],
               **{f"{s}_std": metrics[r["model"]][f"{s}_std"] for s in STATS}}
              for r in ranking(metrics, higher)]
    per_cutoff = [{**r, "family": families[r["model"]]}
                  for r in cutoff_table(matrices, labels, higher, n_cutoffs)]
    tables = {
        "dataset": name, "metric": metric, "higher_is_better": higher, "labels": labels,
        "ranking": ranked,
        "families": family_table(ranked, higher),
        "cutoffs": per_cutoff,
        "family_cutoffs": family_table(per_cutoff, higher),
        "cohort": cohort_stats,
        "deviations": deviation_rows,
    }
    write_json(p["tables"], tables)
    p["tables_md"].write_text(tables_markdown(tables))
    family_bars(tables["families"], p["plots"] / "families.png",
                f"{name}: family averages, ranked by Future", metric)
    return tables


# -----------------------------------------------------------------------------
# the tables as markdown, for reading on a git host

def _md(rows: list[dict], columns: list[str]) -> str:
    def cell(v):
        return fmt(v) if isinstance(v, float) or v is None else str(v)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def tables_markdown(t: dict) -> str:
    direction = "higher is better" if t["higher_is_better"] else "lower is better"
    parts = [
        f"# {t['dataset']}: {t['metric']} ({direction})",
        "ID: the diagonal (trained through, tested on held-out rows of the same period). Future: the later "
        "periods. Decay: what is lost going forward (positive = worse).",
        "## Models, ranked by Future (Table 5)",
        _md(t["ranking"], ["rank", "model", "family", "id", "future", "decay", "future_std"]),
        "## Families (Table 10)", _md(t["families"], ["rank", "family", "n_models", "id", "future", "decay"]),
        "## Per cutoff (Tables 6-9): the diagonal cell and the later cells of one row",
        _md(t["cutoffs"], ["cutoff_label", "rank", "model", "family", "id", "future", "decay"]),
        "## Families per cutoff", _md(t["family_cutoffs"], ["cutoff_label", "rank", "family", "id", "future", "decay"]),
        "## Mean deviation from the cohort mean (cells every model fills)",
        _md(t["deviations"], ["model", "id", "future", "decay"]),
    ]
    return "\n\n".join(parts) + "\n"


def write_dataset_report(name: str, models: list[str], root: Path = Path("."), saliency: bool = True) -> dict:
    """The report stage: read the eval JSON, write the report, and for an image dataset the saliency grid."""
    p = report_paths(name, root)
    tables = write_report(name, load_eval(p["eval"], models), root)
    manifest = root / "data" / "slices" / f"{name}.json"
    image = manifest.exists() and json.loads(manifest.read_text()).get("modality") == "image"
    if saliency and image:  # torch is imported only here: text reports stay quick
        from drift.saliency import write_saliency
        from drift.train import model_info

        pixels = [m for m in models if model_info(m).input == "pixels"]  # probes on frozen encoders have no pixels
        if pixels:
            write_saliency(name, p["plots"] / "saliency.png", models=pixels, root=root)
    return tables

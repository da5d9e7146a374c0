"""Stage report@<dataset>: metrics/<dataset>/<model>.json, and plots/<dataset>/<model>/ (matrix + heatmap)."""
import json
import shutil

from drift.config import load_params, paths, run_stage, write_json
from drift.evaluate import from_json
from drift.plots import heatmap, long_format
from drift.summary import id_future_decay, mean_over_seeds, seed_spread


def main(argv):
    name = argv[0]
    params = load_params()
    p = paths(name)
    for out in (p["metrics"], p["plots"]):
        shutil.rmtree(out, ignore_errors=True)
    for model_name in params["train"]["models"][name]:
        result = json.loads((p["eval"] / f"{model_name}.json").read_text())
        per_seed = [from_json(m) for m in result["seeds"].values()]
        matrix = mean_over_seeds(per_seed)
        higher = result["higher_is_better"]
        stats = id_future_decay(matrix, higher)
        spread = seed_spread(per_seed, higher)
        write_json(p["metrics"] / f"{model_name}.json", {
            **stats, "metric": result["metric"], "higher_is_better": higher, "k": len(result["labels"]),
            "seeds": len(per_seed), "family": result["family"],
            **{f"{s}_std": spread[s]["std"] for s in ("id", "future", "decay")},
            **{f"{s}_ci95": [spread[s]["ci_low"], spread[s]["ci_high"]] for s in ("id", "future", "decay")},
        })
        write_json(p["plots"] / model_name / "matrix.json", long_format(matrix, result["labels"]))
        heatmap(matrix, result["labels"], p["plots"] / model_name / "heatmap.png",
                f"{name} · {model_name} · ID {fmt(stats['id'])} · Future {fmt(stats['future'])} · Decay {fmt(stats['decay'])}",
                result["metric"], higher)


def fmt(value):
    return "—" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    run_stage(main)

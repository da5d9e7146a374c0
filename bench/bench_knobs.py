"""The effect of each authors'-way knob (the settings the paper presets switch to follow the authors' code) on
ID / Future / Decay, each measured against the same base run in the same process, with the protocol's own
code: the stage scripts' main() (ingest, slice, embed, train, evaluate), in a temp dir with a params.yaml, no
DVC.

Image knobs, on synth-portraits (its reader, drift/data/datasets/synth_portraits.py): mlp-s and cnn-s over
every cutoff, 3 seeds, and the references (baseline-prior, baseline-linear); one knob changed per row:
train.pixel_scale raw, train.standardise_pixels false, train.batch_order uniform (then with
train.shuffle_draws after-init), train.loss_weights split, train.slice_seed hash, split.draw per-slice,
synth-portraits.pixels float32. Yearbook's reader knobs (yearbook.resize, yearbook.pixels): no Yearbook pixels
here, so the same synth portraits are drawn at the corpus's size (bicubically upsampled to 186 x 171 PNGs,
gray, in F/ and M/ with `<year>_` names) and read by drift/data/datasets/yearbook.py: bilinear against area,
and area uint8 against area float32. Amazon's data knobs (amazon.keep_empty, keep_duplicates, sample.draw), on
the Amazon 2023 fixture (tests/fixtures/amazon2023, 16 categories, 2,400 reviews; half-years 2014-2024,
text_fields [text] as the paper preset, so an empty review has no text; rows read -> kept by ingest -> in the
slice table): the rows each keeps, and baseline-tfidf and baseline-prior fitted per cutoff
(drift.train.loop.train_one, the closed-form references; no text encoder weights are offline, so no text head
trains here), over amazon.sample.seed 0..seeds-1. Figures: docs/decisions.md.

    python bench/bench_knobs.py                 # every part (~10-15 min CPU on 2 shared cores)
    python bench/bench_knobs.py --part image --epochs 2 --per-slice 100
    python bench/bench_knobs.py --part yearbook --set train.standardise_pixels=false --set train.pixel_scale=raw
    python bench/bench_knobs.py --part image --knob shuffle_draws   # the rows whose label holds the text
    python bench/bench_knobs.py --quick         # one knob per part, 1 seed, tiny: a minute
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import os
import runpy
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drift.core.environment import pin_cpu_code_path  # noqa: E402

pin_cpu_code_path()  # the stages' CPU path (compute.cpu_path portable) for whatever this run computes
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SHIPPED = ROOT / "params.yaml"  # the checkout's params.yaml
AMAZON = ROOT / "tests" / "fixtures" / "amazon2023"
STAGES = ("ingest", "slice", "embed", "train", "evaluate")

# one knob per row: (label, {dotted key: value}); the base is the embedded default
IMAGE_KNOBS: list[tuple[str, dict]] = [
    ("train.pixel_scale: raw", {"train.pixel_scale": "raw"}),
    ("train.standardise_pixels: false", {"train.standardise_pixels": False}),
    ("both (the paper presets' pair)", {"train.pixel_scale": "raw", "train.standardise_pixels": False}),
    ("train.batch_order: uniform", {"train.batch_order": "uniform"}),
    (
        "... and train.shuffle_draws: after-init",
        {"train.batch_order": "uniform", "train.shuffle_draws": "after-init"},
    ),
    ("train.loss_weights: split", {"train.loss_weights": "split"}),
    ("train.slice_seed: hash", {"train.slice_seed": "hash"}),
    ("split.draw: per-slice", {"split.draw": "per-slice"}),
    ("synth-portraits.pixels: float32", {"synth-portraits.pixels": "float32"}),
]
YEARBOOK_KNOBS: list[tuple[str, dict]] = [
    ("yearbook.resize: area", {"yearbook.resize": "area"}),
    ("yearbook.pixels: float32 (area)", {"yearbook.resize": "area", "yearbook.pixels": "float32"}),
]
AMAZON_KNOBS: list[tuple[str, dict]] = [
    ("amazon.keep_empty: true", {"amazon.keep_empty": True}),
    ("amazon.keep_duplicates: true", {"amazon.keep_duplicates": True}),
    ("amazon.sample.draw: cover-uniform", {"amazon.sample.draw": "cover-uniform"}),
]


def put(params: dict, dotted: str, value) -> None:
    *path, last = dotted.split(".")
    node = params
    for key in path:
        node = node.setdefault(key, {})
    node[last] = value


def run_stages(repo: Path, name: str, stages=STAGES) -> None:
    """The stage scripts' main() in `repo`, in dvc.yaml's order (tests/conftest.py repro_in_process)."""
    import torch

    cwd, threads = os.getcwd(), torch.get_num_threads()
    os.chdir(repo)
    try:
        for stage in stages:
            runpy.run_path(str(ROOT / "stages" / f"{stage}.py"))["main"]([name])
    finally:
        os.chdir(cwd)
        torch.set_num_threads(threads)


def stats(result: dict) -> list[dict]:
    """Per seed: {id, future, decay} of one model's evaluate output (its per-seed matrices), the references'
    (seed-independent) once."""
    from drift.protocol.matrix import from_json
    from drift.protocol.summary import id_future_decay

    seeds = list(result["seeds"].values())
    if result["model"].startswith("baseline-"):
        seeds = seeds[:1]
    return [id_future_decay(from_json(m), result["higher_is_better"]) for m in seeds]


BASE_SET: dict = {}  # --set: applied to the base and every row


def run_variant(work: Path, name: str, params: dict, overrides: dict, cache: Path) -> dict:
    """{model: [per-seed stats]} and the slice table's rows for `params` with `overrides`."""
    params = copy.deepcopy(params)
    for key, value in {**BASE_SET, **overrides}.items():
        put(params, key, value)
    params["embed"]["cache_dir"] = str(cache)
    repo = Path(tempfile.mkdtemp(prefix="knob-", dir=work))
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run_stages(repo, name)
    out = {}
    for path in sorted((repo / "data" / "eval" / name).glob("*.json")):
        out[path.stem] = stats(json.loads(path.read_text()))
    manifest = json.loads((repo / "data" / "slices" / f"{name}.json").read_text())
    out["_rows"] = manifest["rows"]
    shutil.rmtree(repo, ignore_errors=True)
    return out


def fmt(values: list[float | None]) -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return "-"
    if len(vals) == 1:
        return f"{vals[0]:.3f}"
    return f"{statistics.mean(vals):.3f}±{statistics.stdev(vals):.3f}"


def print_table(title: str, base: dict, rows: list[tuple[str, dict]], models: list[str]) -> None:
    print(f"\n## {title}\n")
    print("| knob | rows | model | ID | Future | Decay | ΔID | ΔFuture | ΔDecay |")
    print("| --- | ---: | --- | --- | --- | --- | ---: | ---: | ---: |")
    for label, res in [("base (embedded default)", base), *rows]:
        for model in models:
            if model not in res:
                continue
            cells = [fmt([s[k] for s in res[model]]) for k in ("id", "future", "decay")]
            deltas = []
            for k in ("id", "future", "decay"):
                a = [s[k] for s in base[model] if s[k] is not None]
                b = [s[k] for s in res[model] if s[k] is not None]
                deltas.append(
                    f"{statistics.mean(b) - statistics.mean(a):+.3f}" if a and b and res is not base else ""
                )
            print(f"| {label} | {res['_rows']} | {model} | {' | '.join(cells)} | {' | '.join(deltas)} |")


def image_params(args) -> dict:
    params = yaml.safe_load(SHIPPED.read_text())
    params["datasets"] = {"synth-portraits": params["datasets"]["synth-portraits"]}
    params["synth-portraits"].update(per_slice=args.per_slice)
    params["train"].update(
        epochs=args.epochs,
        seeds=list(range(args.seeds)),
        models={"synth-portraits": args.models.split(",")},
        baselines=["baseline-prior", "baseline-linear"],
    )
    return params


def draw_yearbook(folder: Path, params: dict) -> int:
    """The synth portraits of `params` as a Yearbook folder: gray 186 x 171 PNGs, F/ (class 0) and M/ (class
    1)."""
    from PIL import Image

    from drift.data.datasets import synth_portraits

    cfg = synth_portraits.SynthPortraitsParams.model_validate(params["synth-portraits"])
    n = 0
    for label in ("F", "M"):
        (folder / label).mkdir(parents=True, exist_ok=True)
    for t in range(cfg.k):
        images, labels = synth_portraits.make_slice(t, cfg)
        for i, (image, label) in enumerate(zip(images, labels)):
            gray = Image.fromarray(image.mean(0).round().astype(np.uint8), "L").resize(
                (171, 186), Image.Resampling.BICUBIC
            )
            buffer = io.BytesIO()
            gray.save(buffer, format="PNG")
            (folder / "FM"[label] / f"{cfg.start_year + t}_Synth_{t}_{i}.png").write_bytes(buffer.getvalue())
            n += 1
    return n


def yearbook_params(args, folder: Path) -> dict:
    params = image_params(args)
    start = params["synth-portraits"]["start_year"]
    end = start + params["synth-portraits"]["k"]
    params["datasets"] = {"yearbook": {"input": str(folder)}}
    params["yearbook"] = {
        "slices": {"unit": "year", "start": start, "end": end},
        "min_samples": params["synth-portraits"]["min_samples"],
    }
    params["train"]["models"] = {"yearbook": args.models.split(",")}
    return params


def amazon_part(args, work: Path) -> None:
    """Rows kept and the closed-form references per cutoff on the Amazon fixture, base against each knob."""
    import torch

    from drift.core.environment import deterministic
    from drift.core.params import load_params
    from drift.data.datasets import dataset_cfg
    from drift.data.ingest import ingest
    from drift.data.records import read_records
    from drift.evaluate.predict import predict
    from drift.models.inputs import Inputs
    from drift.models.reference import text_counts
    from drift.protocol.summary import id_future_decay
    from drift.protocol.tasks import get_task
    from drift.store.slices import slice_dataset, trainable_cutoffs
    from drift.train.loop import train_one

    deterministic(1)
    base = yaml.safe_load(SHIPPED.read_text())
    base["datasets"] = {"amazon": {"input": str(AMAZON)}}
    # text_fields [text] (the paper preset's): an empty review then has no text at all, so keep_empty can act
    base["amazon"].update(
        categories=None,
        min_samples=20,
        text_fields=["text"],
        sample={"n": args.amazon_n, "seed": 0},
    )
    knobs = AMAZON_KNOBS[:1] if args.quick else [k for k in AMAZON_KNOBS if args.knob in k[0]]
    results = []
    variants: list[tuple[str, dict]] = [("base (embedded default)", {}), *knobs]
    for label, overrides in variants:
        res: dict = {"baseline-prior": [], "baseline-tfidf": []}
        for seed in range(args.seeds):  # amazon.sample.seed: the spread of the sample's draw
            params = copy.deepcopy(base)
            for key, value in {**overrides, "amazon.sample.seed": seed}.items():
                put(params, key, value)
            typed = load_params(params)
            d = Path(tempfile.mkdtemp(prefix="amazon-", dir=work))
            counts = ingest("amazon", dataset_cfg(typed, "amazon"), d / "records.parquet", d / "q.parquet")
            table, manifest = slice_dataset(read_records(d / "records.parquet"), "amazon", typed.split)
            task = get_task(manifest.task)
            slices = table.column("slice").to_numpy()
            splits = table.column("split").to_numpy(zero_copy_only=False)
            targets = task.target_tensor(np.asarray(table.column("label").to_pylist()))
            counts_in = Inputs("text", text_counts(table.column("text").to_pylist()))
            blank = Inputs("pooled", np.zeros((table.num_rows, 1), np.float32))  # the prior reads no feature
            k = len(manifest.slices)
            res["_rows"] = f"{counts['kept']} of {counts['read']} → {table.num_rows}"
            for model in ("baseline-prior", "baseline-tfidf"):
                inputs = blank if model == "baseline-prior" else counts_in
                matrix = np.full((k, k), np.nan)
                for i in trainable_cutoffs(manifest.slices):
                    rows = np.flatnonzero((slices <= i) & (splits == "train"))
                    fitted = train_one(model, inputs, rows, targets, task, 1, typed.train, 0, "text")
                    for j in range(k):
                        test = np.flatnonzero((slices == j) & (splits == "test"))
                        if len(test):
                            truth = targets[torch.from_numpy(test)].numpy()
                            matrix[i, j] = task.score(truth, predict(fitted, inputs, test))
                res[model].append(id_future_decay(matrix, task.higher_is_better))
            shutil.rmtree(d, ignore_errors=True)
        results.append((label, res))
    table_out = results[0][1]
    print_table(
        "Amazon fixture, text_fields [text] (balanced MSE: lower is better; Decay = Future - ID)",
        table_out,
        results[1:],
        ["baseline-prior", "baseline-tfidf"],
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["image", "yearbook", "amazon", "all"], default="all")
    ap.add_argument("--models", default="mlp-s,cnn-s")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--per-slice", type=int, default=200, help="synth portraits per slice (8 slices)")
    ap.add_argument(
        "--amazon-n", type=int, default=600, help="amazon.sample.n on the fixture (2,336 rows in span)"
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a base setting for every row, e.g. train.standardise_pixels=false (YAML value)",
    )
    ap.add_argument("--quick", action="store_true", help="one knob per part, 1 seed, 1 epoch, 60 per slice")
    ap.add_argument("--knob", default="", help="only the knob rows whose label holds this text")
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds, args.epochs, args.per_slice, args.models = 1, 1, 60, "mlp-s"
    for item in args.set:
        key, _, value = item.partition("=")
        BASE_SET[key] = yaml.safe_load(value)
    start_cpu, start = time.process_time(), time.perf_counter()
    print(
        f"models {args.models}, seeds {args.seeds}, epochs {args.epochs}, synth per_slice {args.per_slice}, "
        f"train.threads 1, base settings {BASE_SET or 'as shipped'}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-knobs-") as tmp:
        work, cache = Path(tmp), Path(tmp) / "cache"
        models = [*args.models.split(","), "baseline-linear", "baseline-prior"]
        if args.part in ("image", "all"):
            params = image_params(args)
            base = run_variant(work, "synth-portraits", params, {}, cache)
            knobs = IMAGE_KNOBS[-1:] if args.quick else [k for k in IMAGE_KNOBS if args.knob in k[0]]
            rows = [(label, run_variant(work, "synth-portraits", params, o, cache)) for label, o in knobs]
            print_table("synth-portraits (accuracy; Decay = ID - Future)", base, rows, models)
        if args.part in ("yearbook", "all"):
            folder = work / "yearbook"
            params = image_params(args)
            draw_yearbook(folder, params)
            params = yearbook_params(args, folder)
            base = run_variant(work, "yearbook", params, {}, cache)
            knobs = YEARBOOK_KNOBS[-1:] if args.quick else [k for k in YEARBOOK_KNOBS if args.knob in k[0]]
            rows = [(label, run_variant(work, "yearbook", params, o, cache)) for label, o in knobs]
            print_table(
                "synth portraits through the Yearbook reader at 186 x 171 (accuracy)", base, rows, models
            )
        if args.part in ("amazon", "all"):
            amazon_part(args, work)
    print(
        f"\n{time.perf_counter() - start:.0f} s wall, {time.process_time() - start_cpu:.0f} s CPU (this process)"
    )


if __name__ == "__main__":
    main()

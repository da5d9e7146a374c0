"""Cost of the lexical reference baseline-tfidf per cutoff (the TF-IDF vocabulary, idf and linear model fitted
on one cutoff's training rows, then one prediction pass over them), against baseline-linear's fit on the same
cutoff, measured in the same run: the ratio says what the lexical reference adds to the references' cost. Wall
and CPU seconds of this process both: on shared cores the CPU seconds are the fair figure. Each reference is
fitted twice, at its fixed C (TFIDF_C, C_DEFAULT: train.reference_C as a number) and with C chosen by
cross-validation (train.reference_C: cv, the default): the "cv vs fixed" line is what choosing C costs.

baseline-linear reads the text encoder's pooled vectors; no encoder runs here, so it fits on 384-d stand-ins
(MiniLM's width, seeded normal) with the same targets and task. Cases (the default runs all three):
  sotu      the shipped sotu section through ingest and slice in a temp dir: every cutoff's training rows
            (binary); the last cutoff's figures and the sum over cutoffs
  commits   7,500 rows, 5 classes (the size of a 5-class commit-type table): multinomial logistic regression
  paper     210,000 rows, ratings (ridge): the paper's Amazon at its last cutoff (0.7 x 300,000)
Texts of commits and paper are Amazon-shaped: each row draws its word count from a review of the Amazon 2023
fixture (tests/fixtures/amazon2023, as bench_scale.py draws its token counts) and its words from the fixture's
word frequencies, so no two rows repeat and the vocabulary grows with the rows as a corpus's does.

    python bench/bench_tfidf.py                          # sotu, commits, paper (~10 min on 2 cores)
    python bench/bench_tfidf.py --case paper --rows 60000
    python bench/bench_tfidf.py --quick                  # 300 Amazon-shaped rows, ratings: seconds
    python bench/bench_tfidf.py --no-cv                  # the fixed C only (the figures before cv)
"""

from __future__ import annotations

import argparse
import glob
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drift.core.environment import pin_cpu_code_path  # noqa: E402

pin_cpu_code_path()  # the stages' CPU path (compute.cpu_path portable) for whatever this run computes

from drift.models import InputSpec  # noqa: E402
from drift.models.reference import CV, LinearBaseline, TfidfBaseline, text_counts  # noqa: E402

POOLED_DIM = 384  # MiniLM-L6's pooled width: what baseline-linear reads on a text dataset
CASES = {"commits": (7_500, "multiclass"), "paper": (210_000, "regression")}


def amazon_shaped(n: int, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """n distinct texts (word counts of the fixture's reviews, words by the fixture's frequencies) and
    ratings."""
    rows = [
        json.loads(line)
        for f in sorted(glob.glob(str(ROOT / "tests/fixtures/amazon2023/*.jsonl")))
        for line in open(f)
    ]
    reviews = [re.findall(r"\w+|[^\w\s]", f"{r.get('title', '')} {r['text']}") for r in rows]
    words, freq = np.unique(np.array([w for r in reviews for w in r]), return_counts=True)
    rng = np.random.default_rng(seed)
    lengths = rng.choice(np.array([max(1, len(r)) for r in reviews]), n)
    drawn = rng.choice(len(words), int(lengths.sum()), p=freq / freq.sum())
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    texts = [" ".join(words[drawn[a:b]]) for a, b in zip(bounds[:-1], bounds[1:])]
    return texts, rng.choice(np.array([float(r["rating"]) for r in rows]), n)


def timed(fit) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds of this process, the fitted model) of one fit."""
    start, cpu = time.perf_counter(), time.process_time()
    model = fit()
    return time.perf_counter() - start, time.process_time() - cpu, model


def measure_cv(counts, pooled, targets: torch.Tensor, task: str, n_outputs: int) -> dict:
    """Both references' fits with C chosen by cross-validation on the same rows, and the C each chose."""
    tfidf_s, tfidf_cpu_s, tfidf = timed(
        lambda: TfidfBaseline(InputSpec("text", (1,)), n_outputs, C=CV).fit(counts, targets, task)
    )
    linear_s, linear_cpu_s, linear = timed(
        lambda: LinearBaseline(InputSpec("pooled", (POOLED_DIM,)), n_outputs, C=CV).fit(pooled, targets, task)
    )
    return {
        "cv_fit_s": round(tfidf_s, 2),
        "cv_fit_cpu_s": round(tfidf_cpu_s, 2),
        "cv_C": tfidf.chosen_C,
        "cv_linear_fit_s": round(linear_s, 3),
        "cv_linear_fit_cpu_s": round(linear_cpu_s, 3),
        "cv_linear_C": linear.chosen_C,
    }


def measure(texts, targets: torch.Tensor, task: str, n_outputs: int, counts=None, cv: bool = True) -> dict:
    """One cutoff: counting (once per dataset and stage), the TF-IDF fit, prediction; baseline-linear's fit;
    with `cv` both fits again with C chosen by cross-validation (measure_cv)."""
    start = time.perf_counter()
    counts = text_counts(texts) if counts is None else counts
    count_s = time.perf_counter() - start
    start, cpu = time.perf_counter(), time.process_time()
    model = TfidfBaseline(InputSpec("text", (1,)), n_outputs).fit(counts, targets, task)
    fit_s, fit_cpu_s = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()
    for i in range(0, counts.shape[0], 4096):
        model(counts[i : i + 4096])
    predict_s = time.perf_counter() - start
    pooled = torch.from_numpy(
        np.random.default_rng(1).standard_normal((len(targets), POOLED_DIM), dtype=np.float32)
    )
    start, cpu = time.perf_counter(), time.process_time()
    LinearBaseline(InputSpec("pooled", (POOLED_DIM,)), n_outputs).fit(pooled, targets, task)
    linear_s, linear_cpu_s = time.perf_counter() - start, time.process_time() - cpu
    n = counts.shape[0]
    chosen = measure_cv(counts, pooled, targets, task, n_outputs) if cv else {}
    return {
        "rows": n,
        "task": task,
        "count_rows_per_s": round(n / max(count_s, 1e-9)),
        "fit_s": round(fit_s, 2),
        "predict_rows_per_s": round(n / predict_s),
        "features": int(model.weight.shape[1]),
        "checkpoint_mb": round(
            sum(t.numel() * t.element_size() for t in model.state_dict().values()) / 1e6, 2
        ),
        "linear_fit_s": round(linear_s, 3),
        "fit_vs_linear": round(fit_s / linear_s, 1),
        "fit_cpu_s": round(fit_cpu_s, 2),
        "linear_fit_cpu_s": round(linear_cpu_s, 3),
        "cpu_vs_linear": round(fit_cpu_s / max(linear_cpu_s, 1e-6), 1),
        **chosen,
    }


def sotu_cutoffs(cv: bool = True) -> dict:
    """The shipped sotu section ingested and sliced in a temp dir; every usable cutoff fitted on its training
    rows."""
    import yaml

    from drift.core.params import load_params
    from drift.data.datasets import dataset_cfg
    from drift.data.ingest import ingest
    from drift.data.records import read_records
    from drift.store.slices import slice_dataset

    with tempfile.TemporaryDirectory(prefix="bench-tfidf-") as tmp:
        path = Path(tmp) / "params.yaml"
        path.write_text(yaml.safe_dump(yaml.safe_load((ROOT / "params.yaml").read_text())))
        params = load_params(path)
        ingest("sotu", dataset_cfg(params, "sotu"), Path(tmp) / "r.parquet", Path(tmp) / "q.parquet")
        table, manifest = slice_dataset(read_records(Path(tmp) / "r.parquet"), "sotu", params.split)
    table = table.select(["text", "label", "slice", "split"]).to_pydict()
    slices, split = np.array(table["slice"]), np.array(table["split"])
    start = time.perf_counter()
    counts = text_counts(table["text"])  # once for the stage, as the train stage computes it
    count_rows_per_s = round(len(table["text"]) / (time.perf_counter() - start))
    labels = torch.tensor(table["label"]).float()
    runs = []
    for k in [s.index for s in manifest.slices if s.trainable]:
        rows = np.flatnonzero((slices <= k) & (split == "train"))
        if len(np.unique(labels[rows].numpy())) == 2:
            runs.append(measure(None, labels[rows], "binary", 2, counts=counts[rows], cv=cv))
    last = runs[-1]
    sums = ["fit_s", "fit_cpu_s", "linear_fit_s", "linear_fit_cpu_s"]
    sums += ["cv_fit_s", "cv_fit_cpu_s", "cv_linear_fit_s", "cv_linear_fit_cpu_s"] if cv else []
    return {
        "case": "sotu",
        **last,
        "count_rows_per_s": count_rows_per_s,
        "cutoffs": len(runs),
        **{f"all_cutoffs_{key}": round(sum(r[key] for r in runs), 3) for key in sums},
        **({"all_cutoffs_cv_C": [r["cv_C"] for r in runs]} if cv else {}),
        **({"all_cutoffs_cv_linear_C": [r["cv_linear_C"] for r in runs]} if cv else {}),
    }


def synthetic(case: str, n: int, task: str, cv: bool = True) -> dict:
    texts, ratings = amazon_shaped(n)
    start = time.perf_counter()
    counts = text_counts(texts)
    count_s = time.perf_counter() - start
    if task == "regression":
        result = measure(None, torch.tensor(ratings), "regression", 1, counts=counts, cv=cv)
    else:
        result = measure(None, torch.tensor(ratings - 1).long(), "multiclass", 5, counts=counts, cv=cv)
    return {"case": case, **result, "count_rows_per_s": round(n / count_s)}


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", default="sotu,commits,paper", help="comma-separated: sotu, commits, paper")
    parser.add_argument("--rows", type=int, help="rows of commits or paper instead of 7,500 and 210,000")
    parser.add_argument("--quick", action="store_true", help="300 Amazon-shaped rows, ratings: seconds")
    parser.add_argument("--no-cv", action="store_true", help="fit at the fixed C only (no cross-validation)")
    args = parser.parse_args(argv)
    cv = not args.no_cv
    torch.set_num_threads(1)
    warm = amazon_shaped(40)  # imports and first calls out of the timings
    measure(warm[0], torch.tensor(warm[1]), "regression", 1, cv=cv)
    cases = ["paper"] if args.quick else [c.strip() for c in args.case.split(",")]
    for case in cases:
        if case == "sotu":
            result = sotu_cutoffs(cv)
        elif case in CASES:
            n, task = CASES[case]
            result = synthetic(case, 300 if args.quick else args.rows or n, task, cv)
        else:
            raise SystemExit(f"unknown case {case!r}: valid: sotu, {', '.join(CASES)}")
        print(json.dumps(result), flush=True)
        print(
            f"{case}: baseline-tfidf fit {result['fit_s']} s vs baseline-linear fit {result['linear_fit_s']} s "
            f"on the same {result['rows']:,} rows: {result['fit_vs_linear']}x (CPU {result['fit_cpu_s']} s vs "
            f"{result['linear_fit_cpu_s']} s: {result['cpu_vs_linear']}x)",
            flush=True,
        )
        if cv:
            every = "all_cutoffs_" if case == "sotu" else ""
            fixed = {k: result[f"{every}{k}"] for k in ("fit_cpu_s", "linear_fit_cpu_s")}
            chosen = {k: result[f"{every}cv_{k}"] for k in ("fit_cpu_s", "linear_fit_cpu_s")}
            print(
                f"{case}{' (every cutoff)' if every else ''}: cv vs fixed C, CPU seconds: baseline-tfidf "
                f"{chosen['fit_cpu_s']:.2f} s vs {fixed['fit_cpu_s']:.2f} s "
                f"({chosen['fit_cpu_s'] / max(fixed['fit_cpu_s'], 1e-6):.1f}x, C {result['cv_C']}), baseline-linear "
                f"{chosen['linear_fit_cpu_s']:.3f} s vs {fixed['linear_fit_cpu_s']:.3f} s "
                f"({chosen['linear_fit_cpu_s'] / max(fixed['linear_fit_cpu_s'], 1e-6):.1f}x, C {result['cv_linear_C']})",
                flush=True,
            )


if __name__ == "__main__":
    main()

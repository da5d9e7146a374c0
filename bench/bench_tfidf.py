"""Cost of the lexical reference baseline-tfidf: one fit (TF-IDF vocabulary + idf + the linear model) and one
prediction pass, as the train and evaluate stages run it per cutoff, on texts of a real shape.

Texts: the Amazon 2023 fixture's reviews (tests/fixtures/amazon2023), drawn with replacement to each size, each
with its rating (1-5, ridge) or a 5-class label (multinomial logistic regression); or the sotu paragraphs of a
slice table (--slices data/slices/sotu.lance, its labels, binary). Sizes are training rows of one cutoff; the
paper's Amazon at its last cutoff trains on about 0.7 x 300,000 = 210,000 rows.

    python bench/bench_tfidf.py --rows 2000,20000            # Amazon-shaped, regression
    python bench/bench_tfidf.py --rows 20000 --task multiclass
    python bench/bench_tfidf.py --slices data/slices/sotu.lance
    python bench/bench_tfidf.py --quick                      # 300 rows: seconds
"""
from __future__ import annotations

import argparse
import glob
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drift.models import InputSpec  # noqa: E402
from drift.models.reference import TfidfBaseline, text_counts  # noqa: E402


def amazon_texts():
    rows = [json.loads(line) for f in sorted(glob.glob(str(ROOT / "tests/fixtures/amazon2023/*.jsonl")))
            for line in open(f)]
    return [f"{r.get('title', '')} {r['text']}" for r in rows], np.array([float(r["rating"]) for r in rows])


def time_fit(texts, targets, task: str, n_outputs: int) -> dict:
    start = time.perf_counter()
    counts = text_counts(texts)            # once per dataset and stage: every cutoff reuses it
    count_s = time.perf_counter() - start
    start = time.perf_counter()
    model = TfidfBaseline(InputSpec("text", (1,)), n_outputs).fit(counts, targets, task)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(0, len(texts), 4096):
        model(counts[i:i + 4096])
    return {"rows": len(texts), "task": task, "count_rows_per_s": round(len(texts) / count_s), "fit_s": round(fit_s, 2),
            "predict_rows_per_s": round(len(texts) / (time.perf_counter() - start)),
            "features": int(model.weight.shape[1]),
            "checkpoint_mb": round(sum(t.numel() * t.element_size() for t in model.state_dict().values()) / 1e6, 2)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="2000,20000")
    parser.add_argument("--task", default="regression", choices=("regression", "multiclass"))
    parser.add_argument("--slices", help="a slice table: time a fit on its training rows instead")
    parser.add_argument("--quick", action="store_true", help="300 Amazon-shaped rows, regression: seconds")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.task = "300", "regression"
    torch.set_num_threads(1)
    if args.slices:
        import lance
        table = lance.dataset(args.slices).to_table(columns=["text", "label", "split"]).to_pydict()
        train = [i for i, s in enumerate(table["split"]) if s == "train"]
        texts = [table["text"][i] for i in train]
        print(json.dumps(time_fit(texts, torch.tensor([table["label"][i] for i in train]), "binary", 2)))
        return
    texts, ratings = amazon_texts()
    rng = np.random.default_rng(0)
    for n in (int(r) for r in args.rows.split(",")):
        rows = rng.integers(0, len(texts), n)
        sample = [texts[i] for i in rows]
        if args.task == "regression":
            print(json.dumps(time_fit(sample, torch.tensor(ratings[rows]), "regression", 1)), flush=True)
        else:
            print(json.dumps(time_fit(sample, torch.tensor(ratings[rows] - 1).long(), "multiclass", 5)), flush=True)


if __name__ == "__main__":
    main()

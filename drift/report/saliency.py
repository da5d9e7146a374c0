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

from drift.core.errors import DriftError
from drift.core.paths import dataset_paths
from drift.models import get_model_info
from drift.models.checkpoints import list_checkpoints, load_checkpoint, reads_stored
from drift.models.inputs import load_inputs
from drift.protocol.matrix import eval_rows
from drift.protocol.summary import cutoff_indices
from drift.protocol.tasks import get_task
from drift.report.plots import saliency_grid
from drift.store.slices import read_slice_manifest, read_slice_table


def saliency_map(model: torch.nn.Module, x: torch.Tensor, target, batch_size: int = 256) -> np.ndarray:
    """Mean over the batch of max_c |d out_y / d x_c| -> [H, W]. x: [N, C, H, W] floats; target: [N] class
    indices (ignored when the model has a single output, e.g. a rating)."""
    model.eval()  # batch norm on running statistics: each output depends on its own input only
    target = torch.as_tensor(np.asarray(target), dtype=torch.long)
    total = torch.zeros(x.shape[-2:], dtype=torch.float64)
    for start in range(0, len(x), batch_size):
        xb = x[start : start + batch_size].detach().clone().float().requires_grad_(True)
        out = model(xb)
        picked = out[:, 0] if out.shape[1] == 1 else out.gather(1, target[start : start + len(xb), None])
        # the sum's gradient w.r.t. each input is that input's own gradient, since outputs do not mix
        (grad,) = torch.autograd.grad(picked.sum(), xb)
        total += grad.abs().amax(dim=1).sum(dim=0).double()
    return (total / max(len(x), 1)).numpy()


def select_rows(
    cutoff: int, eval_slice: int, slices: np.ndarray, splits: np.ndarray, n: int, seed: int = 0
) -> np.ndarray:
    """Up to n portraits of the evaluation slice, scored as the drift matrix scores that cell (test split of a
    trained-on slice, all of a later one), drawn once from `seed` and kept in table order."""
    rows = eval_rows(cutoff, eval_slice, slices, splits)
    if len(rows) > n:
        rows = np.sort(np.random.default_rng(seed).choice(rows, size=n, replace=False))
    return rows


def _checkpoints(model_dir: Path) -> dict[int, list[Path]]:
    """cutoff -> its checkpoint in every seed folder (drift.models.checkpoints names them)."""
    found: dict[int, list[Path]] = {}
    for per_cutoff in list_checkpoints(model_dir.parent, model_dir.name).values():
        for k, path in per_cutoff.items():
            found.setdefault(k, []).append(path)
    return dict(sorted(found.items()))


def resolve_cells(cells, labels: list[str], usable: list[int], name: str) -> list[tuple[int, int]]:
    """report.saliency.cells, [[trained-through label, evaluated-on label], ...], as (cutoff, eval) slice
    indices. Labels are compared as text (a YAML 1950 is "1950"); one that names no usable slice of the
    dataset is a one-line error listing the valid labels."""
    if not isinstance(cells, (list, tuple)) or not cells:
        raise DriftError(
            f"report.saliency.cells must be a non-empty list of [trained-through, evaluated-on] slice "
            f"label pairs, got {cells!r}"
        )
    valid = [labels[i] for i in usable]
    out = []
    for cell in cells:
        if not isinstance(cell, (list, tuple)) or len(cell) != 2:
            raise DriftError(
                f"report.saliency.cells: {cell!r} is not a [trained-through, evaluated-on] pair of "
                f"slice labels, e.g. [{valid[0]!r}, {valid[-1]!r}]"
            )
        pair = []
        for label in map(str, cell):
            if label not in valid:
                state = " (too few rows: unusable)" if label in labels else ""
                raise DriftError(
                    f"report.saliency.cells: no slice {label!r} in {name}{state}; valid slice labels: "
                    f"{', '.join(valid)}"
                )
            pair.append(labels.index(label))
        out.append((pair[0], pair[1]))
    return out


def dataset_saliency(
    name: str,
    models: list[str] | None = None,
    cells: list | None = None,
    n: int = 64,
    seed: int = 0,
    root: Path = Path("."),
    *,
    cutoffs: list[int] | None = None,
    eval_slice: int | None = None,
    n_cutoffs: int = 3,
) -> dict:
    """Mean saliency maps of one dataset's image models from its slice table and checkpoints.

    models: image models with checkpoints, default every one; cells: the grid's columns as [trained-through
    label, evaluated-on label] pairs (params.yaml report.saliency.cells; paper Figure 3 is 1950 and 1970 each
    on 1960, 1980, 2000); n: portraits per panel, drawn once from `seed`. Without cells: `cutoffs` (slice
    indices, default `n_cutoffs` spread over the timeline, summary.cutoff_indices), each on `eval_slice` (an
    index) or else on the next usable slice after it (the first period not seen). Returns {"models",
    "columns": [{cutoff, cutoff_label, eval, eval_label, n, title}], "maps": {(model, c): [H, W]},
    "portraits": {c: mean image [C, H, W]}}.
    """
    if cells is not None and (cutoffs is not None or eval_slice is not None):
        raise DriftError("saliency: give the grid as cells, or as cutoffs and an eval slice, not both")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise DriftError(f"report.saliency.n (portraits per panel) must be a positive integer, got {n!r}")
    p = dataset_paths(name, root)
    manifest = read_slice_manifest(p["slices"])
    if manifest.modality != "image":
        raise DriftError(f"saliency maps need an image dataset; {name} is {manifest.modality}")
    available = sorted(d.name for d in p["models"].glob("*") if d.is_dir() and _checkpoints(d))
    image_models = [m for m in available if get_model_info(m).input == "pixels"]
    if not image_models:
        raise DriftError(
            f"no trained image models in {p['models']}: run `dvc repro train@{name}` (or `dvc pull`)"
        )
    for m in models or []:
        if m not in image_models:
            raise DriftError(
                f"no trained image model {m!r} for {name}: trained ones are {', '.join(image_models)}"
                f" (report.saliency.models, or add it to train.models.{name})"
            )
    models = list(models or image_models)

    info = manifest.slices
    labels = manifest.labels()
    usable = [s.index for s in info if s.usable]
    if cells is not None:
        pairs = resolve_cells(cells, labels, usable, name)
    else:
        if cutoffs is None:
            cutoffs = [c for c in cutoff_indices(len(info), n_cutoffs) if c in usable]
        for c in [*cutoffs, *([] if eval_slice is None else [eval_slice])]:
            if not 0 <= c < len(info):
                raise DriftError(
                    f"slice {c} is out of range: {name} has slices 0..{len(info) - 1} "
                    f"({labels[0]}..{labels[-1]})"
                )
        pairs = []
        for cutoff in cutoffs:
            later = [s for s in usable if s > cutoff]
            pairs.append((cutoff, eval_slice if eval_slice is not None else (later[0] if later else cutoff)))

    table = read_slice_table(p["slices"])
    slices = table.column("slice").to_numpy()
    splits = table.column("split").to_numpy(zero_copy_only=False)
    targets = np.array(table.column("label").to_pylist())
    inputs = load_inputs("pixels", table)
    n_outputs = get_task(manifest.task).n_outputs(len(manifest.label_names))

    columns, maps, portraits = [], {}, {}
    for col, (cutoff, target_slice) in enumerate(pairs):
        rows = select_rows(cutoff, target_slice, slices, splits, n, seed)
        columns.append(
            {
                "cutoff": cutoff,
                "cutoff_label": labels[cutoff],
                "eval": target_slice,
                "eval_label": labels[target_slice],
                "n": int(len(rows)),
                "title": f"through {labels[cutoff]}\neval {labels[target_slice]}",
            }
        )
        if not len(rows):
            continue
        (x,) = inputs.batch(rows)
        portraits[col] = x.mean(0).numpy()
        (stored,) = inputs.as_stored().batch(rows)
        for model_name in models:
            per_seed = []
            for checkpoint in _checkpoints(p["models"] / model_name).get(cutoff, []):
                model = load_checkpoint(model_name, inputs.spec(), n_outputs, manifest.task, checkpoint)
                per_seed.append(saliency_map(model, stored if reads_stored(model) else x, targets[rows]))
            if per_seed:
                maps[(model_name, col)] = np.mean(per_seed, axis=0)
    return {"models": models, "columns": columns, "maps": maps, "portraits": portraits}


def write_saliency(
    name: str,
    path: Path,
    models: list[str] | None = None,
    cells: list | None = None,
    n: int = 64,
    seed: int = 0,
    root: Path = Path("."),
    *,
    cutoffs: list[int] | None = None,
    eval_slice: int | None = None,
) -> dict:
    """dataset_saliency drawn as a PNG grid (rows = models, columns = cells); returns what was drawn.

    models, cells, n are params.yaml's report.saliency.<name> (write_saliency(name, path,
    **params.report.saliency[name].model_dump(), root=root)); cutoffs / eval_slice (slice indices) are the
    alternative without cells."""
    result = dataset_saliency(
        name, models=models, cells=cells, n=n, seed=seed, root=root, cutoffs=cutoffs, eval_slice=eval_slice
    )
    saliency_grid(
        result["maps"],
        result["models"],
        result["columns"],
        Path(path),
        f"{name}: mean gradient saliency |∂ logit_y / ∂ x|",
        result["portraits"],
    )
    return result

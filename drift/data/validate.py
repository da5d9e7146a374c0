"""Everything about one dataset's run that can be checked before any compute, beyond the schema of
params.yaml (drift.core.params): the dataset's section, its slices, the saliency cells,
the encoder names. What the ingest stage checks first; it needs no model registry (torch), so editing a model
never re-runs an ingest. drift/run/checks.py adds the models (the train stage checks both).
"""
from __future__ import annotations

from drift.core.encoder_registry import get_encoder_spec
from drift.core.errors import DriftError
from drift.core.params import Params
from drift.data.datasets import get_dataset
from drift.protocol.slicing import slice_edges


def validate_data(params: Params, name: str) -> None:
    """The dataset's section, its slices, the saliency cells and the encoder names: all an ingest needs."""
    cfg = params.dataset(name)
    get_dataset(name)
    _, labels = slice_edges(cfg.slices)
    grid = params.report.saliency.get(name)  # an image dataset without a grid draws a default one
    for cell in (grid.cells or []) if grid else []:
        bad = [x for x in cell if x not in labels]
        if len(cell) != 2 or bad:
            raise DriftError(f"report.saliency.{name}.cells: {cell!r} is not a [trained through, evaluated on] pair "
                             f"of slice labels of {name} (valid: {', '.join(labels)})")
    if not params.train.models.get(name):
        raise DriftError(f"train.models.{name} lists no models: add some (`drift models` lists them)")
    embed = params.embed
    for encoder in [embed.text_encoder, *embed.encoders]:
        get_encoder_spec(encoder)  # unknown names stop here, listing the valid ones

"""Everything about one dataset's run that can be checked before any compute, beyond the schema of
params.yaml (drift.core.params): the dataset's section, its slices, the saliency cells, the roster's presence,
the encoder names. What the ingest stage checks first; it needs no model registry (torch) and no reader, so
editing a model never re-runs an ingest. drift/run/checks.py adds the models (the train stage checks them).
"""

from __future__ import annotations

from drift.core.encoder_registry import get_encoder_spec
from drift.core.errors import DriftError
from drift.core.params import DatasetParams, Params
from drift.protocol.slicing import slice_edges


def validate_names(params: Params, name: str) -> None:
    """The names of the run that need no dataset section: a roster for `name`, known encoders."""
    if not params.train.models.get(name):
        raise DriftError(f"train.models.{name} lists no models: add some (`drift models` lists them)")
    embed = params.embed
    for encoder in [embed.text_encoder, *embed.encoders]:
        get_encoder_spec(encoder)  # unknown names stop here, listing the valid ones


def validate_data(params: Params, name: str, cfg: DatasetParams) -> None:
    """The dataset's section `cfg` (drift.data.datasets.dataset_cfg), its slices, the saliency cells, and
    validate_names: all an ingest needs."""
    _, labels = slice_edges(cfg.slices)
    grid = params.report.saliency.get(name)  # an image dataset without a grid draws a default one
    for cell in (grid.cells or []) if grid else []:
        bad = [x for x in cell if x not in labels]
        if len(cell) != 2 or bad:
            raise DriftError(
                f"report.saliency.{name}.cells: {cell!r} is not a [trained through, evaluated on] pair "
                f"of slice labels of {name} (valid: {', '.join(labels)})"
            )
    validate_names(params, name)

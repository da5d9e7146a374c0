"""Whether the models of a dataset's run can run on it: known names, the right modality, the encoders their
probes read, the families train.lr names. With drift/data/validate.py (the data), everything that can be checked
before any compute; the train stage runs `validate`, the ingest stage only the data part (no torch there).
"""
from __future__ import annotations

from drift.core.encoder_registry import get_encoder_spec
from drift.core.errors import DriftError, close_matches
from drift.core.params import Params, roster
from drift.data.datasets import get_dataset
from drift.data.validate import validate_data
from drift.models import MODELS, get_model_info


def check_roster(models: list[str], modality: str, text_encoder: str | None, encoders=()) -> None:
    """Stop before any compute when a model cannot run on this dataset with these encoders."""
    for name in models:
        info = get_model_info(name)
        if modality == "image" and info.input == "tokens":
            raise DriftError(f"{name} is a text head; it cannot run on an image dataset")
        if modality == "text" and info.input == "pixels":
            raise DriftError(f"{name} is an image model; it cannot run on a text dataset")
        if info.input == "pooled":
            encoder = info.name.removeprefix("probe-")
            if get_encoder_spec(encoder).modality != modality:
                raise DriftError(f"{name} probes a {get_encoder_spec(encoder).modality} encoder; "
                                 f"it cannot run on a {modality} dataset")
            available = ([text_encoder] if modality == "text" else []) + list(encoders)
            if encoder not in available:
                raise DriftError(f"{name} needs embeddings from encoder {encoder}, which this run does not compute: "
                                 f"add it to embed.encoders (now {list(encoders)}) or drop {name}")


def validate(params: Params, name: str) -> None:
    """Everything about one dataset's run that can be checked without computing, beyond the schema
    (drift.core.params): validate_data, then the models of the roster and the families of train.lr."""
    validate_data(params, name)
    embed = params.embed
    check_roster(roster(params.train, name), get_dataset(name).MODALITY, embed.text_encoder, embed.encoders)
    if isinstance(params.train.lr, dict):
        families = {"default"} | {info.family.lower() for info in MODELS.values()}
        for family in params.train.lr:
            if family not in families:
                raise DriftError(f"unknown parameter train.lr.{family}: "
                                 f"{close_matches(family, families, prefix='train.lr.')}")

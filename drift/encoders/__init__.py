"""Frozen encoders: the registry (registry.py) and the code that loads and runs them (text.py, vision.py)."""
from drift.encoders.registry import ENCODERS, EncoderSpec
from drift.errors import DriftError, close_matches


def get_encoder_spec(name: str) -> EncoderSpec:
    if name not in ENCODERS:
        raise DriftError(f"unknown encoder {name!r}: {close_matches(name, ENCODERS)}")
    return ENCODERS[name]


def make_encoder(name: str, **kwargs):
    """A TextEncoder or a VisionEncoder for registry name `name`, by its modality; kwargs go to its constructor
    (text: max_length, batch_size, dtype, device, weights, pooling; image: batch_size, dtype, device, weights)."""
    spec = get_encoder_spec(name)
    if spec.modality == "text":
        from drift.encoders.text import TextEncoder  # imported here: both modules import this one
        return TextEncoder(name, **kwargs)
    from drift.encoders.vision import VisionEncoder
    return VisionEncoder(name, **kwargs)

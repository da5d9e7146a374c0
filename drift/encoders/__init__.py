"""Frozen encoders: the registry (registry.py) and the code that loads and runs them (text.py)."""
from drift.encoders.registry import ENCODERS, EncoderSpec
from drift.errors import DriftError, close_matches


def get_encoder_spec(name: str) -> EncoderSpec:
    if name not in ENCODERS:
        raise DriftError(f"unknown encoder {name!r}: {close_matches(name, ENCODERS)}")
    return ENCODERS[name]

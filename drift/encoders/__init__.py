"""Frozen encoders: the registry (registry.py: names, sizes, sources), loading one (load.py `make_encoder`),
and the code that runs them (text.py, vision.py)."""
from drift.encoders.registry import ENCODERS, EncoderSpec, get_encoder_spec

__all__ = ["ENCODERS", "EncoderSpec", "get_encoder_spec"]

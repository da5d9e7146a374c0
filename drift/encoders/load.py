"""An encoder of the registry, loaded: TextEncoder (text.py) or VisionEncoder (vision.py) by its modality.
Apart from the package's __init__ so that reading the registry never reaches torch or transformers."""

from drift.core.encoder_registry import get_encoder_spec


def make_encoder(name: str, **kwargs):
    """A TextEncoder or a VisionEncoder for registry name `name`, by its modality; kwargs go to its
    constructor (text: max_length, batch_size, dtype, device, weights, pooling; image: batch_size, dtype,
    device, weights)."""
    spec = get_encoder_spec(name)
    if spec.modality == "text":
        from drift.encoders.text import (
            TextEncoder,  # lazy: one modality's libraries only
        )

        return TextEncoder(name, **kwargs)
    from drift.encoders.vision import (
        VisionEncoder,  # lazy: one modality's libraries only
    )

    return VisionEncoder(name, **kwargs)

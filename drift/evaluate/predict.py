"""Checkpoints' raw outputs over rows of the slice table, batch by batch: every model that needs a slice runs
over each batch read once (evaluation's batched prediction)."""

from __future__ import annotations

import numpy as np
import torch

from drift.models.checkpoints import reads_stored
from drift.models.inputs import Inputs

# rows x padded width of one prediction batch of token states (256 rows of 128 tokens): the default run's
# batches (64 tokens) are whole; 512-token rows come 64 at a time, so evaluation's memory does not follow the
# longest rows
MAX_BATCH_TOKENS = 256 * 128


@torch.inference_mode()
def predict_many(
    models: list[torch.nn.Module], inputs: Inputs, rows: np.ndarray, batch_size: int = 256
) -> list[np.ndarray]:
    """Raw outputs [n, n_outputs] of every model for the given rows, in their order, reading each batch once
    for all of them (evaluation runs every checkpoint that needs a slice over it together). Token rows run
    sorted by length (little padding), then go back to the caller's order; a model's outputs do not depend on
    which other models share the batches."""
    lengths = inputs.lengths if inputs.kind == "tokens" else None
    perm = np.arange(len(rows)) if lengths is None else np.argsort(lengths[rows], kind="stable")
    batches, i = [], 0
    while i < len(rows):  # token batches hold at most MAX_BATCH_TOKENS: wide rows come fewer at a time
        size = batch_size
        while (
            lengths is not None
            and size > 1
            and size * lengths[rows[perm[min(i + size, len(rows)) - 1]]] > MAX_BATCH_TOKENS
        ):
            size //= 2
        batches.append(rows[perm[i : i + size]])
        i += size
    outputs: list[list[torch.Tensor]] = [[] for _ in models]
    # pixels are read as stored once; a model that reads them / 255 gets that (the same bytes as reading it
    # so)
    stored = [reads_stored(model) for model in models]
    reading = inputs.as_stored() if any(stored) else inputs
    # one batch read ahead: with the token cap, memory follows MAX_BATCH_TOKENS, not the longest rows
    for _, x in reading.prefetch(batches, depth=1):
        unit = (x[0] / 255.0,) if reading.stored and not all(stored) else x
        for out, model, as_stored in zip(outputs, models, stored):
            out.append(model(*(x if as_stored else unit)))
    results = []
    for out in outputs:
        if not out:
            results.append(np.zeros((0, 1), np.float32))
            continue
        ordered = torch.cat(out).float().numpy()
        result = np.empty_like(ordered)
        result[perm] = ordered
        results.append(result)
    return results


def predict(model: torch.nn.Module, inputs: Inputs, rows: np.ndarray, batch_size: int = 256) -> np.ndarray:
    """Raw outputs [n, n_outputs] of one model for the given rows, in their order."""
    return predict_many([model], inputs, rows, batch_size)[0]

"""Model inputs as torch tensors, loaded once per dataset without Python loops per row.

pixels: the slice table's uint8 images; pooled: the encoder's pooled vectors; tokens: the ragged token states
(flat float16 array + offsets), padded per batch only to that batch's longest row.
"""
from __future__ import annotations

import numpy as np
import torch

from drift.models import InputSpec


class Inputs:
    def __init__(self, kind: str, data: np.ndarray, offsets: np.ndarray | None = None, image_shape=(3, 32, 32),
                 max_tokens: int = 512):
        self.kind = kind
        # token heads are sized by this parameter (position tables), never by the longest row of the data;
        # longer rows are cut to it
        self.max_tokens = int(max_tokens)
        # Arrow buffers are read-only (torch wants writable memory): copy those, take fresh arrays as they are
        self.data = torch.from_numpy(np.require(data, requirements=["C", "W"]))
        self.offsets = None if offsets is None else torch.from_numpy(offsets)
        self.image_shape = tuple(image_shape)

    @property
    def lengths(self) -> np.ndarray:
        return (self.offsets[1:] - self.offsets[:-1]).clamp(max=self.max_tokens).numpy()

    def spec(self) -> InputSpec:
        if self.kind == "pixels":
            return InputSpec("pixels", self.image_shape)
        if self.kind == "tokens":
            return InputSpec("tokens", (self.data.shape[1],), max_tokens=self.max_tokens)
        return InputSpec("pooled", (self.data.shape[1],))

    def batch(self, rows: np.ndarray) -> tuple[torch.Tensor, ...]:
        """The model's positional arguments for these rows."""
        rows_t = torch.from_numpy(np.asarray(rows, dtype=np.int64))
        if self.kind == "pixels":
            return (self.data[rows_t].reshape(len(rows), *self.image_shape).float() / 255.0,)
        if self.kind == "pooled":
            return (self.data[rows_t].float(),)
        starts, ends = self.offsets[rows_t], self.offsets[rows_t + 1]
        lengths = (ends - starts).clamp(max=self.max_tokens)
        width = int(lengths.max())
        position = torch.arange(width)
        mask = position[None, :] < lengths[:, None]
        index = (starts[:, None] + position[None, :]).clamp(max=len(self.data) - 1)
        x = self.data[index].float() * mask[..., None]
        return x, mask


def load_inputs(kind: str, table, store=None, max_tokens: int = 512) -> Inputs:
    """Inputs of every row of the slice table, in its row order."""
    if kind == "pixels":
        from drift.records import table_images

        images = table_images(table)
        return Inputs("pixels", images.reshape(len(images), -1), image_shape=images.shape[1:])
    keys = table.column("key")  # an Arrow column: the store looks keys up without Python strings
    if kind == "pooled":
        return Inputs("pooled", store.read_pooled(keys))
    flat, offsets = store.read_tokens(keys)
    return Inputs("tokens", flat, offsets, max_tokens=max_tokens)


def length_bucketed_batches(rows: np.ndarray, lengths: np.ndarray | None, batch_size: int,
                            rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffled batches; for token inputs rows of similar length share a batch (little padding), while the
    order of batches stays random. Pools of 50 batches are sorted by length, then cut into batches."""
    rows = rows[rng.permutation(len(rows))]
    if lengths is None:
        return [rows[i:i + batch_size] for i in range(0, len(rows), batch_size)]
    batches = []
    pool = batch_size * 50
    for p in range(0, len(rows), pool):
        chunk = rows[p:p + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]

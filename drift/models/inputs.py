"""Model inputs as torch tensors, batch by batch, from the feature files on disk (drift/store/features.py) or
from arrays in memory.

pixels: the slice table's images (uint8, or float32 0-255 values) as float32, divided by 255, or as stored
(`as_stored`: the models of train.pixel_scale raw); pooled: the encoder's pooled vectors; text: the rows'
hashed term counts (a scipy CSR matrix in memory, drift.models.reference.text_counts; a batch is its rows);
tokens: the ragged token states (flat float16 array + offsets), padded per batch only to that batch's longest
row. On disk, a batch reads just its rows, so memory follows the batch size and the prefetch depth, not the
dataset. `prefetch` reads the next batches on a background thread while the model runs on this one (pinned
memory and non-blocking copies when the batches go to a CUDA device).
"""

from __future__ import annotations

import copy
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import torch

from drift.data.records import table_images
from drift.models import InputSpec
from drift.store.features import DiskArray, open_features

PREFETCH_DEPTH = 2  # batches read ahead: enough to hide a read behind a step, and the memory of two batches


class Inputs:
    def __init__(
        self,
        kind: str,
        data,
        offsets: np.ndarray | None = None,
        image_shape=(3, 32, 32),
        max_tokens: int = 512,
    ):
        """`data`: an array in memory, or a drift.store.features.DiskArray (read per batch)."""
        self.kind = kind
        # token rows are cut to this many tokens (no head has a position table, so no head is sized by it)
        self.max_tokens = int(max_tokens)
        self.data = data if isinstance(data, DiskArray) or kind == "text" else np.asarray(data)
        self.offsets = None if offsets is None else np.asarray(offsets, np.int64)
        self.image_shape = tuple(image_shape)
        self.stored = False  # pixels as stored (0-255), not divided by 255: as_stored

    def as_stored(self) -> Inputs:
        """The same inputs (the same arrays, nothing copied) with pixels read as stored, the 0-255 values
        themselves: a model of train.pixel_scale raw reads them so, not divided and multiplied back (which is
        off by one unit in the last place for some float values)."""
        view = copy.copy(self)
        view.stored = self.kind == "pixels"
        return view

    def _offsets(self) -> np.ndarray:
        """Where each row's token states start in the flat array (and where the last one ends): tokens only."""
        assert self.offsets is not None, "token inputs come with their rows' offsets"
        return self.offsets

    @property
    def lengths(self) -> np.ndarray:
        offsets = self._offsets()
        return np.minimum(offsets[1:] - offsets[:-1], self.max_tokens)

    def spec(self) -> InputSpec:
        if self.kind == "pixels":
            return InputSpec("pixels", self.image_shape)
        if self.kind == "tokens":
            return InputSpec("tokens", (self.data.shape[1],), max_tokens=self.max_tokens)
        if self.kind == "text":
            return InputSpec("text", (1,))
        return InputSpec("pooled", (self.data.shape[1],))

    def _rows(self, rows: np.ndarray) -> np.ndarray:
        if isinstance(self.data, DiskArray):
            return self.data.read_rows(rows)
        return self.data[rows]

    def _spans(self, starts: np.ndarray, width: int) -> np.ndarray:
        """[b, width, D]: `width` token states from each start, an index past the end reading the last one."""
        if isinstance(self.data, DiskArray):
            return self.data.read_spans(starts, width)
        return self.data[np.minimum(starts[:, None] + np.arange(width), len(self.data) - 1)]

    def batch(self, rows: np.ndarray) -> tuple[torch.Tensor, ...]:
        """The model's positional arguments for these rows, in their order."""
        rows = np.asarray(rows, dtype=np.int64)
        if self.kind == "pixels":
            pixels = torch.from_numpy(self._rows(rows)).reshape(len(rows), *self.image_shape).float()
            return (pixels if self.stored else pixels / 255.0,)
        if self.kind == "pooled":
            return (torch.from_numpy(self._rows(rows)).float(),)
        if self.kind == "text":
            return (self.data[rows],)
        offsets = self._offsets()
        starts = offsets[rows]
        lengths = torch.from_numpy(np.minimum(offsets[rows + 1] - starts, self.max_tokens))
        width = int(lengths.max())
        position = torch.arange(width)
        mask = position[None, :] < lengths[:, None]
        # padding holds the states that follow the row (times 0), exactly as an index into the flat array gave
        x = torch.from_numpy(self._spans(starts, width)).float()
        return x.mul_(mask[..., None]), mask  # in place: one [b, width, D] float32 buffer per batch, not two

    def prefetch(
        self, batches: Iterable[np.ndarray], depth: int = PREFETCH_DEPTH, device=None, pin: bool | None = None
    ) -> Iterator[tuple[np.ndarray, tuple[torch.Tensor, ...]]]:
        """(rows, model arguments) for each batch of rows, in order, read `depth` batches ahead on a
        background thread. With a CUDA `device`, batches are pinned on that thread and copied without
        blocking (a pinned block is not reused before its copy ends: torch's host allocator records it)."""
        device = None if device is None else torch.device(device)
        pin = (device is not None and device.type == "cuda") if pin is None else pin

        if self.kind == "text":  # sparse counts stay on the host: the model that reads them runs there
            device, pin = None, False

        def load(rows):
            tensors = self.batch(rows)
            return tuple(t.pin_memory() for t in tensors) if pin else tensors

        for rows, tensors in prefetched(batches, load, depth):
            if device is not None:
                tensors = tuple(t.to(device, non_blocking=pin) for t in tensors)
            yield rows, tensors


def prefetched(items: Iterable, load: Callable, depth: int = PREFETCH_DEPTH) -> Iterator[tuple]:
    """(item, load(item)) for each item, in order, load() running up to `depth` items ahead on a thread.
    At most depth + 2 results exist at once (queued, being loaded, being used). An error in load() is raised
    here; leaving the loop early stops the thread."""
    if depth <= 0:
        for item in items:
            yield item, load(item)
        return
    results: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(message) -> bool:
        while not stop.is_set():
            try:
                results.put(message, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work():
        try:
            for item in items:
                if stop.is_set() or not put(("item", (item, load(item)))):
                    return
        except BaseException as e:  # raised again in the consumer's thread
            put(("error", e))
            return
        put(("end", None))

    thread = threading.Thread(target=work, name="drift-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            tag, value = results.get()
            if tag == "end":
                return
            if tag == "error":
                raise value
            yield value
    finally:
        stop.set()
        thread.join()


def open_inputs(kind: str, path: Path, max_tokens: int = 512) -> Inputs:
    """Inputs read from a feature directory (drift.store.features): pixels, or an encoder's tokens or pooled."""
    files = open_features(path)
    if kind == "pixels":
        pixels = files["pixels"]
        return Inputs("pixels", pixels, image_shape=pixels.shape[1:])
    if kind == "pooled":
        return Inputs("pooled", files["pooled"])
    return Inputs("tokens", files["tokens"], files["offsets"], max_tokens=max_tokens)


def load_inputs(kind: str, table, store=None, max_tokens: int = 512) -> Inputs:
    """Inputs of every row of the slice table, in its row order, held in memory (the report's saliency maps
    read a few rows this way; train and evaluate read the feature files, open_inputs)."""
    if kind == "pixels":
        images = table_images(table)
        return Inputs("pixels", images.reshape(len(images), -1), image_shape=images.shape[1:])
    keys = table.column("key")  # an Arrow column: the store looks keys up without Python strings
    if kind == "pooled":
        return Inputs("pooled", store.read_pooled(keys))
    flat, offsets = store.read_tokens(keys)
    return Inputs("tokens", flat, offsets, max_tokens=max_tokens)


def shuffle_draws(how: str) -> torch.Generator | None:
    """train.shuffle_draws after-init: the global torch generator's stream from here on (right after the
    model's init), as a generator of its own: what a DataLoader without a generator draws each epoch's seeds
    from, apart from the draws of dropout on a CPU (theirs ran on a GPU's generator). seed-epoch: None."""
    if how != "after-init":
        return None
    generator = torch.Generator()
    generator.set_state(torch.get_rng_state())
    return generator


def uniform_batches(
    rows: np.ndarray, batch_size: int, seed: int, epoch: int, draws: torch.Generator | None = None
) -> list[np.ndarray]:
    """Epoch `epoch`'s batches as a shuffling torch DataLoader over `rows` cuts them (train.batch_order
    uniform, the authors' runs): the loader's iterator first draws its base seed, then RandomSampler draws
    torch.randperm(len(rows)); cut in order, the last batch smaller. The loader's generator is seeded seed +
    epoch, or, given `draws` (shuffle_draws), the loader has none: both draws come from `draws`, carried
    across epochs, the second seeding the permutation's own generator. (tests/run/test_paper_presets.py checks
    both against torch's DataLoader itself.)"""
    if draws is None:
        generator = torch.Generator().manual_seed(int(seed) + int(epoch))
        torch.empty((), dtype=torch.int64).random_(generator=generator)  # the iterator's base seed
    else:
        torch.empty((), dtype=torch.int64).random_(generator=draws)  # the iterator's base seed
        sampler_seed = int(torch.empty((), dtype=torch.int64).random_(generator=draws).item())
        generator = torch.Generator().manual_seed(sampler_seed)
    rows = np.asarray(rows)[torch.randperm(len(rows), generator=generator).numpy()]
    return [rows[i : i + batch_size] for i in range(0, len(rows), batch_size)]


def epoch_batches(
    rows: np.ndarray,
    lengths: np.ndarray | None,
    batch_size: int,
    rng: np.random.Generator,
    order: str = "bucketed",
    seed: int = 0,
    epoch: int = 0,
    draws: torch.Generator | None = None,
) -> list[np.ndarray]:
    """One epoch's batches as train.batch_order says: bucketed (length_bucketed_batches, drawn from `rng`) or
    uniform (uniform_batches from `seed` and `epoch`, or from `draws`; `rng` untouched)."""
    if order == "uniform":
        return uniform_batches(rows, batch_size, seed, epoch, draws)
    return length_bucketed_batches(rows, lengths, batch_size, rng)


def length_bucketed_batches(
    rows: np.ndarray, lengths: np.ndarray | None, batch_size: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Shuffled batches; for token inputs rows of similar length share a batch (little padding), while the
    order of batches stays random. Pools of 50 batches are sorted by length, then cut into batches."""
    rows = rows[rng.permutation(len(rows))]
    if lengths is None:
        return [rows[i : i + batch_size] for i in range(0, len(rows), batch_size)]
    batches = []
    pool = batch_size * 50
    for p in range(0, len(rows), pool):
        chunk = rows[p : p + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]

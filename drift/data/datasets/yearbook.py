"""Yearbook (paper Section 3.1.1, Appendix B.1): classify the sex of US high-school senior portraits,
1905-2013.

Source (Ginosar et al.): the folder `faces_aligned_small_mirrored_co_aligned_cropped_cleaned/` of `F/` and
`M/` grayscale PNGs, or its `.tar.gz` read as a stream, nothing extracted (when the folder is absent, as
`drift fetch yearbook` leaves it). cfg (params.yaml `yearbook`): source, url and sha256 (drift.data.fetch
only), strict, row_id. Record: id = the file name (`row_id: name`; a name in both F/ and M/ is one id, its
second row quarantined as duplicate_id) or `F/<name>` / `M/<name>` (`row_id: path`, the authors': both kept),
time = January 1st of the year that starts the file name, label = 0 for F/, 1 for M/, image = (3, 32, 32):
resized to 32x32 (`resize`: bilinear with Pillow's antialiasing, or area), gray in three channels, stored as
`pixels` says (uint8, the area means rounded; or float32, area only). Quarantine reasons: bad_file_name,
not_in_F_or_M, undecodable_image, path_outside_root (a symlink out of the folder, or a folder swapped for one,
never read), not_a_file (a FIFO or a device, never read), image_too_large (over `max_image_bytes`, never read).
"""

from __future__ import annotations

import datetime as dt
import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, ClassVar

import numpy as np
from PIL import Image
from pydantic import model_validator

from drift.core.dataset_registry import CORPUS_INPUTS
from drift.core.errors import DriftError
from drift.core.params import CorpusParams, PositiveInt, SliceSpec, choice, slices_field
from drift.data.datasets._io import NotAFile, OutsideRoot, missing_source, open_inside
from drift.data.ledger import Ledger

# the archive as the paper's authors share it (learning-mechanisms/drift-happens,
# drift_happens/dataset/yearbook/const.py)
PUBLIC_URL = "https://e.pcloud.link/publink/show?code=XZ6lzcZJymgTsmpuDk25aekFFPR2fL7VPfV"
RESIZE = ("bilinear", "area")  # yearbook.resize
PIXELS = ("uint8", "float32")  # yearbook.pixels
ROW_IDS = ("name", "path")  # yearbook.row_id
# yearbook.max_image_bytes: the portraits are PNGs of a few KB; a file or member over 64 MiB is no portrait
MAX_IMAGE_BYTES = 64 << 20


class YearbookParams(CorpusParams):
    """params.yaml `yearbook:`."""

    SECTION: ClassVar[str] = "yearbook"
    source: str = CORPUS_INPUTS["yearbook"]  # datasets.yearbook.input when the run has it
    url: str | None = PUBLIC_URL
    # to 32x32: bilinear, or area (the mean of the pixels each covers)
    resize: Annotated[str, choice(*RESIZE)] = "bilinear"
    # the stored values: uint8 (the area means rounded, at most 0.5 off), or float32 (the means as they are)
    pixels: Annotated[str, choice(*PIXELS)] = "uint8"
    slices: SliceSpec = slices_field(unit="year", start=1905, end=2014)
    min_samples: PositiveInt = 1
    max_image_bytes: PositiveInt = (
        MAX_IMAGE_BYTES  # a larger file or archive member: image_too_large, never read
    )
    # a row's id: name (the file name), or path ("F/<name>" or "M/<name>", the file's path below the folder
    # that holds F/ and M/, as the authors key their rows: a name in both F/ and M/ gives two rows, not a
    # duplicate_id)
    row_id: Annotated[str, choice(*ROW_IDS)] = "name"

    @model_validator(mode="after")
    def _float_pixels_need_area(self):
        if self.pixels == "float32" and self.resize != "area":
            raise DriftError(
                "yearbook.pixels float32 keeps the area means unrounded: set yearbook.resize: area "
                "(bilinear resizes in uint8), or yearbook.pixels: uint8"
            )
        return self


PARAMS = YearbookParams
# drift plan: the paper's Table 1 row (Appendix B) and its corpus size
PAPER_COST = {"model_seed_runs": 105, "train_gpu_h": 23.7, "eval_gpu_h": 9.3, "node_h": 8.2}
PAPER_ROWS = {
    "rows": 37_921,
    "non_empty": 104,
    "source": "paper: 37,921 portraits (Section 3.1.1), K = 104 non-empty years (Appendix B.1)",
}
LABELS = ["F", "M"]
SIZE = 32


def label_names(cfg) -> list[str]:
    return list(LABELS)


def archive_path(source: Path) -> Path:
    """Where the .tar.gz of a source lives: the source itself if it is one, else `<source>.tar.gz`."""
    if source.name.endswith((".tar.gz", ".tgz")):
        return source
    return source.with_name(source.name + ".tar.gz")


def year_of(name: str) -> dt.datetime | None:
    """'1950_Ohio_Cleveland_Lincoln_3-4.png' -> datetime(1950, 1, 1); None if it does not start with a year."""
    if not name.endswith(".png"):
        return None
    try:
        return dt.datetime(int(name.split("_")[0]), 1, 1)
    except ValueError:  # not an integer, or not a valid year
        return None


def decode(data: bytes, resize: str = "bilinear", pixels: str = "uint8") -> np.ndarray | None:
    """PNG bytes -> (3, 32, 32) of dtype `pixels` (float32: the area means unrounded; a 32x32 file as it is),
    or None if Pillow cannot decode all of it (truncated, not an image)."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()  # decode now: a truncated file fails here, not later
            rgb = img.convert("RGB")  # gray replicated into 3 channels; a color file keeps its colors
            if rgb.size != (SIZE, SIZE) and resize == "area":
                return area_resize(np.asarray(rgb, dtype=np.uint8), pixels)
            if rgb.size != (SIZE, SIZE):
                rgb = rgb.resize((SIZE, SIZE), Image.Resampling.BILINEAR)
            return np.ascontiguousarray(np.asarray(rgb, dtype=np.uint8).transpose(2, 0, 1)).astype(
                pixels, copy=False
            )
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return None


def area_overlaps(n_in: int, n_out: int) -> np.ndarray:
    """int64 [n_out, n_in]: how much of each input pixel each output pixel covers, counted in 1/n_out of a
    pixel (output pixel y spans [y * n_in, (y + 1) * n_in), input pixel h [h * n_out, (h + 1) * n_out)); each
    row sums to n_in."""
    lo = np.arange(n_out, dtype=np.int64)[:, None] * n_in
    left = np.arange(n_in, dtype=np.int64)[None, :] * n_out
    return np.clip(np.minimum(lo + n_in, left + n_out) - np.maximum(lo, left), 0, None)


def area_weights(n_in: int, n_out: int) -> np.ndarray:
    """[n_out, n_in]: the share of each input pixel in each output pixel, by the length they overlap."""
    return area_overlaps(n_in, n_out) / n_in


def area_resize(pixels: np.ndarray, dtype: str = "uint8") -> np.ndarray:
    """[H, W, 3] uint8 -> [3, 32, 32], each output pixel the mean of the input area it covers (OpenCV's
    INTER_AREA when shrinking): the exact sum of the overlaps times the pixels over H * W, divided once in
    float64; rounded to the nearest integer, half to even (uint8), or to the nearest float32 (float32, the
    authors' stored values)."""
    oy, ox = area_overlaps(pixels.shape[0], SIZE), area_overlaps(pixels.shape[1], SIZE)
    # integers below 2^53 at every step (at most 255 * H * W): exact in float64, summed in any order
    total = oy.astype(np.float64) @ pixels.transpose(2, 0, 1).astype(np.float64) @ ox.T.astype(np.float64)
    mean = total / (pixels.shape[0] * pixels.shape[1])
    if dtype == "float32":
        return np.ascontiguousarray(np.clip(mean, 0, 255).astype(np.float32))
    return np.ascontiguousarray(np.clip(np.rint(mean), 0, 255).astype(np.uint8))


def record(
    where: str,
    label_dir: str,
    data: bytes,
    ledger: Ledger,
    resize: str = "bilinear",
    pixels: str = "uint8",
    row_id: str = "name",
) -> dict | None:
    """The record for one file (where = its path), or None after quarantining it. Its id is the file name, or
    with `row_id` "path" `<label_dir>/<file name>`: F or M, then a name holding no slash, so never a path that
    leaves the folder."""
    name = where.replace("\\", "/").rsplit("/", 1)[-1]
    if label_dir not in LABELS:
        ledger.quarantine(where, "not_in_F_or_M")
        return None
    time = year_of(name)
    if time is None:
        ledger.quarantine(where, "bad_file_name")
        return None
    image = decode(data, resize, pixels)
    if image is None:
        ledger.quarantine(where, "undecodable_image")
        return None
    row = name if row_id == "name" else f"{label_dir}/{name}"
    return {"id": row, "time": time, "label": LABELS.index(label_dir), "image": image}


def too_large(size: int, limit: int) -> str:
    return f"{size} bytes: over yearbook.max_image_bytes ({limit}); raise it if the image is genuine"


def read_folder(
    folder: Path,
    ledger: Ledger,
    resize: str = "bilinear",
    pixels: str = "uint8",
    max_bytes: int = MAX_IMAGE_BYTES,
    row_id: str = "name",
) -> Iterator[dict]:
    dirs = [folder / d for d in LABELS if (folder / d).is_dir()]
    if not dirs:
        raise DriftError(
            f"yearbook: {folder} has no F/ or M/ folder: point yearbook.source at "
            f"faces_aligned_small_mirrored_co_aligned_cropped_cleaned/ or its .tar.gz"
        )
    base = folder.resolve()
    for d in dirs:
        for path in sorted(d.iterdir()):  # sorted: the same order on every machine
            if path.is_dir() or not path.exists():  # a folder, a dangling link: no image
                continue
            data = _file_bytes(path, base, ledger, max_bytes)
            if data is not None:
                rec = record(str(path), d.name, data, ledger, resize, pixels, row_id)
                if rec is not None:
                    yield rec


def _file_bytes(path: Path, base: Path, ledger: Ledger, max_bytes: int) -> bytes | None:
    """A file's bytes, opened inside `base` (a symlink out of the folder: never read), or None after
    quarantining it (path_outside_root, not_a_file, image_too_large)."""
    resolved = path.resolve()
    try:
        if base not in resolved.parents:
            raise OutsideRoot(f"{path} resolves outside {base}")
        with io.BufferedReader(open_inside(resolved, base)) as f:
            size = os.fstat(f.fileno()).st_size
            data = f.read(max_bytes + 1) if size <= max_bytes else b""
        if size > max_bytes or len(data) > max_bytes:
            ledger.quarantine(str(path), "image_too_large", too_large(max(size, len(data)), max_bytes))
            return None
        return data
    except OutsideRoot:
        ledger.quarantine(str(path), "path_outside_root")
    except NotAFile:
        ledger.quarantine(str(path), "not_a_file")
    return None


def read_archive(
    archive: Path,
    ledger: Ledger,
    resize: str = "bilinear",
    pixels: str = "uint8",
    max_bytes: int = MAX_IMAGE_BYTES,
    row_id: str = "name",
) -> Iterator[dict]:
    try:
        # "r|gz": a forward-only stream, one member in memory at a time (at most max_bytes), no extraction to
        # disk
        with tarfile.open(archive, mode="r|gz") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                where = f"{archive.name}:{member.name}"
                if member.size > max_bytes:  # skipped unread: the stream decompresses past it in small blocks
                    ledger.quarantine(where, "image_too_large", too_large(member.size, max_bytes))
                    continue
                parts = member.name.split("/")
                label_dir = parts[-2] if len(parts) >= 2 else ""
                stream = tar.extractfile(member)
                assert stream is not None  # extractfile returns None only for a member that is not a file
                rec = record(where, label_dir, stream.read(max_bytes), ledger, resize, pixels, row_id)
                if rec is not None:
                    yield rec
    except (tarfile.TarError, EOFError, OSError) as e:  # a truncated or corrupt archive stops the read
        raise DriftError(
            f"yearbook: cannot read {archive}: {e}; delete it and run `drift fetch yearbook` again"
        ) from e


def read(cfg: YearbookParams, ledger: Ledger) -> Iterator[dict]:
    source = Path(cfg.source)
    if source.is_dir():
        yield from read_folder(source, ledger, cfg.resize, cfg.pixels, cfg.max_image_bytes, cfg.row_id)
    elif archive_path(source).is_file():
        yield from read_archive(
            archive_path(source), ledger, cfg.resize, cfg.pixels, cfg.max_image_bytes, cfg.row_id
        )
    else:
        raise missing_source("yearbook", source, "the Yearbook folder (with F/ and M/) or its .tar.gz")


def download_targets(cfg) -> list[tuple[str, Path]]:
    """`drift fetch yearbook`: the archive's (url, destination)."""
    if not cfg.url:
        raise DriftError(
            "yearbook: no download URL: set yearbook.url in params.yaml to the URL of "
            "faces_aligned_small_mirrored_co_aligned_cropped_cleaned.tar.gz"
        )
    return [(cfg.url, archive_path(Path(cfg.source)))]


def raw_inputs(cfg) -> list[Path]:
    """`drift track yearbook`: the folder with F/ and M/, or its .tar.gz."""
    source = Path(cfg.source)
    if source.is_dir():
        return [source]
    if archive_path(source).is_file():
        return [archive_path(source)]
    raise missing_source("yearbook", source, "the Yearbook folder (with F/ and M/) or its .tar.gz")

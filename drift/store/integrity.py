"""Durable, checksummed files: what the caches write lands whole or not at all, and is served only when it
still holds what was written.

`write_atomic` writes a temporary file beside the target, fsyncs it, renames it over the target and fsyncs the
directory: a killed run, a full disk or a power cut leaves the old file or the new one, never part of one
(cells, small and many, fsync their directories once per task instead: docs/decisions).
`sha256_file` is the plain sha256 of a file (`sha256sum` gives the same), read in large blocks."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from drift.core.objectstore import ObjectPath

BLOCK = 8 << 20


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in directory `path` durable (on object storage a PUT already is)."""
    if isinstance(path, ObjectPath):
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, durable: bool = True) -> None:
    """`data` at `path`, whole or not at all. durable=False skips both fsyncs (a caller that checksums what it
    reads and fsyncs the directories once for many small files: a torn file after a power cut fails its
    checksum)."""
    if isinstance(path, ObjectPath):
        path.write_bytes(data)  # one PUT: the object appears whole or not at all
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()

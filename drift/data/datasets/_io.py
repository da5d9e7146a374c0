"""Reading helpers shared by the real-corpus readers: JSON-lines streaming, time parsing, source checks, and
files named by data opened only inside their root and only when regular (open_inside: never a FIFO, never
through a symlink that appeared after the path was checked)."""

from __future__ import annotations

import datetime as dt
import email.utils
import errno
import io
import os
import stat
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from drift.core.errors import DriftError

loads: Callable[[bytes | str], Any]
try:  # orjson parses JSON lines several times faster than json; json is the fallback
    import orjson

    loads = orjson.loads
except ImportError:  # pragma: no cover - depends on the environment
    import json

    loads = json.loads

EPOCH = dt.datetime(1970, 1, 1)
MONTHS = {
    m: i
    for i, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], start=1
    )
}
BUFFER = 1 << 20  # 1 MiB reads: fewer syscalls, memory stays flat


class DamagedFile(Exception):
    """A compressed file that ends early (a cut download) or does not decompress: raised by iter_json_lines
    and drift.data.datasets._fast.iter_chunks after every byte before the damage was served, so a reader keeps
    its readable rows and quarantines the file by name with `reason` (Ledger.damaged)."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = Path(path), reason


class _TolerantGzip(io.RawIOBase):
    """A .gz stream (concatenated members too) that ends at the damage instead of raising: zlib is fed
    INPUT bytes at a time, so every byte decompressed before a cut or a corrupt block is served; why it
    stopped is kept in `damage` for the reader to report. zlib checks each member's CRC and length."""

    INPUT = 4 << 10  # a corrupt block loses at most the rows of these bytes; 4 KiB costs no speed (measured)

    def __init__(self, path: Path):
        self._file = open(path, "rb")
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._in = b""  # compressed bytes not yet given to zlib
        self._started = False  # the current member has begun
        self.damage: str | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self.damage is None:
            if not self._in:
                out = self._z.decompress(b"", len(buffer)) if self._started and not self._z.eof else b""
                if out:  # output zlib held back for want of room
                    buffer[: len(out)] = out
                    return len(out)
                self._in = self._file.read(self.INPUT)
                if not self._in:
                    if self._started and not self._z.eof:
                        self.damage = (
                            "truncated: the compressed stream ends before its end marker (a cut download?)"
                        )
                    return 0
            if self._z.eof:  # a member ended and bytes follow: the next member, or zero padding
                if not self._in.strip(b"\0"):
                    self._in = b""
                    continue
                self._z, self._started = zlib.decompressobj(16 + zlib.MAX_WBITS), False
            try:
                out = self._z.decompress(self._in, len(buffer))
            except zlib.error as e:  # bad data, a bad header, a CRC or length mismatch
                self.damage = f"corrupt: {' '.join(str(e).split())}"
                return 0
            self._started = True
            self._in = self._z.unused_data if self._z.eof else self._z.unconsumed_tail
            if out:
                buffer[: len(out)] = out
                return len(out)
        return 0

    def close(self) -> None:
        self._file.close()
        super().close()


def open_binary(path: Path):
    """A binary file object for a plain or gzip-compressed file (by the .gz suffix); a damaged .gz reads up to
    the damage (raise_damage says what it was)."""
    if path.suffix.lower() == ".gz":
        return io.BufferedReader(_TolerantGzip(path), buffer_size=BUFFER)
    return open(path, "rb", buffering=BUFFER)


def damage(f) -> str | None:
    """Why a file object of open_binary stopped early (read to its end), None if it did not."""
    return getattr(f.raw, "damage", None)


def raise_damage(f, path: Path) -> None:
    """After a file object of open_binary has been read to its end: DamagedFile if its data stopped early."""
    reason = damage(f)
    if reason is not None:
        raise DamagedFile(path, reason)


class OutsideRoot(ValueError):
    """A path named by data that leaves its root: quarantined as path_outside_root, never opened."""


class NotAFile(ValueError):
    """A path named by data that is no regular file (a FIFO, a device, a folder): quarantined as not_a_file,
    never read."""


class RootedFile(io.FileIO):
    """A regular file open_inside opened through its folder's descriptor, shown as its path."""

    def __str__(self) -> str:
        return str(self.name)


def open_inside(path: Path, base: Path) -> RootedFile:
    """The regular file `path` (resolved, inside the resolved folder `base`), opened from `base`'s descriptor
    one component at a time with O_NOFOLLOW, so a component swapped for a symlink after the path was checked
    raises OutsideRoot instead of leading out of `base`; the file is opened without blocking and anything but
    a regular file (a FIFO, a device, a folder) raises NotAFile before a byte is read."""
    *folders, name = path.relative_to(base).parts
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(base, os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY)
    try:
        for folder in folders:
            fd, parent = os.open(folder, flags | os.O_DIRECTORY, dir_fd=fd), fd
            os.close(parent)
        fd, parent = os.open(name, flags | os.O_NONBLOCK, dir_fd=fd), fd
        os.close(parent)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotAFile(f"{path} is no regular file")
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.ELOOP, errno.ENOTDIR):  # a symlink where the check saw a folder or the file
            raise OutsideRoot(f"{path} changed into a symlink after it was checked") from None
        raise
    except NotAFile:
        os.close(fd)
        raise
    return RootedFile(str(path), "rb", opener=lambda _name, _flags: fd)


def iter_json_lines(path: Path) -> Iterator[tuple[int, bytes, object]]:
    """Streams (line number, raw line, parsed value or None if malformed) from a JSON-lines file.

    Blank lines are not rows and are skipped; line numbers stay the file's own (1-based), so a
    quarantine `where` of "file:17" points at line 17 in an editor. A damaged .gz: its lines up to the damage
    (the cut last one is malformed), then DamagedFile.
    """
    with open_binary(path) as f:
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip() or not raw.endswith(b"\n") and damage(f):
                continue  # a blank line; or the cut end of a damaged stream, no row: DamagedFile says so
            try:
                value = loads(raw)
            except ValueError:  # orjson.JSONDecodeError, json.JSONDecodeError and UnicodeDecodeError all are
                value = None
            yield lineno, raw, value
        raise_damage(f, path)


def raw_text(raw: bytes) -> str:
    """The raw line as text, for the ledger's bad_rows."""
    return raw.decode("utf-8", errors="replace").rstrip("\n")


def normalize_ws(s: str) -> str:
    """Collapses runs of whitespace (arXiv abstracts are hard-wrapped with indents) into single spaces."""
    return " ".join(s.split())


def from_epoch_ms(ms) -> dt.datetime | None:
    """Milliseconds since the epoch -> naive UTC datetime; None if not a number or out of range."""
    if isinstance(ms, bool) or not isinstance(ms, (int, float, str)):
        return None
    try:
        return EPOCH + dt.timedelta(milliseconds=int(ms) if isinstance(ms, str) else ms)
    except (ValueError, OverflowError):  # "abc", NaN, inf, year beyond 9999
        return None


def parse_rfc2822(s) -> dt.datetime | None:
    """'Mon, 2 Apr 2007 19:18:42 GMT' -> naive UTC datetime; None if unparseable.

    The arXiv snapshot always writes this exact GMT form, so a split is tried first (millions of rows);
    anything else goes through the standard library's general parser.
    """
    if not isinstance(s, str):
        return None
    parts = s.split()
    if len(parts) == 6 and parts[5] == "GMT" and parts[2] in MONTHS:
        try:
            h, m, sec = parts[4].split(":")
            return dt.datetime(int(parts[3]), MONTHS[parts[2]], int(parts[1]), int(h), int(m), int(sec))
        except ValueError:
            return None
    try:
        t = email.utils.parsedate_to_datetime(s)
    except (TypeError, ValueError, IndexError):
        return None
    if t.tzinfo is not None:
        t = t.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return t


def parse_date(s) -> dt.datetime | None:
    """'2008-11-13' -> datetime(2008, 11, 13); an ISO timestamp, with an offset or `Z` converted to naive UTC
    ('2020-01-05T10:00:00+02:00' -> 08:00); None if unparseable."""
    if not isinstance(s, str):
        return None
    try:
        return dt.datetime.strptime(s.strip(), "%Y-%m-%d")
    except ValueError:
        pass
    try:
        t = dt.datetime.fromisoformat(s.strip())
    except ValueError:
        return None
    return t.astimezone(dt.timezone.utc).replace(tzinfo=None) if t.tzinfo is not None else t


def missing_source(dataset: str, path: Path, what: str) -> DriftError:
    """The one-line error for a source that is not on disk: where to put it, or how to fetch it."""
    return DriftError(
        f"{dataset}: {path} not found: put {what} there (or point params.yaml `datasets.{dataset}.input` at it), "
        f"or download it with `drift fetch {dataset}`"
    )

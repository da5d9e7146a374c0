"""One-line user errors: a stage or the CLI prints the message and exits 2, no traceback."""
import difflib
import errno
import shutil
from pathlib import Path


class DriftError(Exception):
    """A problem the user can fix: the message names the problem and the fix, on one line."""


def close_matches(name: str, valid, prefix: str = "") -> str:
    """'unknown X' helper: the close matches first (each written with `prefix`, e.g. "train."), then every valid
    name."""
    valid = sorted(valid)
    near = difflib.get_close_matches(name, valid, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(prefix + n for n in near)}? " if near else ""
    return f"{hint}valid: {', '.join(valid)}"


def is_disk_full(error: BaseException) -> bool:
    """A write that failed for want of space: OSError ENOSPC, or Lance's `LanceError(IO): No space left on
    device` (an OSError without an errno)."""
    return isinstance(error, OSError) and (error.errno in (errno.ENOSPC, errno.EDQUOT)
                                           or "No space left on device" in str(error))


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024


def disk_full(path, setting: str | None = None, needed: int | None = None) -> DriftError:
    """The one line for a full disk: the path written, the bytes that write needed (when known) and what is free
    there, and the setting that moves it (`setting`: e.g. "embed.cache_dir (or $DRIFT_CACHE_DIR)"; None for a
    workspace path, which only freeing space helps)."""
    path = Path(path)
    where = next((p for p in (path, *path.parents) if p.exists()), Path("."))
    free = shutil.disk_usage(where).free
    need = f"{_size(needed)} needed, " if needed else ""
    move = f", or set {setting} to a disk with room" if setting else ""
    return DriftError(f"disk full writing {path} ({need}{_size(free)} free there): free space on that disk{move}")

"""One-line user errors: a stage or the CLI prints the message and exits 2, no traceback."""

import difflib
import errno
import re
import shutil
from pathlib import Path


class DriftError(Exception):
    """A problem the user can fix: the message names the problem and the fix, on one line."""


def close_matches(name: str, valid, prefix: str = "") -> str:
    """'unknown X' helper: the close matches first (each written with `prefix`, e.g. "train."), then every
    valid name."""
    valid = sorted(valid)
    near = difflib.get_close_matches(name, valid, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(prefix + n for n in near)}? " if near else ""
    return f"{hint}valid: {', '.join(valid)}"


def is_disk_full(error: BaseException) -> bool:
    """A write that failed for want of space: OSError ENOSPC, or Lance's `LanceError(IO): No space left on
    device` (an OSError without an errno)."""
    return isinstance(error, OSError) and (
        error.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left on device" in str(error)
    )


def _size(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def disk_full(path, setting: str | None = None, needed: int | None = None) -> DriftError:
    """The one line for a full disk: the path written, the bytes that write needed (when known) and what is
    free there, and the setting that moves it (`setting`: e.g. "embed.cache_dir (or $DRIFT_CACHE_DIR)"; None
    for a workspace path, which only freeing space helps)."""
    path = Path(path)
    where = next((p for p in (path, *path.parents) if p.exists()), Path("."))
    free = shutil.disk_usage(where).free
    need = f"{_size(needed)} needed, " if needed else ""
    move = f", or set {setting} to a disk with room" if setting else ""
    return DriftError(
        f"disk full writing {path} ({need}{_size(free)} free there): free space on that disk{move}"
    )


# ---------------------------------------------------------------- names

NAME_RULE = "letters, digits, '-', '_' and '.', starting with a letter, digit or '_'"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
NAME_MAX = 100  # characters: a name becomes a file name under several folders


DATASET_RULE = "letters, digits, '-' and '_', starting with a letter, digit or '_'"
_DATASET = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")


def check_name(value, field: str, dots: bool = True) -> str:
    """`value` if it is an identifier (dataset, model, encoder, preset names): NAME_RULE, at most NAME_MAX
    characters; else a one-line DriftError naming `field`. Such a name is one path component that cannot leave
    its folder (no '/', no '..', not '.') and one shell word that needs no quoting (no ';', '$', space or
    quote). `dots=False` (dataset names, DATASET_RULE): no '.' either, since DVC reads `params: [a.b]` as key
    b of a."""
    rule, pattern = (NAME_RULE, _NAME) if dots else (DATASET_RULE, _DATASET)
    if not isinstance(value, str) or len(value) > NAME_MAX or not pattern.fullmatch(value):
        raise DriftError(
            f"{field}: {value!r} is not a valid name: use {rule} (at most {NAME_MAX} characters)"
        )
    return value


def inside(path, root, what: str = "path") -> Path:
    """`path` resolved (symlinks followed), after checking it stays inside `root` (resolved too); else a
    one-line DriftError naming both."""
    resolved, base = Path(path).resolve(), Path(root).resolve()
    if resolved != base and base not in resolved.parents:
        raise DriftError(f"{what} {path} resolves to {resolved}, outside {base}: write inside it")
    return resolved

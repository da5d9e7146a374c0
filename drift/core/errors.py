"""One-line user errors: a stage or the CLI prints the message and exits 2, no traceback."""
import difflib


class DriftError(Exception):
    """A problem the user can fix: the message names the problem and the fix, on one line."""


def close_matches(name: str, valid, prefix: str = "") -> str:
    """'unknown X' helper: the close matches first (each written with `prefix`, e.g. "train."), then every valid
    name."""
    valid = sorted(valid)
    near = difflib.get_close_matches(name, valid, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(prefix + n for n in near)}? " if near else ""
    return f"{hint}valid: {', '.join(valid)}"

"""Ctrl-C before the heavy imports: one line and exit 130, as a later Ctrl-C gives.

A stage script or the `drift` command calls `exit_on_interrupt` first, before it imports torch, polars or
Lance (a second or more); until `run_stage` or the CLI's dispatch puts Python's own handler back, SIGINT
prints "<what>: interrupted; re-run resumes" on stderr and exits 130 at once: nothing has been written yet.
Only the standard library is imported here."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path


def stage_name(argv: list[str] | None = None) -> str:
    """The running stage as DVC names it ($DVC_STAGE, e.g. train@sotu), else the script and its arguments."""
    argv = sys.argv if argv is None else argv
    return os.environ.get("DVC_STAGE") or "@".join([Path(argv[0]).stem, *argv[1:]])


def command_name(argv: list[str] | None = None) -> str:
    """The `drift` command being run, e.g. "drift init" (its first word that is not an option)."""
    argv = sys.argv if argv is None else argv
    words = [a for a in argv[1:] if not a.startswith("-")]
    return f"drift {words[0]}" if words else "drift"


def exit_on_interrupt(what: str) -> None:
    """From now until `restore_interrupt`: Ctrl-C prints "<what>: interrupted; re-run resumes" and exits 130."""

    def interrupted(signum, frame):
        os.write(2, f"{what}: interrupted; re-run resumes\n".encode())
        os._exit(130)

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not if SIGINT is ignored or taken
        signal.signal(signal.SIGINT, interrupted)


def restore_interrupt() -> None:
    """Python's own Ctrl-C (KeyboardInterrupt), which the stage's or command's handler turns into its one
    line."""
    if signal.getsignal(signal.SIGINT) not in (signal.SIG_IGN, signal.SIG_DFL):
        signal.signal(signal.SIGINT, signal.default_int_handler)

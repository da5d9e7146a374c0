"""What every stage script shares: one-line errors instead of tracebacks (a DriftError's message; a full
disk's path, size and setting; any other exception named with its stage and input, its traceback in a log
file), JSON outputs, and the check that a stage's inputs exist before it starts. What it prints and logs is
redacted (drift.core.secrets): a URL's password or a credential from the environment never reaches a CI log.
"""

from __future__ import annotations

import json
import os
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from drift.core.artefact import Artefact
from drift.core.errors import DriftError, is_disk_full
from drift.core.interrupt import restore_interrupt, stage_name
from drift.core.paths import dataset_paths, main_repository, run_records
from drift.core.secrets import redact

LOGS = ".drift/logs"  # under the main repository: a temporary experiment's copy takes its logs with it


def log_path(stage: str) -> Path:
    """The stage's log file, inside the main repository's LOGS whatever the stage's arguments hold: every
    character outside letters, digits, '@', '.', '_' and '-' (a '/' included) becomes '_'."""
    return main_repository() / LOGS / (re.sub(r"[^A-Za-z0-9@._-]", "_", stage) + ".log")


def _one_line(error: BaseException, limit: int = 300) -> str:
    text = " ".join(redact(str(error)).split()) or "(no message)"  # redacted before a cut can halve a secret
    return f"{type(error).__name__}: {text[:limit]}{'...' if len(text) > limit else ''}"


def _say(line: str) -> None:
    print(redact(line), file=sys.stderr)


def run_stage(main: Callable[[list[str]], None]) -> None:
    """Run a stage's main(argv). A DriftError prints its one line on stderr and exits 2; Ctrl-C prints
    "<stage>: interrupted; re-run resumes" and exits 130; any other exception
    prints one line naming the stage, its input and the log holding the traceback, and exits 1."""
    argv, stage = sys.argv[1:], stage_name()
    # the script's import-time handler (drift.core.interrupt) hands Ctrl-C back to this one
    restore_interrupt()
    try:
        main(argv)
    except DriftError as e:
        _say(f"error: {e}")
        sys.exit(2)
    except (
        KeyboardInterrupt
    ):  # Ctrl-C: what was written is whole (atomic writes), the next run picks up there
        _say(f"{stage}: interrupted; re-run resumes")
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - the stage's one line; the traceback goes to the log
        log = log_path(stage)
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(
                redact(
                    f"stage {stage}, input {' '.join(argv) or '-'}, cwd {os.getcwd()}\n"
                    + "".join(traceback.format_exception(e))
                )
            )
            where = f"traceback in {log}"
        except OSError:  # the disk that is full may be the log's
            where = f"no log written ({log} not writable)"
        if is_disk_full(e):
            path = getattr(e, "filename", None)
            _say(
                f"error: stage {stage}: disk full{f' writing {path}' if path else ''} ({_one_line(e)}): free "
                f"space on that disk, or move what it writes (embed.cache_dir for the caches) ({where})"
            )
            sys.exit(2)
        _say(f"error: stage {stage} (input: {' '.join(argv) or '-'}) failed: {_one_line(e)} ({where})")
        sys.exit(1)


def write_json(path: Path, data) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def write_run(stage: str, file: str, record: Artefact) -> None:
    """The run record of `stage` (drift.core.paths.run_records): what it did, out of git and dvc.lock;
    `record` is the stage's model of it (drift.encoders.embed.EmbedRun, drift.train.train_run.TrainRun,
    drift.evaluate.eval_result.EvaluateRun)."""
    for path in run_records(stage, file):
        record.to_file(path)


# which stage writes each input a later stage reads (drift/core/paths.py names)
WRITTEN_BY = {
    "records": "ingest",
    "slices": "slice",
    "slice_manifest": "slice",
    "embeddings": "embed",
    "models": "train",
    "eval": "evaluate",
}


def require(name: str, *keys: str, root: str | Path = ".") -> dict[str, Path]:
    """Dataset `name`'s paths, after checking that inputs `keys` exist: a stage run before them (after a
    failed upstream stage, say) stops with one line naming what is missing and the stage to run."""
    paths = dataset_paths(name, root)
    for key in keys:
        if not paths[key].exists():
            stage = WRITTEN_BY[key]
            raise DriftError(
                f"{paths[key]} is missing: run `dvc repro {stage}@{name}` first (or `dvc repro`)"
            )
    return paths

"""What a result depends on that params.yaml only names: the files a table's rows point to (`image_encoding:
path`) and the local weights of `embed.weights`. The check stage writes their content digests into files that
ingest and embed depend on (drift/run/checks.py), so replacing an image or a weight file re-runs what it
decides, as a changed input file does.

Contents are hashed (sha256), never trusted from a name or a time; a memo keyed by each file's device, inode,
size, modification and change times (.drift/digests.json under the main repository, as DVC's own state) spares
re-reading unchanged files on every `dvc repro`. Only regular files are read, opened without following a
symlink (a weights folder's links count as the files they name); a path that is not a regular file counts by
what it is, so changing it still changes the digest."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from drift.core.paths import main_repository

MEMO = ".drift/digests.json"
CHUNK = 1 << 22


def _stat_key(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def _content(path: Path, st: os.stat_result) -> str:
    """sha256 of a regular file's bytes, read from a descriptor opened without following a symlink and checked
    to be the file `st` described (a swap between the stat and the open reads nothing else)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(opened.st_mode):
            return "changed-while-read"
        digest = hashlib.sha256()
        while chunk := os.read(fd, CHUNK):
            digest.update(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)


class Digests:
    """File digests with the memo: `file(path)` is the sha256 of a regular file's bytes, or what the path is
    instead ("missing", "not-a-file"); `save()` writes the memo back (atomically; a read-only workspace keeps
    none)."""

    def __init__(self, memo: Path | None = None):
        self.memo_path = memo or main_repository() / MEMO
        try:
            self.memo: dict[str, list[str]] = json.loads(self.memo_path.read_text())
        except (OSError, ValueError):
            self.memo = {}
        self.seen: dict[str, list[str]] = {}

    def file(self, path: Path) -> str:
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            return "missing"
        if not stat.S_ISREG(st.st_mode):
            return "not-a-file"
        key, name = _stat_key(st), str(path)
        known = self.memo.get(name)
        digest = known[1] if known and known[0] == key else _content(path, st)
        self.seen[name] = [key, digest]
        return digest

    def files(self, paths: Iterable[Path], root: Path | None = None) -> str:
        """One sha256 over each path (relative to `root` when given) and its file digest, in sorted order."""
        named = {os.path.relpath(p, root) if root else str(p): Path(p) for p in paths}
        return self._combine(named)

    def tree(self, path: Path) -> str:
        """A file, or every file under a folder (hidden ones too), as `files` hashes them; a symlink counts as
        the file it names (a Hugging Face snapshot's files are links to its blobs)."""
        path = Path(path)
        if not path.is_dir():
            return self._combine({path.name: path.resolve()})
        named = {}
        for folder, dirs, names in os.walk(path):
            dirs.sort()
            for n in names:
                file = Path(folder) / n
                named[os.path.relpath(file, path)] = file.resolve()
        return self._combine(named)

    def _combine(self, named: dict[str, Path]) -> str:
        digest = hashlib.sha256()
        for shown in sorted(named):
            digest.update(f"{shown}\0{self.file(named[shown])}\n".encode())
        return digest.hexdigest()

    def save(self) -> None:
        """Keep the memo of the files digested by this run (a file no longer used drops out)."""
        if not self.seen or self.seen == self.memo:
            return
        try:
            self.memo_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.memo_path.with_name(self.memo_path.name + ".tmp")
            tmp.write_text(json.dumps(self.seen, sort_keys=True))
            os.replace(tmp, self.memo_path)
        except OSError:
            pass  # a memo is only a saving

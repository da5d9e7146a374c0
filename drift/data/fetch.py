"""Downloads of the real corpora, for users with a network (`drift fetch <dataset>`); nothing else downloads.
Each download is registered with DVC, so `dvc push` / `dvc pull` carry the raw data and `dvc update` notices a
new upstream version; `drift track <dataset>` registers raw files a user put there by hand.

`fetch` resumes (bytes go to `<dest>.part`; a new attempt asks for the rest with a Range request), checks the
sha256 when one is given, retries network errors and bounds every connect and read; standard-library urllib
only. After the download `dvc import-url --no-download <url> <dest>` writes `<dest>.dvc` and `dvc commit`
hashes the file into the DVC cache: the `.dvc` file a plain `dvc import-url` writes. A file there before is
imported only if its size is the server's (else `dvc add`); outside a DVC repository files are only
downloaded, with a note."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlparse

from drift.core.dataset_registry import DATASETS
from drift.core.errors import DriftError
from drift.data.datasets import dataset_params, get_dataset

CHUNK = 1 << 20
USER_AGENT = "drift-fetch/0.1 (+urllib)"
RETRY_WAIT = 2.0  # seconds, times the attempt number


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _progress(enabled: bool, name: str):
    """A Rich progress bar on stderr (stdout stays clean under dvc repro), or None."""
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    )


class _Transient(Exception):
    """A failure worth retrying (connection dropped, timeout, 5xx); the .part is kept for resuming."""


def _download(url: str, part: Path, timeout: float, progress) -> None:
    """One attempt: appends the rest of `url` to `part`. Raises _Transient or DriftError."""
    offset = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": USER_AGENT}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        resp = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and offset:
            # nothing left to send: the .part may already be whole ("bytes */<size>"); if not, start over
            whole = (e.headers.get("Content-Range") or "").rpartition("/")[2]
            if whole.isdigit() and int(whole) == offset:
                return
            part.unlink()  # a stale .part (the file changed on the server): start over
            return _download(url, part, timeout, progress)
        if e.code >= 500:
            raise _Transient(f"HTTP {e.code} {e.reason}") from e
        raise DriftError(f"download failed: {url}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError) as e:  # DNS, refused, timeout (socket.timeout is an OSError)
        raise _Transient(str(getattr(e, "reason", e))) from e

    with resp:
        if offset and resp.status == 206:
            # check the server resumed where we asked ("bytes <start>-<end>/<size>")
            start = (resp.headers.get("Content-Range") or "").removeprefix("bytes ").split("-")[0]
            if start != str(offset):
                resp.close()
                part.unlink()
                return _download(url, part, timeout, progress)
            mode = "ab"
        else:  # 200: the server ignored the Range header (or there was none): the whole file comes again
            offset, mode = 0, "wb"
        length = resp.headers.get("Content-Length")
        total = offset + int(length) if length and length.isdigit() else None

        task = (
            progress.add_task(part.name.removesuffix(".part"), total=total, completed=offset)
            if progress
            else None
        )
        size = offset
        try:
            with open(part, mode) as f:
                while chunk := resp.read(CHUNK):
                    f.write(chunk)
                    size += len(chunk)
                    if progress:
                        progress.update(task, completed=size)
        except (OSError, http.client.HTTPException) as e:  # timeout or dropped connection mid-body
            raise _Transient(f"interrupted after {size} bytes: {e}") from e
        finally:
            if progress:
                progress.remove_task(task)
        if total is not None and size < total:
            raise _Transient(f"connection closed after {size} of {total} bytes")


# a pCloud public link (`<host>/publink/show?code=...`) is a page naming the file's direct, expiring link
PCLOUD_LINK = re.compile(r'"downloadlink":\s*("(?:[^"\\]|\\.)*")')


def direct_url(url: str, dest: Path, timeout: float = 30) -> str:
    """The URL the file itself comes from: a pCloud public link's direct link (read from its page), else
    `url`."""
    parsed = urlparse(url)
    if not (parsed.path.endswith("/publink/show") and "code=" in parsed.query):
        return url
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers={"User-Agent": USER_AGENT}), timeout=timeout
        ) as resp:
            page = resp.read(1 << 20).decode("utf-8", "replace")
    except (urllib.error.URLError, OSError) as e:
        raise DriftError(
            f"cannot open {url}: {getattr(e, 'reason', e)}; open it in a browser, download the "
            f"file and put it at {dest}"
        ) from None
    found = PCLOUD_LINK.search(page)
    if found is None:
        raise DriftError(
            f"{url} names no download link (the share may have moved): open it in a browser, "
            f"download the file and put it at {dest}"
        )
    return json.loads(found.group(1))


def fetch(
    url: str, dest: Path, sha256: str | None = None, timeout: float = 30, progress=True, retries: int = 3
) -> Path:
    """Downloads `url` to `dest` (resuming from `dest.part`), checks its sha256 if given, returns `dest`.

    A `dest` already there is kept (and checked against sha256). Errors are one-line DriftErrors.
    """
    dest = Path(dest)
    scheme = urlparse(url).scheme
    if scheme not in ("http", "https"):
        raise DriftError(f"cannot download {url!r}: only http:// and https:// URLs are supported")
    sha256 = sha256.lower() if sha256 else None
    if dest.exists():
        if sha256 and (actual := sha256_file(dest)) != sha256:
            raise DriftError(
                f"{dest} is there but its sha256 is {actual}, expected {sha256}: "
                f"delete it to download it again"
            )
        return dest

    dest.parent.mkdir(parents=True, exist_ok=True)
    url = direct_url(url, dest, timeout)
    part = dest.with_name(dest.name + ".part")
    bar = _progress(progress, dest.name)
    if bar:
        bar.start()
    try:
        for attempt in range(retries + 1):
            try:
                _download(url, part, timeout, bar)
                break
            except _Transient as e:
                if attempt == retries:
                    raise DriftError(
                        f"download of {url} failed after {retries + 1} attempts: {e}; "
                        f"run again to resume from {part}"
                    ) from None
                time.sleep(RETRY_WAIT * (attempt + 1))
    finally:
        if bar:
            bar.stop()

    if sha256 and (actual := sha256_file(part)) != sha256:
        part.unlink()
        raise DriftError(
            f"sha256 mismatch for {dest.name} from {url}: expected {sha256}, got {actual}; "
            f"the download was removed"
        )
    os.replace(part, dest)
    return dest


def _sha_for(sha, file_name: str, n_files: int, dataset: str) -> str | None:
    """cfg sha256: a string (one file) or a dict file name -> sha256."""
    if sha is None or isinstance(sha, str) and not sha:
        return None
    if isinstance(sha, dict):
        return sha.get(file_name)
    if n_files > 1:
        raise DriftError(
            f"{dataset}.sha256 is one string for {n_files} files: give a mapping file name -> sha256"
        )
    return str(sha)


def targets(name: str, cfg) -> list[tuple[str, Path]]:
    """(url, destination) of each file a dataset's cfg (its section: the typed PARAMS, or a mapping validated
    here) asks for (its module's `download_targets`); destinations are where its reader looks."""
    module, cfg = get_dataset(name), dataset_params(name, cfg)
    if not hasattr(module, "download_targets"):
        raise DriftError(
            f"{name}: nothing to download (fetch knows {', '.join(_corpora('download_targets'))})"
        )
    return module.download_targets(cfg)


def _corpora(function: str) -> list[str]:
    return [n for n in DATASETS if hasattr(get_dataset(n), function)]


def fetch_dataset(name: str, cfg, progress=True, timeout: float = 30) -> list[Path]:
    """Downloads every file the dataset's cfg names; files already there are kept."""
    cfg = dataset_params(name, cfg)
    todo = targets(name, cfg)
    return [
        fetch(url, dest, _sha_for(cfg.sha256, dest.name, len(todo), name), timeout=timeout, progress=progress)
        for url, dest in todo
    ]


# ---- DVC registration: what `drift fetch` downloads and what `drift track` finds on disk gets a .dvc file


class Tracked(NamedTuple):
    """A raw file or folder and the .dvc file that tracks it (None outside a DVC repository); `url` is where
    `drift fetch` downloaded it from (None for `drift track`)."""

    path: Path
    dvc_file: Path | None
    url: str | None = None


def _note(message: str) -> None:
    print(f"note: {message}", file=sys.stderr, flush=True)


def dvc_root(path: Path) -> Path | None:
    """The DVC repository a path (there or not yet) belongs to: the nearest folder above it with a .dvc/."""
    for folder in Path(os.path.abspath(path)).parents:
        if (folder / ".dvc").is_dir():
            return folder
    return None


def _dvc_file(path: Path) -> Path:
    return path.with_name(path.name + ".dvc")


def _tracked_by(path: Path, root: Path) -> Path | None:
    """The .dvc file tracking `path` or a folder above it inside the repository (DVC names it <out>.dvc)."""
    path = Path(os.path.abspath(path))
    for p in (path, *path.parents):
        if p == root:
            return None
        if _dvc_file(p).is_file():
            return _as_given(_dvc_file(p))
    return None


def _as_given(path: Path) -> Path:
    """An absolute path inside the working directory as a relative one, as params.yaml writes paths."""
    rel = os.path.relpath(path)
    return path if rel == ".." or rel.startswith(".." + os.sep) else Path(rel)


def _same(a: Path, b: Path) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


def _load_dvc_file(dvc_file: Path) -> dict:
    import yaml

    return yaml.safe_load(dvc_file.read_text()) or {}


def _git_ignored(root: Path, dvc_file: Path) -> str | None:
    """The folder (`data/`) or the file that git ignores on the way to `dvc_file`, as DVC sees it, or None.

    DVC refuses to write a git-ignored .dvc file, and it does not look for .dvc files inside a folder that git
    ignores (dvc/repo/index.py prunes `data/` under a `/data/` or even `/data/*` rule, whatever a `!` rule
    re-includes below it: treeverse/dvc#10987), so a .dvc file there would be written and never seen."""
    try:
        from scmrepo.exceptions import SCMError
        from scmrepo.git import Git
    except ImportError:  # pragma: no cover - scmrepo comes with dvc
        return None
    try:
        scm = Git(str(root), search_parent_directories=True)
    except SCMError:  # a DVC repository without git (`dvc init --no-scm`): nothing is ignored
        return None
    try:
        rel = Path(os.path.abspath(dvc_file)).relative_to(root)
        for i in range(1, len(rel.parts)):
            if scm.is_ignored(str(root.joinpath(*rel.parts[:i])) + os.sep):
                return str(Path(*rel.parts[:i])) + "/"
        return str(rel) if scm.is_ignored(str(root / rel)) else None
    finally:
        scm.close()


def _check_not_ignored(root: Path, path: Path, way_out: str) -> None:
    ignored = _git_ignored(root, _dvc_file(path))
    if ignored is not None:
        raise DriftError(
            f"cannot track {path} with DVC: git ignores {ignored} (as DVC reads .gitignore), so DVC "
            f"would not write or find {_dvc_file(path).name} there: in .gitignore, ignore the "
            f"pipeline's output folders instead of {ignored} (see docs/how-to/presets.md){way_out}"
        )


def _dvc(root: Path, *args: str) -> None:
    """Runs `dvc ARGS` in the repository; its error becomes one DriftError line."""
    proc = subprocess.run([sys.executable, "-m", "dvc", *args], cwd=root, capture_output=True, text=True)
    if proc.returncode == 0:
        return
    lines = (proc.stderr + "\n" + proc.stdout).splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("ERROR")), 0)
    kept = []
    for line in lines[start:]:
        if line.startswith("Having any troubles"):
            break
        kept.append(line.strip())
    detail = " ".join(" ".join(kept).split()).removeprefix("ERROR: ") or f"exit status {proc.returncode}"
    raise DriftError(f"`dvc {' '.join(args)}` failed: {detail}")


def _rel(path: Path, root: Path) -> str:
    return os.path.relpath(os.path.abspath(path), root)


def register_download(
    url: str, path: Path, root: Path, downloaded: bool = True, dataset: str = "<dataset>"
) -> Path:
    """Registers a file downloaded from `url` as a DVC import (see the module doc); returns its .dvc file.

    A file already tracked is left as it is (a partial import is committed); a file inside a folder that
    `dvc add` tracks is added to that folder's .dvc file instead. A file that was there before, of another
    size than the server's, is tracked as it is (`dvc add`): an import would claim it is the server's."""
    tracked = _tracked_by(path, root)
    own = _dvc_file(path)
    if tracked is not None and not _same(tracked, own):  # e.g. a user's `dvc add data/raw/amazon`
        _dvc(root, "add", _rel(tracked.with_name(tracked.name.removesuffix(".dvc")), root))
        return tracked
    if tracked is not None:
        outs = _load_dvc_file(own).get("outs") or [{}]
        if _load_dvc_file(own).get("deps") and not outs[0].get("md5"):  # registered, not yet committed
            _dvc(root, "commit", "--force", _rel(own, root))
        return own
    part = path.with_name(path.name + ".part")
    os.replace(path, part)  # DVC will not import onto an existing file, and its --force deletes the file
    try:
        _dvc(root, "import-url", "--no-download", url, _rel(path, root))
    finally:
        os.replace(part, path)
    upstream = (_load_dvc_file(own).get("deps") or [{}])[0].get("size")
    if not downloaded and upstream is not None and upstream != path.stat().st_size:
        own.unlink()
        _dvc(root, "add", _rel(path, root))
        _note(
            f"{path} is {path.stat().st_size} bytes, the server's is {upstream}: tracked as it is (`dvc add`), "
            f"not as an import of {url}; for the server's, delete {path} and {own} and run "
            f"`drift fetch {dataset}` again"
        )
        return own
    _dvc(root, "commit", "--force", _rel(own, root))
    return own


def fetch_and_track(name: str, cfg, progress=True, timeout: float = 30, dvc: bool = True) -> list[Tracked]:
    """`drift fetch`: downloads every file of the dataset (files already there are kept) and, inside a DVC
    repository, registers each as an import of its URL. Whatever keeps a file from being registered is
    found before anything is downloaded."""
    cfg = dataset_params(name, cfg)
    todo = targets(name, cfg)
    roots = {dest: dvc_root(dest) if dvc else None for _, dest in todo}
    if dvc and None in roots.values():
        where = next(dest for dest, root in roots.items() if root is None).parent
        _note(
            f"{where} is not inside a DVC repository (no .dvc/ above it): downloading without registering "
            f"with DVC (`dvc init` there, then `drift fetch {name}` again registers what is there)"
        )
    for _, dest in todo:
        root = roots[dest]
        if root is not None and _tracked_by(dest, root) is None:
            _check_not_ignored(root, dest, ", or pass --no-dvc to only download")
    out = []
    for url, dest in todo:
        there = dest.exists()
        path = fetch(
            url, dest, _sha_for(cfg.sha256, dest.name, len(todo), name), timeout=timeout, progress=progress
        )
        root = roots[dest]
        try:
            dvc_file = register_download(url, path, root, not there, name) if root else None
        except DriftError as e:
            raise DriftError(
                f"{path} is downloaded but not registered with DVC: {e}; once that is fixed, "
                f"`drift fetch {name}` registers it without downloading it again"
            ) from None
        out.append(Tracked(path, dvc_file, url))
    return out


def track_paths(name: str, cfg) -> list[Path]:
    """What `drift track` registers: the raw inputs the dataset's reader reads (its module's `raw_inputs`),
    one-line errors if missing. DVC cannot track a folder whose files have .dvc files of their own, nor import
    a file into a folder it tracks: a reader lists the files `drift fetch` registers one by one."""
    module, cfg = get_dataset(name), dataset_params(name, cfg)
    if not hasattr(module, "raw_inputs"):
        raise DriftError(
            f"{name}: nothing to track: its input ships with the package or is generated "
            f"(track knows {', '.join(_corpora('raw_inputs'))})"
        )
    return module.raw_inputs(cfg)


def track_dataset(name: str, cfg) -> list[Tracked]:
    """`drift track`: `dvc add` on the dataset's raw inputs (see track_paths). A path DVC imports already is
    left as it is; a path inside a folder `dvc add` tracks re-adds that folder."""
    paths = track_paths(name, cfg)
    root = dvc_root(paths[0])
    if root is None:
        raise DriftError(
            f"{paths[0]} is not inside a DVC repository (no .dvc/ above it): run `dvc init` "
            f"at the repository root first"
        )
    out, to_add = [], []
    for path in paths:
        tracked = _tracked_by(path, root)
        if tracked is not None and _same(tracked, _dvc_file(path)) and _load_dvc_file(tracked).get("deps"):
            out.append(Tracked(path, tracked))  # an import (`drift fetch`): `dvc update` refreshes it
            continue
        if tracked is None:
            _check_not_ignored(root, path, "")
        target = path if tracked is None else tracked.with_name(tracked.name.removesuffix(".dvc"))
        to_add.append(_rel(target, root))
        out.append(Tracked(path, _dvc_file(target)))
    if to_add:
        _dvc(root, "add", *dict.fromkeys(to_add))
    return out

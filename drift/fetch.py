"""Downloads of the real corpora, for users with a network (`drift fetch <dataset>`); nothing else downloads.

`fetch` resumes: bytes go to `<dest>.part`, a new attempt asks the server for the rest with a Range request
(and starts over if the server ignores it), and only a complete file, with its sha256 checked when one is
given, is renamed to `dest`. Network errors are retried a few times, each retry resuming; timeouts bound
every connect and every read. Only the standard library's urllib is used.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from drift.errors import DriftError

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
    from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                               TransferSpeedColumn)

    return Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                    TimeRemainingColumn(), console=Console(stderr=True), transient=False)


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
            total = (e.headers.get("Content-Range") or "").rpartition("/")[2]
            if total.isdigit() and int(total) == offset:
                return
            part.unlink()  # a stale .part (the file changed on the server): start over
            return _download(url, part, timeout, progress)
        if e.code >= 500:
            raise _Transient(f"HTTP {e.code} {e.reason}")
        raise DriftError(f"download failed: {url}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError) as e:  # DNS, refused, timeout (socket.timeout is an OSError)
        raise _Transient(str(getattr(e, "reason", e)))

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

        task = progress.add_task(part.name.removesuffix(".part"), total=total, completed=offset) if progress else None
        size = offset
        try:
            with open(part, mode) as f:
                while chunk := resp.read(CHUNK):
                    f.write(chunk)
                    size += len(chunk)
                    if progress:
                        progress.update(task, completed=size)
        except (OSError, http.client.HTTPException) as e:  # timeout or dropped connection mid-body
            raise _Transient(f"interrupted after {size} bytes: {e}")
        finally:
            if progress:
                progress.remove_task(task)
        if total is not None and size < total:
            raise _Transient(f"connection closed after {size} of {total} bytes")


def fetch(url: str, dest: Path, sha256: str | None = None, timeout: float = 30, progress=True,
          retries: int = 3) -> Path:
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
            raise DriftError(f"{dest} is there but its sha256 is {actual}, expected {sha256}: "
                             f"delete it to download it again")
        return dest

    dest.parent.mkdir(parents=True, exist_ok=True)
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
                    raise DriftError(f"download of {url} failed after {retries + 1} attempts: {e}; "
                                     f"run again to resume from {part}") from None
                time.sleep(RETRY_WAIT * (attempt + 1))
    finally:
        if bar:
            bar.stop()

    if sha256 and (actual := sha256_file(part)) != sha256:
        part.unlink()
        raise DriftError(f"sha256 mismatch for {dest.name} from {url}: expected {sha256}, got {actual}; "
                         f"the download was removed")
    os.replace(part, dest)
    return dest


def _sha_for(sha, file_name: str, n_files: int, dataset: str) -> str | None:
    """cfg sha256: a string (one file) or a dict file name -> sha256."""
    if sha is None or isinstance(sha, str) and not sha:
        return None
    if isinstance(sha, dict):
        return sha.get(file_name)
    if n_files > 1:
        raise DriftError(f"{dataset}.sha256 is one string for {n_files} files: give a mapping file name -> sha256")
    return str(sha)


def targets(name: str, cfg: dict) -> list[tuple[str, Path]]:
    """(url, destination) of each file a dataset's cfg asks for; destinations are where `read` looks."""
    from drift.datasets import amazon, arxiv, yearbook
    from drift.datasets._io import source_path

    url = cfg.get("url")
    if name == "amazon":
        if not url:
            raise DriftError("amazon: no download URL: set amazon.url in params.yaml to a template with "
                             "{category}, e.g. https://.../review_categories/{category}.jsonl.gz")
        categories = cfg.get("categories")
        if isinstance(categories, str):
            categories = [categories]
        if not categories:
            raise DriftError("amazon: set amazon.categories in params.yaml to the categories to download")
        if "{category}" not in url and len(categories) > 1:
            raise DriftError(f"amazon.url has no {{category}} in it: {url}")
        folder = source_path(cfg, amazon.DEFAULT_SOURCE)
        out = []
        for cat in categories:
            u = url.format(category=cat)
            out.append((u, folder / Path(urlparse(u).path).name))
        return out
    if name == "yearbook":
        if not url:
            raise DriftError("yearbook: no download URL: set yearbook.url in params.yaml to the URL of "
                             "faces_aligned_small_mirrored_co_aligned_cropped_cleaned.tar.gz")
        return [(url, yearbook.archive_path(source_path(cfg, yearbook.DEFAULT_SOURCE)))]
    if name == "arxiv":
        if not url:
            raise DriftError("arxiv: no download URL: set arxiv.url in params.yaml to the URL of "
                             "arxiv-metadata-oai-snapshot.json (JSON lines, not the zip)")
        return [(url, source_path(cfg, arxiv.DEFAULT_SOURCE))]
    raise DriftError(f"{name}: nothing to download (fetch knows amazon, arxiv, yearbook)")


def fetch_dataset(name: str, cfg: dict, progress=True, timeout: float = 30) -> list[Path]:
    """Downloads every file the dataset's cfg names; files already there are kept."""
    todo = targets(name, cfg)
    return [fetch(url, dest, _sha_for(cfg.get("sha256"), dest.name, len(todo), name), timeout=timeout,
                  progress=progress)
            for url, dest in todo]

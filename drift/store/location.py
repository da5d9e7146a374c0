"""Where the caches live: the embedding store, and beside it the checkpoint and cell caches (embed.cache_dir,
else $DRIFT_CACHE_DIR, else ~/.cache/drift), outside any workspace so queued and temporary DVC experiments
share them. A relative embed.cache_dir is the main repository's folder, never a temporary experiment copy's;
an s3://bucket/prefix one (or $DRIFT_CACHE_DIR) is on object storage (drift.core.objectstore.ObjectPath)."""

from __future__ import annotations

import os
from pathlib import Path

from drift.core.objectstore import ObjectPath, is_object_store
from drift.core.params import EmbedParams
from drift.core.paths import main_repository


def default_cache_dir() -> Path | ObjectPath:
    """Where embeddings live: $DRIFT_CACHE_DIR, else ~/.cache/drift (outside any workspace, so queued and
    temporary DVC experiments share it)."""
    if is_object_store(os.environ.get("DRIFT_CACHE_DIR", "")):
        return ObjectPath(os.environ["DRIFT_CACHE_DIR"])
    return Path(os.environ.get("DRIFT_CACHE_DIR") or Path.home() / ".cache" / "drift").expanduser()


def local_cache_dir() -> Path:
    """This machine's own measurements (rates, plan benchmarks): $DRIFT_CACHE_DIR when it is a local folder,
    else ~/.cache/drift (a store on object storage is shared; these files describe one machine)."""
    where = default_cache_dir()
    return Path.home() / ".cache" / "drift" if isinstance(where, ObjectPath) else where


def cache_dir(embed: EmbedParams) -> Path | ObjectPath:
    """The store's directory: `embed.cache_dir`, else the user's cache. A relative embed.cache_dir resolves
    against the main repository (drift.core.paths.main_repository): a `dvc exp run --temp` copy, deleted after
    the run, would take the store with it. An s3:// one is an ObjectPath."""
    if not embed.cache_dir:
        return default_cache_dir()
    if is_object_store(embed.cache_dir):
        return ObjectPath(embed.cache_dir)
    configured = Path(embed.cache_dir).expanduser()
    return configured if configured.is_absolute() else main_repository() / configured

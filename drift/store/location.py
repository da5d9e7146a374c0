"""Where the caches live: the embedding store, and beside it the checkpoint and cell caches (embed.cache_dir,
else $DRIFT_CACHE_DIR, else ~/.cache/drift), outside any workspace so queued and temporary DVC experiments share
them."""
from __future__ import annotations

import os
from pathlib import Path

from drift.core.params import EmbedParams


def default_cache_dir() -> Path:
    """Where embeddings live: $DRIFT_CACHE_DIR, else ~/.cache/drift (outside any workspace, so queued and
    temporary DVC experiments share it)."""
    return Path(os.environ.get("DRIFT_CACHE_DIR") or Path.home() / ".cache" / "drift").expanduser()


def cache_dir(embed: EmbedParams) -> Path:
    """The store's directory: `embed.cache_dir`, else the user's cache."""
    configured = embed.cache_dir
    return Path(configured).expanduser() if configured else default_cache_dir()

"""`drift cache`: the embedding store's tables, their compaction, and garbage collection.

A table is in use when an embedding manifest (`data/embeddings/<dataset>.json`, the embed stage's output)
names it. Manifests of other repositories, branches or experiments are not seen unless passed with
--keep-manifests: `gc` deletes only what no manifest it was shown refers to.
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import List, Optional

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from drift.cli.common import fail
from drift.core.errors import DriftError, close_matches
from drift.core.params import load_params
from drift.core.paths import PATHS
from drift.store.location import cache_dir, default_cache_dir

cache_app = typer.Typer(add_completion=False, invoke_without_command=True,
                        help="The embedding store: list its tables, compact them, delete those no manifest uses.")

CACHE_DIR_HELP = "the store (default: embed.cache_dir of ./params.yaml, else $DRIFT_CACHE_DIR, else ~/.cache/drift)"
MANIFESTS = Path(PATHS["embeddings"]).parent  # every dataset's embedding manifest


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def resolve_cache_dir(option: Optional[Path]) -> Path:
    if option is not None:
        return option.expanduser()
    if Path("params.yaml").exists():
        return cache_dir(load_params().embed)
    return default_cache_dir()


def store_tables(cache_dir: Path) -> list[Path]:
    return sorted(p for p in cache_dir.glob("*.lance") if p.is_dir()) if cache_dir.is_dir() else []


def manifest_refs(sources: list[Path]) -> dict[str, list[str]]:
    """{store table: [dataset, ...]} from embedding manifests. A source is a manifest, a folder of them, or a
    repository (its data/embeddings/)."""
    refs: dict[str, list[str]] = {}
    for source in sources:
        source = Path(source).expanduser()
        if source.is_file():
            files = [source]
        elif (source / MANIFESTS).is_dir():
            files = sorted((source / MANIFESTS).glob("*.json"))
        elif source.is_dir():
            files = sorted(source.glob("*.json"))
        else:
            raise DriftError(f"no manifest at {source}: pass a data/embeddings/<dataset>.json, a folder of them "
                             "or a repository")
        for f in files:
            try:
                manifest = json.loads(f.read_text())
            except (OSError, ValueError) as e:
                raise DriftError(f"unreadable manifest {f}: {e}") from e
            # a dataset's manifest lists one entry per encoder (older ones were a single entry)
            entries = manifest.get("encoders", {}).values() if isinstance(manifest, dict) else []
            for entry in [manifest, *entries] if isinstance(manifest, dict) else []:
                if entry.get("store"):
                    refs.setdefault(entry["store"], []).append(f.stem)
    return refs


def _sources(keep_manifests: Optional[List[Path]]) -> list[Path]:
    return ([MANIFESTS] if MANIFESTS.is_dir() else []) + list(keep_manifests or [])


def _table_path(cache_dir: Path, name: str) -> Path:
    tables = {p.name: p for p in store_tables(cache_dir)}
    name = name if name.endswith(".lance") else f"{name}.lance"
    if name not in tables:
        raise DriftError(f"no table {name} in {cache_dir}: {close_matches(name, tables) if tables else 'the store is empty'}")
    return tables[name]


def _emit(data) -> None:
    """--json: the one thing written to stdout."""
    print(json.dumps(data, indent=2))


def _json_flag(ctx: typer.Context, as_json: bool) -> bool:
    """`drift cache --json gc` as well as `drift cache gc --json`."""
    return as_json or bool((ctx.obj or {}).get("json"))


def _cache_dir_option(ctx: typer.Context, cache_dir: Optional[Path]) -> Optional[Path]:
    return cache_dir if cache_dir is not None else (ctx.obj or {}).get("cache_dir")


@cache_app.callback()
def cache(ctx: typer.Context,
          as_json: bool = typer.Option(False, "--json", help="machine-readable output (for any subcommand too)"),
          cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help=CACHE_DIR_HELP)):
    """`drift cache` alone lists the tables."""
    ctx.obj = {"json": as_json, "cache_dir": cache_dir}
    if ctx.invoked_subcommand is None:
        list_tables(ctx, cache_dir=cache_dir, as_json=as_json, keep_manifests=None)


# `drift cache` on an 80-column terminal: no column is cut. Version is left out (it is in --json), the
# fingerprint is cut to 8 characters (tables are named encoder-<16>), sizes are human-readable, duplicates go
# on a line of their own, and the last column (datasets, free text) is the one that wraps. On a narrower
# terminal still, cells fold onto more lines: nothing ends in "…".
FINGERPRINT_CHARS = 8


def cache_table(rows: list[dict]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for column, right in (("encoder", False), ("fingerprint", False), ("rows", True), ("dim", True),
                          ("size", True), ("frags", True), ("datasets", False)):
        table.add_column(column, justify="right" if right else "left", overflow="fold")
    for r in rows:
        fingerprint = (r["fingerprint"] or "")[:FINGERPRINT_CHARS]
        if not r["committed"]:
            table.add_row(r["encoder"], fingerprint, "—", "—", _size(r["bytes"]), "—",
                          "incomplete (killed first write): `drift cache gc` removes it")
            continue
        duplicates = r["rows"] - r["unique"] if r["unique"] is not None else 0
        count = f"{r['rows']:,}" + (f"\n+{duplicates:,} dup" if duplicates else "")  # a line of its own
        table.add_row(r["encoder"], fingerprint, count, str(r["dim"]), _size(r["bytes"]), str(r["fragments"]),
                      ", ".join(r["datasets"]) or "—")
    return table


@cache_app.command("list")
def list_tables(ctx: typer.Context,
                cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help=CACHE_DIR_HELP),
                as_json: bool = typer.Option(False, "--json", help="machine-readable output: a list of tables"),
                keep_manifests: Optional[List[Path]] = typer.Option(
                    None, "--manifests", help="more manifests to match tables to datasets (repeatable)")):
    """Each table: encoder, fingerprint, rows, dimension, size on disk, fragments, datasets using it."""
    from drift.store.embeddings import (
        table_info,  # lazy: lance, kept out of `drift --help`
    )

    as_json = _json_flag(ctx, as_json)
    try:
        where = resolve_cache_dir(_cache_dir_option(ctx, cache_dir))
        refs = manifest_refs(_sources(keep_manifests))
        rows = [{**table_info(p), "datasets": sorted(refs.get(p.name, []))} for p in store_tables(where)]
    except DriftError as e:
        fail(e)
    if as_json:
        _emit(rows)
        return
    console = Console()
    if not rows:
        console.print(f"no embedding tables in {where} (nothing embedded there yet)")
        return
    console.print(f"embedding store {where}", overflow="fold")
    console.print(cache_table(rows))


@cache_app.command()
def compact(ctx: typer.Context,
            tables: Optional[List[str]] = typer.Argument(None, help="table names (default: every table)"),
            cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help=CACHE_DIR_HELP),
            as_json: bool = typer.Option(False, "--json", help="machine-readable output: what each table became")):
    """Delete duplicate keys (two writers at once), merge small fragments, drop files only old versions use."""
    from drift.store.embeddings import (  # lazy: lance, kept out of `drift --help`
        committed,
        compact_table,
    )

    as_json = _json_flag(ctx, as_json)
    console = Console()
    results: list[dict] = []
    try:
        where = resolve_cache_dir(_cache_dir_option(ctx, cache_dir))
        paths = [_table_path(where, t) for t in tables] if tables else store_tables(where)
        if not paths and not as_json:
            console.print(f"no embedding tables in {where}")
        for path in paths:
            if not committed(path):
                results.append({"table": path.name, "skipped": "incomplete"})
                if not as_json:
                    console.print(f"{path.name}: incomplete (never committed), skipped; `drift cache gc` removes it")
                continue
            r = {**compact_table(path), "skipped": None}
            results.append(r)
            if not as_json:
                console.print(f"{r['table']}: {r['duplicates_removed']:,} duplicates removed, fragments "
                              f"{r['fragments_before']} → {r['fragments_after']}, "
                              f"{_size(r['bytes_before'])} → {_size(r['bytes_after'])}")
    except DriftError as e:
        fail(e)
    except OSError as e:
        fail(DriftError(f"compaction failed: {str(e).splitlines()[0]} (another process compacting? run it again)"))
    if as_json:
        _emit({"cache_dir": str(where), "tables": results})


@cache_app.command()
def gc(ctx: typer.Context,
       dry_run: bool = typer.Option(False, "--dry-run", help="list what would be deleted, delete nothing"),
       keep_manifests: Optional[List[Path]] = typer.Option(
           None, "--keep-manifests", help="also keep tables these manifests use: a manifest, a folder of them or "
                                          "a repository (repeatable)"),
       grace_minutes: float = typer.Option(60, help="keep tables written this recently (an embed may be running)"),
       cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help=CACHE_DIR_HELP),
       as_json: bool = typer.Option(False, "--json", help="machine-readable output: what was (or would be) deleted")):
    """Delete the tables no manifest in data/embeddings/ (or --keep-manifests) refers to."""
    from drift.store.embeddings import (
        table_info,  # lazy: lance, kept out of `drift --help`
    )

    as_json = _json_flag(ctx, as_json)
    console = Console()
    try:
        where = resolve_cache_dir(_cache_dir_option(ctx, cache_dir))
        sources = _sources(keep_manifests)
        if not sources:
            raise DriftError(f"no manifests in ./{MANIFESTS}/ and no --keep-manifests: refusing to delete every table "
                             "(run from the repository root, or pass --keep-manifests)")
        refs = manifest_refs(sources)
    except DriftError as e:
        fail(e)
    deleted, recent = [], []
    for path in store_tables(where):
        if path.name in refs:
            continue
        info = table_info(path, count_unique=False)
        age = (time.time() - info["updated"]) / 60
        if age < grace_minutes:
            recent.append({"table": path.name, "bytes": info["bytes"], "age_minutes": round(age, 2)})
            if not as_json:
                console.print(f"keep   {path.name}: unused, but written {age:.0f} min ago "
                              f"(--grace-minutes {grace_minutes:g})")
            continue
        if not as_json:
            console.print(f"{'would delete' if dry_run else 'delete'} {path.name} ({_size(info['bytes'])})")
        if not dry_run:
            shutil.rmtree(path)
            path.with_name(path.name + ".lock").unlink(missing_ok=True)
        deleted.append({"table": path.name, "bytes": info["bytes"]})
    freed = sum(d["bytes"] for d in deleted)
    if as_json:
        _emit({"cache_dir": str(where), "dry_run": dry_run, "deleted": deleted, "freed_bytes": freed,
               "kept_recent": recent, "in_use": sorted(refs)})
        return
    verb = "would free" if dry_run else "freed"
    console.print(f"{len(deleted)} table(s) {'to delete' if dry_run else 'deleted'}, {verb} {_size(freed)}; "
                  f"{len(refs)} in use")

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
from rich.console import Console
from rich.table import Table

from drift.errors import DriftError

cache_app = typer.Typer(add_completion=False, invoke_without_command=True,
                        help="The embedding store: list its tables, compact them, delete those no manifest uses.")
console = Console()

CACHE_DIR_HELP = "the store (default: embed.cache_dir of ./params.yaml, else $DRIFT_CACHE_DIR, else ~/.cache/drift)"
MANIFESTS = Path("data/embeddings")


def _fail(error: DriftError):
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {error}", highlight=False)
    raise typer.Exit(2)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def resolve_cache_dir(option: Optional[Path]) -> Path:
    from drift.store import default_cache_dir

    if option is not None:
        return option.expanduser()
    if Path("params.yaml").exists():
        from drift.config import cache_dir, load_params
        return cache_dir(load_params())
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
        from drift.errors import close_matches
        raise DriftError(f"no table {name} in {cache_dir}: {close_matches(name, tables) if tables else 'the store is empty'}")
    return tables[name]


@cache_app.callback()
def cache(ctx: typer.Context):
    """`drift cache` alone lists the tables."""
    if ctx.invoked_subcommand is None:
        list_tables(cache_dir=None, as_json=False, keep_manifests=None)


@cache_app.command("list")
def list_tables(cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help=CACHE_DIR_HELP),
                as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
                keep_manifests: Optional[List[Path]] = typer.Option(
                    None, "--manifests", help="more manifests to match tables to datasets (repeatable)")):
    """Each table: encoder, fingerprint, rows, dimension, size on disk, fragments, version, datasets using it."""
    from drift.store import table_info

    try:
        where = resolve_cache_dir(cache_dir)
        refs = manifest_refs(_sources(keep_manifests))
        rows = [{**table_info(p), "datasets": sorted(refs.get(p.name, []))} for p in store_tables(where)]
    except DriftError as e:
        _fail(e)
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    if not rows:
        console.print(f"no embedding tables in {where} (nothing embedded there yet)")
        return
    table = Table(title=f"embedding store {where}", title_justify="left")
    for column in ("encoder", "fingerprint", "rows", "dim", "size", "fragments", "version", "datasets"):
        table.add_column(column, justify="right" if column in ("rows", "dim", "size", "fragments", "version") else "left",
                         no_wrap=column != "datasets")
    for r in rows:
        if not r["committed"]:
            table.add_row(r["encoder"], r["fingerprint"][:16], "—", "—", _size(r["bytes"]), "—", "—",
                          "incomplete: a killed first write; `drift cache gc` removes it")
            continue
        duplicates = r["rows"] - r["unique"]
        count = f"{r['rows']:,}" + (f" ({duplicates:,} dup)" if duplicates else "")
        table.add_row(r["encoder"], r["fingerprint"][:16], count, str(r["dim"]), _size(r["bytes"]),
                      str(r["fragments"]), str(r["version"]), ", ".join(r["datasets"]) or "—")
    console.print(table)


@cache_app.command()
def compact(tables: Optional[List[str]] = typer.Argument(None, help="table names (default: every table)"),
            cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help=CACHE_DIR_HELP)):
    """Delete duplicate keys (two writers at once), merge small fragments, drop files only old versions use."""
    from drift.store import committed, compact_table

    try:
        where = resolve_cache_dir(cache_dir)
        paths = [_table_path(where, t) for t in tables] if tables else store_tables(where)
        if not paths:
            console.print(f"no embedding tables in {where}")
            return
        for path in paths:
            if not committed(path):
                console.print(f"{path.name}: incomplete (never committed), skipped; `drift cache gc` removes it")
                continue
            r = compact_table(path)
            console.print(f"{r['table']}: {r['duplicates_removed']:,} duplicates removed, fragments "
                          f"{r['fragments_before']} → {r['fragments_after']}, "
                          f"{_size(r['bytes_before'])} → {_size(r['bytes_after'])}")
    except DriftError as e:
        _fail(e)
    except OSError as e:
        _fail(DriftError(f"compaction failed: {str(e).splitlines()[0]} (another process compacting? run it again)"))


@cache_app.command()
def gc(dry_run: bool = typer.Option(False, "--dry-run", help="list what would be deleted, delete nothing"),
       keep_manifests: Optional[List[Path]] = typer.Option(
           None, "--keep-manifests", help="also keep tables these manifests use: a manifest, a folder of them or "
                                          "a repository (repeatable)"),
       grace_minutes: float = typer.Option(60, help="keep tables written this recently (an embed may be running)"),
       cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help=CACHE_DIR_HELP)):
    """Delete the tables no manifest in data/embeddings/ (or --keep-manifests) refers to."""
    from drift.store import table_info

    try:
        where = resolve_cache_dir(cache_dir)
        sources = _sources(keep_manifests)
        if not sources:
            raise DriftError(f"no manifests in ./{MANIFESTS}/ and no --keep-manifests: refusing to delete every table "
                             "(run from the repository root, or pass --keep-manifests)")
        refs = manifest_refs(sources)
    except DriftError as e:
        _fail(e)
    freed, deleted = 0, 0
    for path in store_tables(where):
        info = table_info(path, count_unique=False)
        if path.name in refs:
            continue
        age = (time.time() - info["updated"]) / 60
        if age < grace_minutes:
            console.print(f"keep   {path.name}: unused, but written {age:.0f} min ago (--grace-minutes {grace_minutes:g})")
            continue
        console.print(f"{'would delete' if dry_run else 'delete'} {path.name} ({_size(info['bytes'])})")
        if not dry_run:
            shutil.rmtree(path)
            path.with_name(path.name + ".lock").unlink(missing_ok=True)
        freed += info["bytes"]
        deleted += 1
    verb = "would free" if dry_run else "freed"
    console.print(f"{deleted} table(s) {'to delete' if dry_run else 'deleted'}, {verb} {_size(freed)}; "
                  f"{len(refs)} in use")

"""`drift cache`: the embedding store's tables, their compaction, verification, and garbage collection.

A table is in use when an embedding manifest (`data/embeddings/<dataset>.json`, the embed stage's output)
names it. A checkpoint is in use when a checkpoint list (`data/models/<dataset>/checkpoints.json`, the train
stage's) names its key: the workspace's, those of the `dvc exp` refs (read from the DVC cache) and of the
repositories passed with --keep-manifests; a cell is in use when its checkpoint is. `gc` deletes only what
none of these refers to, nothing written within --grace-minutes, and under checkpoints/ and cells/ only files
whose header says drift wrote them (any other file there is left and counted). `verify` checks every entry
against its checksum and the key it is filed under; a folder that is no drift cache (missing, a file, or a
non-empty folder holding no embedding table, checkpoints/ or cells/) is one line and exit 2, an empty folder
an empty cache. `why` says whether a dataset's encoders find their tables, and if not, the nearest table and
the fingerprint fields that differ.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from drift.cli.common import InterruptibleGroup, esc, fail
from drift.core.errors import DriftError, close_matches
from drift.core.objectstore import ObjectPath, check_store, location
from drift.core.params import load_params
from drift.core.paths import PATHS
from drift.store.cells import (
    CHECKPOINT_KEYS,
    cell_problem,
    checkpoint_problem,
    other_format,
    read_header,
    written_by_drift,
)
from drift.store.location import cache_dir, default_cache_dir

cache_app = typer.Typer(
    cls=InterruptibleGroup,
    add_completion=False,
    invoke_without_command=True,
    help="The embedding store: list its tables, compact them, delete those no manifest uses, say why one is new.",
)

CACHE_DIR_HELP = (
    "the store, a folder or s3://bucket/prefix (default: embed.cache_dir of ./params.yaml, else "
    "$DRIFT_CACHE_DIR, else ~/.cache/drift)"
)
MANIFESTS = Path(PATHS["embeddings"]).parent  # every dataset's embedding manifest
MODELS = Path(PATHS["models"]).parent  # every dataset's checkpoints, and their list of cache keys
FEATURES = Path(PATHS["features"]).parent


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def resolve_cache_dir(option) -> Path | ObjectPath:
    """The store to work on; on object storage, reachable (one line otherwise: endpoint, credentials, bucket)."""
    if option is not None:
        where = location(option).expanduser()
    elif Path("params.yaml").exists():
        where = cache_dir(load_params().embed)
    else:
        where = default_cache_dir()
    check_store(where)
    return where


def store_tables(cache_dir: Path | ObjectPath) -> list:
    if isinstance(cache_dir, ObjectPath):  # one listing: the prefixes named *.lance
        return sorted(cache_dir.glob("*.lance"))
    return sorted(p for p in cache_dir.glob("*.lance") if p.is_dir()) if cache_dir.is_dir() else []


def remove_tree(path) -> None:
    """A table's files, on disk or on object storage."""
    if isinstance(path, ObjectPath):
        path.rmtree()
    else:
        shutil.rmtree(path, ignore_errors=True)


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
            raise DriftError(
                f"no manifest at {source}: pass a data/embeddings/<dataset>.json, a folder of them "
                "or a repository"
            )
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


def _sources(keep_manifests: list[Path] | None) -> list[Path]:
    return ([MANIFESTS] if MANIFESTS.is_dir() else []) + list(keep_manifests or [])


def _table_path(cache_dir: Path | ObjectPath, name: str) -> Path | ObjectPath:
    tables = {p.name: p for p in store_tables(cache_dir)}
    name = name if name.endswith(".lance") else f"{name}.lance"
    if name not in tables:
        raise DriftError(
            f"no table {name} in {cache_dir}: {close_matches(name, tables) if tables else 'the store is empty'}"
        )
    return tables[name]


def _emit(data) -> None:
    """--json: the one thing written to stdout."""
    print(json.dumps(data, indent=2))


def _json_flag(ctx: typer.Context, as_json: bool) -> bool:
    """`drift cache --json gc` as well as `drift cache gc --json`."""
    return as_json or bool((ctx.obj or {}).get("json"))


def _cache_dir_option(ctx: typer.Context, cache_dir: str | None) -> str | None:
    return cache_dir if cache_dir is not None else (ctx.obj or {}).get("cache_dir")


@cache_app.callback()
def cache(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="machine-readable output (for any subcommand too)"),
    cache_dir: str | None = typer.Option(None, "--cache-dir", help=CACHE_DIR_HELP),
):
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
    for column, right in (
        ("encoder", False),
        ("fingerprint", False),
        ("rows", True),
        ("dim", True),
        ("size", True),
        ("frags", True),
        ("datasets", False),
    ):
        table.add_column(column, justify="right" if right else "left", overflow="fold")
    for r in rows:
        fingerprint = (r["fingerprint"] or "")[:FINGERPRINT_CHARS]
        if not r["committed"]:
            table.add_row(
                esc(r["encoder"]),
                fingerprint,
                "—",
                "—",
                _size(r["bytes"]),
                "—",
                "incomplete (killed first write): `drift cache gc` removes it",
            )
            continue
        duplicates = r["rows"] - r["unique"] if r["unique"] is not None else 0
        count = f"{r['rows']:,}" + (f"\n+{duplicates:,} dup" if duplicates else "")  # a line of its own
        table.add_row(
            esc(r["encoder"]),
            fingerprint,
            count,
            str(r["dim"]),
            _size(r["bytes"]),
            str(r["fragments"]),
            esc(", ".join(r["datasets"])) or "—",
        )
    return table


@cache_app.command("list")
def list_tables(
    ctx: typer.Context,
    cache_dir: str | None = typer.Option(None, "--cache-dir", help=CACHE_DIR_HELP),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output: a list of tables"),
    keep_manifests: list[Path] | None = typer.Option(
        None, "--manifests", help="more manifests to match tables to datasets (repeatable)"
    ),
):
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
    console.print(f"embedding store {esc(where)}", overflow="fold")
    console.print(cache_table(rows))


@cache_app.command()
def compact(
    ctx: typer.Context,
    tables: list[str] | None = typer.Argument(None, help="table names (default: every table)"),
    cache_dir: str | None = typer.Option(None, "--cache-dir", help=CACHE_DIR_HELP),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output: what each table became"),
):
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
            console.print(f"no embedding tables in {esc(where)}")
        for path in paths:
            if not committed(path):
                results.append({"table": path.name, "skipped": "incomplete"})
                if not as_json:
                    console.print(
                        f"{esc(path.name)}: incomplete (never committed), skipped; `drift cache gc` removes it"
                    )
                continue
            r = {**compact_table(path), "skipped": None}
            results.append(r)
            if not as_json:
                console.print(
                    f"{esc(r['table'])}: {r['duplicates_removed']:,} duplicates removed, fragments "
                    f"{r['fragments_before']} → {r['fragments_after']}, "
                    f"{_size(r['bytes_before'])} → {_size(r['bytes_after'])}"
                )
    except DriftError as e:
        fail(e)
    except OSError as e:
        fail(
            DriftError(
                f"compaction failed: {str(e).splitlines()[0]} (another process compacting? run it again)"
            )
        )
    if as_json:
        _emit({"cache_dir": str(where), "tables": results})


@cache_app.command()
def gc(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="list what would be deleted, delete nothing"),
    keep_manifests: list[Path] | None = typer.Option(
        None,
        "--keep-manifests",
        help="also keep tables these manifests use: a manifest, a folder of them or "
        "a repository (repeatable)",
    ),
    grace_minutes: float = typer.Option(
        60, help="keep tables written this recently (an embed may be running)"
    ),
    cache_dir: str | None = typer.Option(None, "--cache-dir", help=CACHE_DIR_HELP),
    as_json: bool = typer.Option(
        False, "--json", help="machine-readable output: what was (or would be) deleted"
    ),
):
    """Delete the tables no manifest in data/embeddings/ (or --keep-manifests) refers to, and the checkpoints
    and cells no checkpoint list (data/models/*/checkpoints.json here, in the `dvc exp` refs, or in a
    repository passed with --keep-manifests) refers to: only files whose header says drift wrote them, any
    other is left."""
    from drift.store.embeddings import (
        table_info,  # lazy: lance, kept out of `drift --help`
    )

    as_json = _json_flag(ctx, as_json)
    console = Console()
    try:
        where = resolve_cache_dir(_cache_dir_option(ctx, cache_dir))
        sources = _sources(keep_manifests)
        if not sources:
            raise DriftError(
                f"no manifests in ./{MANIFESTS}/ and no --keep-manifests: refusing to delete every table "
                "(run from the repository root, or pass --keep-manifests)"
            )
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
                console.print(
                    f"keep   {esc(path.name)}: unused, but written {age:.0f} min ago "
                    f"(--grace-minutes {grace_minutes:g})"
                )
            continue
        if not as_json:
            console.print(
                f"{'would delete' if dry_run else 'delete'} {esc(path.name)} ({_size(info['bytes'])})"
            )
        if not dry_run:
            remove_tree(path)
            if not isinstance(path, ObjectPath):
                path.with_name(path.name + ".lock").unlink(missing_ok=True)
        deleted.append({"table": path.name, "bytes": info["bytes"]})
    freed = sum(d["bytes"] for d in deleted)
    keys, listed = checkpoint_refs([Path("."), *[p for p in keep_manifests or [] if Path(p).is_dir()]])
    if listed:
        collected = collect_checkpoints(where, keys, grace_minutes, dry_run)
    else:  # no checkpoint list seen: deleting every checkpoint would be a guess
        collected = {
            "checkpoints": [],
            "cells": [],
            "bytes": 0,
            "foreign": [],
            "skipped": f"no ./{MODELS}/*/{CHECKPOINT_KEYS}",
        }
    if as_json:
        _emit(
            {
                "cache_dir": str(where),
                "dry_run": dry_run,
                "deleted": deleted,
                "freed_bytes": freed,
                "kept_recent": recent,
                "in_use": sorted(refs),
                "checkpoints": {**collected, "in_use": len(keys), "listed_by": listed},
            }
        )
        return
    verb = "would free" if dry_run else "freed"
    console.print(
        f"{len(deleted)} table(s) {'to delete' if dry_run else 'deleted'}, {verb} {_size(freed)}; "
        f"{len(refs)} in use"
    )
    if not listed:
        console.print(
            f"checkpoints and cells kept: no ./{MODELS}/*/{CHECKPOINT_KEYS} (run from the repository root)"
        )
        return
    console.print(
        f"{len(collected['checkpoints'])} checkpoint(s) and the cells of {len(collected['cells'])} "
        f"{'to delete' if dry_run else 'deleted'}, {verb} {_size(collected['bytes'])}; {len(keys)} "
        f"checkpoint(s) in use ({len(listed)} list(s))"
    )
    if collected["foreign"]:
        console.print(foreign_line(collected["foreign"]), highlight=False)


# ---------------------------------------------------------------- checkpoints and cells


def checkpoint_files(where) -> list:
    if isinstance(where, ObjectPath):
        return sorted((where / "checkpoints").rglob("*.ckpt"))
    return sorted((where / "checkpoints").glob("*/*.ckpt"))


def cell_dirs(where) -> list:
    if isinstance(
        where, ObjectPath
    ):  # cells/<checkpoint[:2]>/<checkpoint>/<key>.json: the folders that hold one
        return sorted({p.parent for p in (where / "cells").rglob("*.json")})
    return sorted(p for p in (where / "cells").glob("*/*") if p.is_dir())


def checkpoint_digest(path) -> str | None:
    """The sha256 of a cached checkpoint's bytes, from its header line (what its cells are filed under)."""
    header = read_header(path)
    return header.sha256 if header else None


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def _dvc_cached(repo: Path, md5: str) -> Path:
    return repo / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]


def experiment_keys(repo: Path) -> set[str]:
    """Checkpoint keys the `dvc exp` refs of `repo` list: each experiment's dvc.lock names its
    data/models/<ds> directory, whose listing and checkpoints.json the DVC cache holds. Whatever cannot be
    read is skipped."""
    import yaml  # lazy: only with experiments to read

    keys: set[str] = set()
    try:
        commits = _git(repo, "for-each-ref", "refs/exps", "--format=%(objectname)").split()
    except (OSError, subprocess.CalledProcessError):
        return keys
    for commit in commits:
        try:
            lock = yaml.safe_load(_git(repo, "show", f"{commit}:dvc.lock")) or {}
        except (OSError, subprocess.CalledProcessError, yaml.YAMLError):
            continue
        for stage in (lock.get("stages") or {}).values():
            for out in stage.get("outs") or []:
                if not str(out.get("path", "")).startswith(f"{MODELS}/") or not str(
                    out.get("md5", "")
                ).endswith(".dir"):
                    continue
                try:
                    listing = json.loads(_dvc_cached(repo, out["md5"][:-4]).with_suffix(".dir").read_text())
                    entry = next(e for e in listing if e.get("relpath") == CHECKPOINT_KEYS)
                    keys |= set(json.loads(_dvc_cached(repo, entry["md5"]).read_text()).values())
                except (OSError, ValueError, StopIteration, KeyError):
                    continue
    return keys


def checkpoint_refs(repos: list[Path]) -> tuple[set[str], list[str]]:
    """(checkpoint keys in use, where they were read): each repository's data/models/*/checkpoints.json and
    its `dvc exp` refs."""
    keys, seen = set(), []
    for repo in repos:
        for listing in sorted((Path(repo) / MODELS).glob(f"*/{CHECKPOINT_KEYS}")):
            try:
                keys |= set(json.loads(listing.read_text()).values())
                seen.append(str(listing))
            except (OSError, ValueError):
                continue
        found = experiment_keys(Path(repo))
        if found:
            keys |= found
            seen.append(f"{repo}: dvc exp refs")
    return keys, seen


def _age_minutes(path) -> float:
    if isinstance(path, ObjectPath) and not path.is_file():  # a prefix: its newest object
        return (time.time() - max((m for _, _, m in path.objects()), default=0.0)) / 60
    return (time.time() - path.stat().st_mtime) / 60


def collect_checkpoints(
    where: Path | ObjectPath, keep: set[str], grace_minutes: float, dry_run: bool
) -> dict:
    """Delete the checkpoints whose key is not in `keep`, then the cells of every checkpoint no longer kept:
    only files drift wrote (`written_by_drift`); any other file there is left and listed in `foreign`."""
    checkpoints: list[str] = []
    cells: list[str] = []
    foreign: list[str] = []
    freed = 0
    live = set()
    for path in checkpoint_files(where):
        if path.stem in keep or _age_minutes(path) < grace_minutes:
            live.add(checkpoint_digest(path))
        elif not written_by_drift(path):
            foreign.append(str(path))
        else:
            freed += path.stat().st_size
            checkpoints.append(str(path))
            if not dry_run:
                path.unlink(missing_ok=True)
    for directory in cell_dirs(where):
        if directory.name in live or _age_minutes(directory) < grace_minutes:
            continue
        ours, others = cell_files(directory)
        foreign += [str(p) for p in others]
        if not ours:
            continue
        freed += sum(p.stat().st_size for p in ours)
        cells.append(str(directory))
        if not dry_run:
            remove_files(directory, ours, emptied=not others)
    return {"checkpoints": checkpoints, "cells": cells, "bytes": freed, "foreign": foreign}


def cell_files(directory) -> tuple[list, list]:
    """(the files drift wrote, everything else) in a cell folder."""
    if isinstance(directory, ObjectPath):
        entries = [(p, p.parent == directory) for p, _, _ in directory.objects()]
    else:
        entries = [(p, p.is_file()) for p in sorted(directory.iterdir())]
    ours: list = []
    others: list = []
    for path, plain in entries:
        (ours if plain and written_by_drift(path) else others).append(path)
    return ours, others


def remove_files(directory, files: list, emptied: bool) -> None:
    """Delete a cell folder's files, and the folder once they were all it held (a prefix on object storage
    goes with its last object)."""
    for path in files:
        path.unlink(missing_ok=True)
    if emptied and not isinstance(directory, ObjectPath):
        try:
            directory.rmdir()
        except OSError:  # a cell written since: kept with it
            pass


def foreign_line(foreign: list[str]) -> str:
    more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
    return (
        f"{len(foreign)} file(s) under checkpoints/ and cells/ are not drift's (no drift header), left alone: "
        f"{esc(foreign[0])}{more}"
    )


def no_cache(where) -> str | None:
    """Why `where` is no drift cache to verify, None when it is one, or an empty folder (nothing cached there
    yet). A drift cache holds an embedding table (a *.lance folder), checkpoints/ or cells/."""
    if not where.exists():
        return "it does not exist"
    if where.is_file():
        return "it is a file"
    if store_tables(where) or (where / "checkpoints").is_dir() or (where / "cells").is_dir():
        return None
    if next(iter(where.iterdir()), None) is None:
        return None
    return "it holds no embedding table (*.lance), checkpoints/ or cells/"


def table_problems(where) -> tuple[int, list[dict]]:
    """(committed tables checked, their damage): every row read and checked against its checksum."""
    import lance  # lazy: kept out of `drift --help`

    from drift.store.embeddings import (  # lazy: lance, kept out of `drift --help`
        committed,
        scan_damage,
    )

    checked, corrupt = 0, []
    for path in store_tables(where):
        if not committed(path):
            continue  # a killed first write: never served, `drift cache gc` removes it
        checked += 1
        try:
            dataset = lance.dataset(str(path))
            rows = sum(batch.num_rows for batch in dataset.to_batches(columns=["key"]))
            if rows != dataset.count_rows():
                corrupt.append(
                    {"path": str(path), "problem": f"{rows} rows read, {dataset.count_rows()} committed"}
                )
            corrupt += [damage_entry(path, damage) for damage in scan_damage(path)]
        except Exception as e:  # any failure to read a table is what verify reports
            corrupt.append({"path": str(path), "problem": " ".join(str(e).split())[:200]})
    return checked, corrupt


def damage_entry(path, damage: dict) -> dict:
    keys = (
        f"keys {damage['first_key']} .. {damage['last_key']}"
        if damage["first_key"] is not None
        else "unreadable"
    )
    return {
        "path": str(path),
        "fragment": damage["fragment"],
        "rows": damage["rows"],
        "first_key": damage["first_key"],
        "last_key": damage["last_key"],
        "problem": f"fragment {damage['fragment']}: {damage['rows']} row(s), {keys}: {damage['problem']}",
    }


def entry_problems(where) -> tuple[dict[str, int], list[dict], list[dict]]:
    """({checkpoints, cells}: how many checked, the corrupt ones, those of another cache format): each entry
    against its checksum and the key its file name says."""
    checked = {"checkpoints": 0, "cells": 0}
    corrupt: list[dict] = []
    other: list[dict] = []

    def note(path, problem: str | None) -> None:
        if problem:
            (other if other_format(problem) else corrupt).append({"path": str(path), "problem": problem})

    for path in checkpoint_files(where):
        checked["checkpoints"] += 1
        note(path, checkpoint_problem(path.read_bytes(), path.stem))
    for directory in cell_dirs(where):
        for path in sorted(directory.glob("*.json")):
            checked["cells"] += 1
            note(path, cell_problem(path))
    return checked, corrupt, other


@cache_app.command()
def verify(
    ctx: typer.Context,
    cache_dir: str | None = typer.Option(None, "--cache-dir", help=CACHE_DIR_HELP),
    as_json: bool = typer.Option(
        False, "--json", help="machine-readable output: what was checked, what is corrupt"
    ),
):
    """Check every cache: the store's tables (every row read and checked against its checksum, finite values;
    damage named by fragment and key range), the cached checkpoints and cells (their sha256 and the key they
    are filed under), and this workspace's feature files (size and sha256 against their header). Exit 1 when
    anything is corrupt, 2 when the folder is no drift cache."""
    from drift.store.features import (
        file_problem,  # lazy: lance, kept out of `drift --help`
    )

    as_json = _json_flag(ctx, as_json)
    try:
        where = resolve_cache_dir(_cache_dir_option(ctx, cache_dir))
        if reason := no_cache(where):
            raise DriftError(
                f"drift cache verify: no drift cache at {where} ({reason}): pass the folder embed.cache_dir "
                "names (or --cache-dir), or set DRIFT_CACHE_DIR"
            )
    except DriftError as e:
        fail(e)
    empty = next(iter(where.iterdir()), None) is None  # a folder: no_cache refused anything else
    tables, corrupt = table_problems(where)
    entries, damaged, other = entry_problems(where)
    corrupt += damaged
    checked = {"tables": tables, **entries, "features": 0}
    for directory in sorted(p for p in FEATURES.glob("*/*") if p.is_dir()):
        checked["features"] += 1
        if problem := file_problem(directory):
            corrupt.append({"path": str(directory), "problem": problem})
    if as_json:
        _emit({"cache_dir": str(where), "checked": checked, "corrupt": corrupt, "other_format": other})
    else:
        console = Console()
        for c in corrupt:
            console.print(f"corrupt {esc(c['path'])}: {esc(c['problem'])}", overflow="fold", highlight=False)
        for c in other:
            console.print(f"stale {esc(c['path'])}: {esc(c['problem'])}", overflow="fold", highlight=False)
        console.print(
            f"checked {checked['tables']} table(s), {checked['checkpoints']} checkpoint(s), "
            f"{checked['cells']} cell(s) in {esc(where)}{' (empty)' if empty else ''} and {checked['features']} "
            f"feature folder(s) in ./{FEATURES}: {len(corrupt)} corrupt"
            + (" (the stages recompute them on their next run)" if corrupt else "")
            + (f", {len(other)} of another cache format (misses, computed again when used)" if other else ""),
            highlight=False,
        )
    if corrupt:
        raise typer.Exit(1)


# ---------------------------------------------------------------- why a table is computed anew


def why_encoder(name: str, cfg, where) -> dict:
    """{encoder, fingerprint, table, in_store, rows, nearest}: encoder `name` built as the embed stage builds
    it from the `embed` params `cfg`, the store table of the fingerprint it would use now, whether the store
    holds that table (and its rows), else the nearest table there ({table, rows, changes}; None when no table
    records its fields)."""
    from drift.encoders.embed import (  # lazy: torch, only to build the encoder
        embed_encoder,
        store_fields,
        store_key,
        text_encoder,
    )
    from drift.store.embeddings import committed, find_table
    from drift.store.neighbours import nearest_table, table_rows

    encoder = text_encoder(cfg) if name == cfg.text_encoder else embed_encoder(name, cfg)
    fields = store_fields(encoder, cfg.pooled_dtype)
    fingerprint = store_key(fields)
    table = find_table(where, name, fingerprint)
    path = location(where) / table
    report = {"encoder": name, "fingerprint": fingerprint, "table": table}
    if committed(path):
        return {**report, "in_store": True, "rows": table_rows(path), "nearest": None}
    near = nearest_table(where, fields, skip=table)
    if near is not None:
        near = {"table": near["table"], "rows": table_rows(near["path"]), "changes": near["changes"]}
    return {**report, "in_store": False, "rows": 0, "nearest": near}


def why_lines(dataset: str, report: dict) -> list[str]:
    """What `drift cache why` prints for one encoder (markup escaped)."""
    from drift.store.neighbours import change_text

    head = f"{esc(dataset)} with {esc(report['encoder'])}"
    if report["in_store"]:
        return [f"{head}: in the store ({report['rows']:,} rows), {esc(report['table'])}"]
    near = report["nearest"]
    if near is None:
        return [f"{head}: not in the store ({esc(report['table'])}), and no table there records its fields"]
    lines = [
        f"{head}: not in the store ({esc(report['table'])}); the nearest table, {esc(near['table'])} "
        f"({near['rows']:,} rows), differs in"
    ]
    return lines + [f"  {esc(change_text(c))}" for c in near["changes"]]


@cache_app.command()
def why(
    ctx: typer.Context,
    dataset: str = typer.Argument(..., help="a dataset (its modality decides the encoders)"),
    encoder: str | None = typer.Argument(None, help="one encoder the dataset's embed runs (default: each)"),
    cache_dir: str | None = typer.Option(None, "--cache-dir", help=CACHE_DIR_HELP),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output: each encoder's table"),
):
    """Whether the dataset's embed would find each encoder's rows in the store, and if not, why: the
    fingerprint it would use now (./params.yaml's embed settings, the dataset's own over them), the nearest
    table there (same hub_id and weights first, then the fewest differing fields) and each field that differs,
    `field old → new`."""
    as_json = _json_flag(ctx, as_json)
    try:
        # the dataset's embed settings, as its embed stage reads them; registers the encoders params.yaml
        # declares
        params = load_params(dataset=dataset)
        names = params.embed.dataset_encoders(params.info(dataset).modality)
        if encoder is not None:
            if encoder not in names:
                raise DriftError(
                    f"the embed of {dataset} runs no encoder {encoder!r}: "
                    f"{close_matches(encoder, names) if names else 'it runs none'} "
                    "(embed.text_encoder and embed.encoders of params.yaml)"
                )
            names = [encoder]
        where = resolve_cache_dir(_cache_dir_option(ctx, cache_dir))
        reports = [why_encoder(name, params.embed, where) for name in names]
    except DriftError as e:
        fail(e)
    if as_json:
        _emit({"dataset": dataset, "cache_dir": str(where), "encoders": reports})
        return
    console = Console()
    if not reports:
        console.print(f"the embed of {esc(dataset)} runs no encoder (embed.encoders names none of its kind)")
    for report in reports:
        for line in why_lines(dataset, report):
            console.print(line, overflow="fold", highlight=False)

"""Why an embedding table is computed anew: the store's table nearest a fingerprint, and the fields that
differ.

Every table carries the fingerprint fields it was computed under in its metadata (`drift.fingerprint_fields`).
`nearest_table` ranks the store's tables against the fields an encoder would use now: those of the same hub_id
and weights first, then the fewest differing fields. `changes` lists the differences with nested fields
flattened (`libraries.torch`); `change_text` writes one as `max_length 64 → 128`, a long hex digest cut to its
first 8 characters. Tables written without fields (by hand, or before they were recorded) are never a
neighbour.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.compute as pc

from drift.core.objectstore import ObjectPath, location
from drift.store.embeddings import committed

DIGEST = re.compile(r"[0-9a-f]{32,}")  # a sha256 (weights, code): shown by its first 8 characters
SHOWN = 8


def flatten(fields: dict, prefix: str = "") -> dict:
    """{dotted name: value}: a nested mapping's entries under `name.key` (`libraries.torch`)."""
    flat: dict = {}
    for name, value in fields.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = value
    return flat


def changes(old: dict, new: dict) -> list[dict]:
    """[{field, old, new}] of the flattened fields that differ, by field name; a field one side lacks is None."""
    before, after = flatten(old), flatten(new)
    return [
        {"field": name, "old": before.get(name), "new": after.get(name)}
        for name in sorted(before.keys() | after.keys())
        if before.get(name) != after.get(name)
    ]


def shown(value) -> str:
    """A field's value in a line: a digest cut to its first characters, a missing field as —."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return f"{value[:SHOWN]}…" if DIGEST.fullmatch(value) else value
    return json.dumps(value)


def change_text(change: dict) -> str:
    return f"{change['field']} {shown(change['old'])} → {shown(change['new'])}"


def changes_text(found: list[dict], most: int | None = None) -> str:
    """The changes in one line, comma-separated; past `most` of them, how many more."""
    listed = found if most is None else found[:most]
    more = f", and {len(found) - len(listed)} more" if len(found) > len(listed) else ""
    return ", ".join(change_text(c) for c in listed) + more


def table_fields(path) -> dict | None:
    """The fingerprint fields a committed table was written with (its metadata), None when it records none."""
    metadata = lance.dataset(str(path)).schema.metadata or {}
    raw = metadata.get(b"drift.fingerprint_fields")
    return json.loads(raw) if raw is not None else None


def table_rows(path) -> int:
    return lance.dataset(str(path)).count_rows()


def _tables(cache_dir) -> list:
    where = location(cache_dir)
    if isinstance(where, ObjectPath):
        return sorted(where.glob("*.lance"))
    return sorted(p for p in Path(where).glob("*.lance") if p.is_dir()) if Path(where).is_dir() else []


def nearest_table(cache_dir, fields: dict, skip: str | None = None) -> dict | None:
    """The committed table of the store nearest `fields`, other than the one named `skip`: {table, path,
    fields, changes}, or None when no table records its fields. Same hub_id and weights_sha256 rank first,
    then fewer differing fields, then the name."""
    found = []
    for path in _tables(cache_dir):
        if path.name == skip or not committed(path):
            continue
        recorded = table_fields(path)
        if recorded is None:
            continue
        differ = changes(recorded, fields)
        rank = (
            recorded.get("hub_id") != fields.get("hub_id"),
            recorded.get("weights_sha256") != fields.get("weights_sha256"),
            len(differ),
            path.name,
        )
        found.append((rank, {"table": path.name, "path": path, "fields": recorded, "changes": differ}))
    return min(found, key=lambda item: item[0])[1] if found else None


def rows_held(path, keys) -> int:
    """How many of `keys` (distinct) the table at `path` holds: one read of its key column."""
    stored = lance.dataset(str(path)).to_table(columns=["key"]).column("key").combine_chunks()
    wanted = pc.unique(pa.array(list(keys), stored.type))
    return int(pc.sum(pc.is_in(wanted, value_set=stored)).as_py() or 0)

"""The code a stage runs: a script's import closure inside drift/ (imports inside functions count, and so does
a string naming a drift module, as the dataset registry's importlib names do). dvc.yaml's code deps are
written from it (drift/run/pipeline.py) and the checkpoint and cell keys hash the same files
(drift/store/cells.py), so what re-runs a stage and what invalidates its cache are one statement.
`code_digest` hashes such a set of files with the versions of the libraries they import (an encoder's
fingerprint, the checkpoint and cell keys: only those that compute each key's numbers); it hashes each file's
syntax tree with docstrings removed (comments never reach it), so prose edits change no key."""

from __future__ import annotations

import ast
import hashlib
import json
import sys
from functools import lru_cache
from pathlib import Path

from drift.core.environment import library_versions
from drift.core.errors import DriftError

ROOT = Path(__file__).resolve().parents[2]  # the checkout: drift/ and stages/ beside each other


def module_file(module: str, root: Path = ROOT) -> Path | None:
    base = root / Path(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


@lru_cache(maxsize=4096)
def _imports(path: str, mtime_ns: int, size: int, root: Path) -> tuple[frozenset, frozenset]:
    """(drift modules, other top-level modules) a file imports: parsed once per version of the file."""
    found, external = set(), set()
    for node in ast.walk(ast.parse(Path(path).read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "drift"}
            external |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            external.add(node.module.split(".")[0])
            if node.module.split(".")[0] == "drift":
                found.add(node.module)
                found |= {
                    f"{node.module}.{a.name}"
                    for a in node.names
                    if module_file(f"{node.module}.{a.name}", root)
                }
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith("drift.")
            and node.value.replace(".", "").replace("_", "").isalnum()
            and module_file(node.value, root)
        ):
            found.add(node.value)
    return frozenset(found), frozenset(
        m for m in external if m != "drift" and m not in sys.stdlib_module_names
    )


def _parsed(path: Path, root: Path) -> tuple[frozenset, frozenset]:
    stat = Path(path).stat()
    return _imports(str(path), stat.st_mtime_ns, stat.st_size, Path(root))


def imported_modules(path: Path, root: Path = ROOT) -> set[str]:
    """drift.* modules a file imports anywhere in it, imports inside functions included; a string naming a
    drift module (the dataset registry's "drift.data.datasets.amazon", imported by importlib) counts too."""
    return set(_parsed(path, root)[0])


def import_closure(script: Path, root: Path = ROOT, exclude=()) -> list[str]:
    """Every file of drift/ a script needs (relative paths, sorted), its packages' __init__.py included; files
    in `exclude` (relative paths) are neither listed nor followed."""
    skip = {Path(root) / name for name in exclude}
    seen: set[Path] = set()
    todo = [script]
    while todo:
        for module in imported_modules(todo.pop(), root):
            parts = module.split(".")
            for i in range(1, len(parts) + 1):
                f = module_file(".".join(parts[:i]), root)
                if f is not None and f not in seen and f not in skip:
                    seen.add(f)
                    todo.append(f)
    return sorted(str(f.relative_to(root)) for f in seen)


def _existing_module_file(module: str, root: Path) -> Path:
    path = module_file(module, root)
    if path is None:
        raise DriftError(f"no module {module} under {root}: name a module of drift/ (e.g. drift.train.loop)")
    return path


def module_path(module: str, root: Path = ROOT) -> str:
    return str(_existing_module_file(module, root).relative_to(root))


def module_closure(module: str, root: Path = ROOT, exclude=()) -> list[str]:
    """A module's own file and its import closure (relative paths, sorted; `exclude` as import_closure's)."""
    return sorted(
        {module_path(module, root), *import_closure(_existing_module_file(module, root), root, exclude)}
    )


def external_imports(files, root: Path = ROOT) -> set[str]:
    """The top-level modules outside drift/ and the standard library that these files import, anywhere in
    them."""
    return set().union(*(_parsed(Path(root) / name, root)[1] for name in files))


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


@lru_cache(maxsize=4096)
def _code_text(source: bytes) -> bytes:
    """code_text of a file's bytes: parsed once per content, wherever the file lies (a copy of the tree too)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and _is_docstring(body[0])
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False, include_attributes=False).encode()


def code_text(path: Path) -> bytes:
    """What of a Python file decides what it computes: its syntax tree, normalised, without docstrings
    (module, class and function) or comments; the same for two files that differ only in prose or layout."""
    return _code_text(Path(path).read_bytes())


def code_digest(files, root: Path = ROOT, key: str | None = None) -> str:
    """sha256 over the files' names and code (code_text: docstrings, comments and layout left out; a file that
    is not Python by its bytes) and the installed versions of the libraries they import (and of what those
    require): what decides the results of code made of these files. `key` (a cache key's name, e.g. "encoder")
    keeps only the libraries that compute its numbers (drift.core.environment.KEY_LIBRARIES)."""
    digest = hashlib.sha256()
    for name in sorted(files):
        path = Path(root) / name
        digest.update(name.encode())
        digest.update(code_text(path) if path.suffix == ".py" else path.read_bytes())
    digest.update(json.dumps(library_versions(external_imports(files, root), key), sort_keys=True).encode())
    return digest.hexdigest()

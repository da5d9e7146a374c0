"""The code a stage runs: a script's import closure inside drift/ (imports inside functions count, and so does a
string naming a drift module, as the dataset registry's importlib names do). dvc.yaml's code deps are written
from it (drift/run/pipeline.py) and the checkpoint and cell keys hash the same files (drift/store/cells.py), so
what re-runs a stage and what invalidates its cache are one statement."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout: drift/ and stages/ beside each other


def module_file(module: str, root: Path = ROOT) -> Path | None:
    base = root / Path(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def imported_modules(path: Path, root: Path = ROOT) -> set[str]:
    """drift.* modules a file imports anywhere in it, imports inside functions included; a string naming a
    drift module (the dataset registry's "drift.data.datasets.amazon", imported by importlib) counts too."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "drift"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "drift":
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names if module_file(f"{node.module}.{a.name}", root)}
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("drift.")
              and node.value.replace(".", "").replace("_", "").isalnum() and module_file(node.value, root)):
            found.add(node.value)
    return found


def import_closure(script: Path, root: Path = ROOT) -> list[str]:
    """Every file of drift/ a script needs (relative paths, sorted), its packages' __init__.py included."""
    seen: set[Path] = set()
    todo = [script]
    while todo:
        for module in imported_modules(todo.pop(), root):
            parts = module.split(".")
            for i in range(1, len(parts) + 1):
                f = module_file(".".join(parts[:i]), root)
                if f is not None and f not in seen:
                    seen.add(f)
                    todo.append(f)
    return sorted(str(f.relative_to(root)) for f in seen)

"""The import graph of drift/ points down: every module sits in a layer, imports only from its own layer or
below, and no chain of imports comes back to where it started. Imports inside functions count, and so do
modules named by a string (the dataset registry's importlib names): both run.

Layers, bottom to top (docs/architecture.md explains each):
    base      errors, progress, environment, paths, stage: no drift imports beyond this layer
    schema    the registries' tables and the typed params.yaml
    data      records, the store, slicing, dataset readers, ingest, fetch
    compute   encoders, embedding, models, inputs, training, evaluation
    analysis  summaries, plots, saliency, the report, the readers of results
    top       validation of a whole run, dvc.yaml's writer, the CLI
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {
    "base": ["errors", "progress", "environment", "paths", "stage"],
    "schema": ["encoders.registry", "encoders", "params", "presets", "metrics", "tasks"],
    "data": ["ledger", "records", "store", "slicing", "datasets", "datasets.*", "ingest", "fetch"],
    "compute": ["executor", "encoders.*", "embed", "models", "models.*", "checkpoints", "inputs", "features", "engine",
                "cells", "slice_data", "estimate", "train", "evaluate", "plan"],
    "analysis": ["summary", "plots", "saliency", "report", "results", "policy", "html_report", "shift", "novelty"],
    "top": ["validate", "roster", "pipeline", "cli", "cli.*"],
}
ORDER = list(LAYERS)


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT / "drift").with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def layer_of(module: str) -> str:
    """The layer whose list names the module exactly, else the one with its package's `pkg.*`."""
    for layer, names in LAYERS.items():
        if module in names:
            return layer
    for layer, names in LAYERS.items():
        if any(n.endswith(".*") and module.startswith(n[:-1]) for n in names):
            return layer
    raise AssertionError(f"drift.{module} is in no layer of tests/test_layers.py: add it where it belongs")


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in (ROOT / "drift").rglob("*.py") if module_name(p) != ""}


def imports(path: Path, known: set[str]) -> set[str]:
    """drift modules (without the `drift.` prefix) that a file imports or names by string."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        for name in names:
            if name.startswith("drift.") and name[6:] in known:
                found.add(name[6:])
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    # a package's __init__ importing its own submodules is how a package is assembled (cli, models): not upward
    return {m: {i for i in imports(p, known) if i != m} for m, p in mods.items()}


def test_every_module_imports_only_its_layer_or_below():
    upward = []
    for module, imported in graph().items():
        for other in imported:
            if ORDER.index(layer_of(other)) > ORDER.index(layer_of(module)):
                upward.append(f"drift.{module} ({layer_of(module)}) imports drift.{other} ({layer_of(other)})")
    assert not upward, "imports that climb:\n" + "\n".join(sorted(upward))


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycle():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(f"drift.{m}" for m in cycle)


def test_the_checks_catch_a_climb_and_a_cycle():
    # the walker on hand-made graphs: both kinds of defect are found, a clean graph passes
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert ORDER.index(layer_of("cli.report")) > ORDER.index(layer_of("results")) > ORDER.index(layer_of("train"))
    assert layer_of("datasets.amazon") == "data" and layer_of("encoders.text") == "compute"
    # the real graph has the edges the layers rest on
    g = graph()
    assert "params" in g["slicing"] and "datasets.amazon" in g["datasets"] and "cli.report" in g["cli"]

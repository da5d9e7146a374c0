"""The import graph of drift/ points down: the packages of drift/ are its layers, every module imports only
from its own package or one below it, and no chain of imports comes back to where it started. Imports inside
functions count, and so do modules named by a string (the dataset registry's importlib names): both run.

The order, bottom to top, is LAYERS (docs/architecture.md walks through it; docs/explanations/layout.md is
the folder listing).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from tests.helpers import LAYER_PACKAGES

ROOT = Path(__file__).resolve().parents[2]
LAYERS = list(LAYER_PACKAGES)
ORDER = LAYERS


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT / "drift").with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def layer_of(module: str) -> str:
    """The package a module sits in: the first part of its name below drift."""
    layer = module.split(".")[0]
    if layer not in LAYERS:
        raise AssertionError(
            f"drift.{module} is in no layer package ({', '.join(LAYERS)}): move it into the one "
            f"it belongs to, or add its package to LAYER_PACKAGES in tests/helpers.py"
        )
    return layer


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


@functools.cache  # drift/ does not change during the run: parsed once for every test here
def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    # a package's __init__ importing its own submodules is how a package is assembled (cli, models): not
    # upward
    return {m: {i for i in imports(p, known) if i != m} for m, p in mods.items()}


def test_every_module_imports_only_its_layer_or_below():
    upward = []
    for module, imported in graph().items():
        for other in imported:
            if ORDER.index(layer_of(other)) > ORDER.index(layer_of(module)):
                upward.append(
                    f"drift.{module} ({layer_of(module)}) imports drift.{other} ({layer_of(other)})"
                )
    assert not upward, "imports that climb:\n" + "\n".join(sorted(upward))


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
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


def test_the_folder_listing_is_the_layers():
    # drift/ holds the layer packages and nothing else beside its __init__: a new flat module has no layer
    loose = sorted(p.name for p in (ROOT / "drift").glob("*.py") if p.name != "__init__.py")
    packages = sorted(p.name for p in (ROOT / "drift").iterdir() if (p / "__init__.py").exists())
    assert not loose, f"modules outside every layer package: {loose}"
    assert packages == sorted(LAYERS), f"packages {packages} are not the layers {sorted(LAYERS)}"


def test_the_checks_catch_a_climb_and_a_cycle():
    # the walker on hand-made graphs: both kinds of defect are found, a clean graph passes
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert (
        ORDER.index(layer_of("cli.report"))
        > ORDER.index(layer_of("report.results"))
        > ORDER.index(layer_of("train.loop"))
    )
    assert layer_of("data.datasets.amazon") == "data" and layer_of("encoders.text") == "encoders"
    try:
        layer_of("loose_module")
    except AssertionError as e:
        assert "no layer package" in str(e)
    else:
        raise AssertionError("a module outside the layer packages was given a layer")
    # the real graph has the edges the layers rest on
    g = graph()
    assert "core.params" in g["protocol.slicing"] and "data.datasets._io" in g["data.datasets.amazon"]
    assert "cli.report_commands" in g["cli.drift_app"] and "cli.drift_app" in g["cli"]


def shared_basenames(names: list[str]) -> dict[str, list[str]]:
    """Last parts of module (and package) names that more than one of them ends in."""
    by_last: dict[str, list[str]] = {}
    for name in names:
        by_last.setdefault(name.split(".")[-1], []).append(name)
    return {last: sorted(full) for last, full in by_last.items() if len(full) > 1}


def test_no_two_modules_share_a_name():
    # a name says one thing: cli/plan.py beside run/plan.py, or core/datasets.py beside data/datasets/, makes
    # every `plan` or `datasets` in a traceback, an import or a grep ambiguous
    names = [m for m in modules() if m.split(".")[-1] != "__main__"]
    assert shared_basenames(names) == {}, f"modules sharing a name: {shared_basenames(names)}: rename one"
    assert shared_basenames(
        ["cli.plan", "run.plan", "core.datasets", "data.datasets", "data.datasets.amazon"]
    ) == {"plan": ["cli.plan", "run.plan"], "datasets": ["core.datasets", "data.datasets"]}


# packages that must not reach into another one even though it sits below them: evaluation and the label-free
# analysis read a dataset through drift.models.slice_data and drift.store, never through the training code
KEPT_APART = {"evaluate": {"train"}, "analysis": {"train"}}


def test_evaluate_and_analysis_never_import_train():
    crossings = [
        f"drift.{module} imports drift.{other}"
        for module, imported in graph().items()
        for other in imported
        if layer_of(other) in KEPT_APART.get(layer_of(module), ())
    ]
    assert not crossings, "imports the layers keep apart:\n" + "\n".join(sorted(crossings))


def test_the_slice_table_carries_no_params():
    # the dataset view train, evaluate and analysis share is made without params.yaml: the slice table imports
    # no params, and SliceData takes the InputSettings its resolver (input_settings) makes of them, not Params
    assert "core.params" not in graph()["store.slice_table"]
    tree = ast.parse((ROOT / "drift" / "models" / "slice_data.py").read_text())
    init = next(
        f
        for c in tree.body
        if isinstance(c, ast.ClassDef) and c.name == "SliceData"
        for f in c.body
        if isinstance(f, ast.FunctionDef) and f.name == "__init__"
    )
    assert [a.arg for a in init.args.args] == ["self", "name", "settings", "root"]
    assert not any(
        isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and n.value.attr == "params"
        for n in ast.walk(init)
    ), "SliceData reads self.params"

"""dvc.yaml's code dependencies are complete: each stage depends on every module of drift/ its script imports,
directly or through other modules (imports inside functions included), so editing any of them re-runs it."""

from __future__ import annotations

import ast
import functools
import shutil
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


@functools.cache  # the checkout's files do not change during the run: each is parsed once
def module_file(module: str) -> Path | None:
    base = ROOT / Path(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


@functools.cache
def imported_modules(path: Path) -> frozenset[str]:
    """drift.* modules a file imports anywhere in it (`from drift.x import y` may name a submodule y)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "drift"}
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "drift"
        ):
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names if module_file(f"{node.module}.{a.name}")}
        elif isinstance(node, ast.ImportFrom) and node.level > 0:  # relative: resolve against the package
            package = path.relative_to(ROOT).parent.parts[
                : len(path.relative_to(ROOT).parent.parts) - node.level + 1
            ]
            base = ".".join(package + ((node.module,) if node.module else ()))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names if module_file(f"{base}.{a.name}")}
    return frozenset(found)


def closure(script: Path) -> set[Path]:
    """Every file of drift/ the script needs, its packages' __init__.py included (importing drift.a.b runs
    both)."""
    seen: set[Path] = set()
    todo = [script]
    while todo:
        for module in imported_modules(todo.pop()):
            parts = module.split(".")
            for i in range(1, len(parts) + 1):
                f = module_file(".".join(parts[:i]))
                if f is not None and f not in seen:
                    seen.add(f)
                    todo.append(f)
    return seen


def covered(path: Path, deps: list[str]) -> bool:
    rel = path.relative_to(ROOT)
    return any(rel == Path(d) or Path(d) in rel.parents for d in deps)


def test_every_stage_depends_on_its_import_closure():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    missing = {}
    for name, stage in stages.items():
        spec = stage.get("do", stage)
        script = ROOT / spec["cmd"].split()[1]
        deps = [d for d in spec["deps"] if "${" not in d]
        assert covered(script, deps), f"stage {name} does not depend on its own script {script.name}"
        lacking = sorted(str(f.relative_to(ROOT)) for f in closure(script) if not covered(f, deps))
        if lacking:
            missing[name] = lacking
    assert not missing, f"dvc.yaml deps miss modules the stages import: {missing}"


def test_closure_follows_function_level_and_package_imports(tmp_path):
    # an independent check of the walker on the train stage: drift.models.checkpoints is imported by
    # drift.train.loop, drift.models.reference by drift/models/__init__.py
    files = {str(f.relative_to(ROOT)) for f in closure(ROOT / "stages/train.py")}
    assert {
        "drift/train/loop.py",
        "drift/models/checkpoints.py",
        "drift/models/__init__.py",
        "drift/models/reference.py",
        "drift/__init__.py",
    } <= files


def resolved_deps() -> dict[tuple[str, str], list[str]]:
    """{(stage, dataset): its deps} for every dataset of the table, `${item.*}` and `${key}` filled in from
    the `datasets` entry params.yaml would give it (drift/core/dataset_registry.py names its reader)."""
    from drift.core.dataset_registry import DATASETS

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    out = {}
    for dataset in DATASETS:
        item = {"${item.input}": f"data/raw/{dataset}", "${key}": dataset}
        for name, stage in stages.items():
            deps = []
            for dep in stage.get("do", stage)["deps"]:
                for var, value in item.items():
                    dep = dep.replace(var, value)
                deps.append(dep)
            out[name, dataset] = deps
    return out


def test_a_reader_edit_reruns_only_its_datasets_ingest(tmp_path):
    """Editing drift/data/datasets/<module>.py changes what one stage depends on: ingest of its dataset,
    through the check stage's data/checked/<dataset>.json (its reader's code digest). No other dataset's
    ingest, no slice, embed, train, evaluate or report; a docstring or comment edit re-runs nothing."""
    from drift.core.dataset_registry import DATASETS
    from drift.core.params import load_params
    from drift.run.checks import checked_record
    from tests.helpers import SHIPPED_PARAMS

    data = yaml.safe_load(SHIPPED_PARAMS.read_text())
    data["datasets"] = {name: {"input": f"data/raw/{name}"} for name in DATASETS}
    params = load_params(data)
    deps = resolved_deps()
    shutil.copytree(ROOT / "drift", tmp_path / "drift", ignore=shutil.ignore_patterns("__pycache__"))
    before = {name: checked_record(params, name, tmp_path) for name in DATASETS}
    assert before == {name: checked_record(params, name) for name in DATASETS}  # the digest is the code's
    for dataset, info in DATASETS.items():
        reader = ROOT / info.reader
        assert reader.exists()
        depending = {key for key, paths in deps.items() if covered(reader, paths)}
        assert depending == set(), (
            f"{info.reader} is a dep of {sorted(depending)}: it comes through data/checked"
        )
        assert [key for key, paths in deps.items() if f"data/checked/{dataset}.json" in paths] == [
            ("ingest", dataset)
        ]
        # and ingest@<dataset> depends on everything its reader imports
        lacking = [
            str(f.relative_to(ROOT)) for f in closure(reader) if not covered(f, deps["ingest", dataset])
        ]
        assert not lacking, f"ingest@{dataset} misses {lacking}, which its reader imports"
        copy = tmp_path / info.reader
        text = copy.read_text()
        copy.write_text(text + "\n# a comment\n")
        assert {n: checked_record(params, n, tmp_path) for n in DATASETS} == before
        copy.write_text(text + "\n_EDITED = 1\n")
        after = {n: checked_record(params, n, tmp_path) for n in DATASETS}
        assert [n for n in DATASETS if after[n] != before[n]] == [dataset]
        copy.write_text(text)


def test_only_ingest_imports_a_reader():
    """The later stages read task, modality and label names from the table or the slice manifest."""
    from drift.core.dataset_registry import DATASETS

    readers = {ROOT / info.reader for info in DATASETS.values()}
    for script in sorted((ROOT / "stages").glob("*.py")):
        if script.stem != "ingest":
            assert not closure(script) & readers, f"{script.name} imports a reader"

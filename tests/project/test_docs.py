"""The repository documents itself: docs/architecture.md names every module of drift/, and no file refers to a
document outside the repository."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_architecture_names_every_module():
    # every package, and every module in the row of its package in the table of packages
    doc = (ROOT / "docs/architecture.md").read_text()
    rows = {
        line.split("|")[1].strip().strip("`"): line for line in doc.splitlines() if line.startswith("| `")
    }
    packages = [p for p in (ROOT / "drift").iterdir() if (p / "__init__.py").exists()]
    missing = [f"{p.name}/" for p in packages if f"{p.name}/" not in rows]
    for package in packages:
        row = rows.get(f"{package.name}/", "")
        missing += [
            f"{package.name}/{m.name}"
            for m in package.glob("*.py")
            if m.name not in ("__init__.py", "__main__.py") and f"`{m.name}`" not in row
        ]
    assert not missing, f"docs/architecture.md does not mention {missing}"


def test_no_reference_outside_the_repository():
    texts = [
        p
        for pattern in (
            "drift/**/*.py",
            "stages/*.py",
            "*.md",
            "docs/**/*.md",
            "dvc.yaml",
            "params.yaml",
            "params/*.yaml",
            "Makefile",
        )
        for p in ROOT.glob(pattern)
    ]
    offenders = [
        str(p.relative_to(ROOT))
        for p in texts
        if "DESIGN.md" in p.read_text() or "../shared" in p.read_text()
    ]
    assert not offenders, f"these files refer to documents outside the repository: {offenders}"


def test_every_test_the_reliability_section_names_exists():
    import re

    section = (ROOT / "docs/explanations/reliability.md").read_text()
    named = set(re.findall(r"`(?:tests/(?:\w+/)?(test_\w+)\.py::)?(test_\w+)`", section))
    sources = {p.stem: p.read_text() for p in (ROOT / "tests").rglob("test_*.py")}
    missing = [
        f"{file or 'test_untrusted'}::{name}"
        for file, name in named
        if f"def {name}(" not in sources.get(file or "test_untrusted", "")
    ]
    assert len(named) >= 15 and not missing, f"the Reliability page names tests that do not exist: {missing}"

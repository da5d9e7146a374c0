"""The repository documents itself: docs/architecture.md names every module of drift/, and no file refers to a
document outside the repository."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_architecture_names_every_module():
    doc = (ROOT / "docs/architecture.md").read_text()
    modules = [p for p in (ROOT / "drift").glob("*.py") if p.name != "__init__.py"]
    packages = [p for p in (ROOT / "drift").iterdir() if (p / "__init__.py").exists()]
    missing = [p.name for p in modules if p.name not in doc] + [f"{p.name}/" for p in packages if f"{p.name}/" not in doc]
    assert not missing, f"docs/architecture.md does not mention {missing}"


def test_no_reference_outside_the_repository():
    texts = [p for pattern in ("drift/**/*.py", "stages/*.py", "*.md", "docs/*.md", "dvc.yaml", "params.yaml",
                               "params/*.yaml", "Makefile") for p in ROOT.glob(pattern)]
    offenders = [str(p.relative_to(ROOT)) for p in texts if "DESIGN.md" in p.read_text() or "../shared" in p.read_text()]
    assert not offenders, f"these files refer to documents outside the repository: {offenders}"

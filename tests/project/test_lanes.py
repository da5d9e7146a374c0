"""The lanes of `make test-fast`, set where a test lives or by its own mark (tests/conftest.py): everything in
tests/pipeline/ is `pipeline`; elsewhere a test is in the fast lane unless it carries `pytest.mark.pipeline`
or `pytest.mark.compute`. Nothing is inferred from a test's text."""

from pathlib import Path

import pytest

from tests.helpers import LAYER_PACKAGES

TESTS = Path(__file__).resolve().parents[1]
LAYERS = set(LAYER_PACKAGES)


def markers(node) -> set[str]:
    return {m.name for m in node.iter_markers()} & {"pipeline", "compute"}


def test_an_unmarked_test_is_in_the_fast_lane(request):
    assert markers(request.node) == set()


@pytest.mark.compute
def test_a_mark_puts_a_test_in_its_lane(request):
    assert markers(request.node) == {"compute"}


def test_every_test_in_the_pipeline_folder_is_in_the_pipeline_lane(request):
    collected = [item for item in request.session.items if TESTS / "pipeline" in item.path.parents]
    assert all("pipeline" in markers(item) for item in collected)


def test_tests_live_in_a_folder_per_package():
    """tests/<layer>/ for drift's layer packages, tests/pipeline/ for the end-to-end runs, tests/project/ for
    the repository as a whole (docs, layers, benchmarks); no test file at the top."""
    assert not list(TESTS.glob("test_*.py"))
    folders = {p.parent.name for p in TESTS.rglob("test_*.py")}
    assert folders <= LAYERS | {"pipeline", "project"}, folders - LAYERS
    assert all((TESTS / folder / "__init__.py").exists() for folder in folders)
